/* rsockets in one process (a server thread and a client thread over the
 * in-process world): a large transfer arrives intact, the end of the
 * stream reads as 0 after rshutdown, non-blocking calls say EAGAIN,
 * rpoll reports readiness for rsockets and a pipe together, riowrite
 * lands in the peer's riomap'd buffer, and misuse gets the socket errnos
 * (EBADF, ENOTCONN, ECONNREFUSED, EPROTONOSUPPORT, EINVAL).
 * Run by shim/tests/c_programs.rs. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <rdma/rsocket.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); exit(1); } } while (0)

#define BIG (6 * 1024 * 1024 + 12345)
#define PORT 7600

static struct sockaddr_in addr(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "10.0.0.1", &a.sin_addr);
	return a;
}

static unsigned char pattern(size_t i) { return (unsigned char)(i * 131 + (i >> 13)); }

static int lfd;
/* The io server drains only once main has seen its sends fill up. */
static int go[2];
static unsigned char iobuf[4096];

static void *server(void *arg)
{
	(void)arg;
	struct sockaddr_in peer;
	socklen_t len = sizeof peer;
	int s = raccept(lfd, (struct sockaddr *)&peer, &len);
	CHECK(s >= 0);
	CHECK(len == sizeof peer && peer.sin_family == AF_INET);

	/* The large transfer, read in odd-sized pieces, checked byte by byte. */
	unsigned char *buf = malloc(BIG);
	size_t got = 0;
	while (got < BIG) {
		size_t want = got % 3 ? 7777 : 100000;
		if (want > BIG - got)
			want = BIG - got;
		ssize_t n = rrecv(s, buf + got, want, 0);
		CHECK(n > 0);
		got += n;
	}
	for (size_t i = 0; i < BIG; i++)
		if (buf[i] != pattern(i)) {
			fprintf(stderr, "byte %zu differs\n", i);
			exit(1);
		}
	free(buf);

	/* MSG_PEEK leaves the data; MSG_WAITALL waits for all of it. */
	char w[8];
	CHECK(rrecv(s, w, 4, MSG_PEEK) == 4 && memcmp(w, "peek", 4) == 0);
	CHECK(rrecv(s, w, 8, MSG_WAITALL) == 8 && memcmp(w, "peekdata", 8) == 0);

	/* riomap: the client writes into iobuf, then says so with a message. */
	int one = 0;
	CHECK(riomap(s, iobuf, sizeof iobuf, PROT_WRITE, 0, 0) == -1 && errno == ENOMEM); /* no RDMA_IOMAPSIZE on this side */
	CHECK(rsend(s, "m", 1, 0) == 1);
	CHECK(rrecv(s, w, 1, 0) == 1 && w[0] == 'w');
	(void)one;

	/* The end of the stream: 0, again and again. */
	CHECK(rrecv(s, w, 1, 0) == 0);
	CHECK(rrecv(s, w, 1, 0) == 0);
	CHECK(rshutdown(s, SHUT_RDWR) == 0);
	CHECK(rclose(s) == 0);
	return NULL;
}

static void *io_server(void *arg)
{
	(void)arg;
	int s = raccept(lfd, NULL, NULL);
	CHECK(s >= 0);
	int val = 1;
	(void)val;
	CHECK(riomap(s, iobuf, sizeof iobuf, PROT_WRITE, 0, 0) == 0);
	CHECK(rsend(s, "m", 1, 0) == 1); /* the mapping is published before this */
	char w;
	CHECK(rrecv(s, &w, 1, 0) == 1 && w == 'w');
	for (size_t i = 0; i < sizeof iobuf; i++)
		CHECK(iobuf[i] == (unsigned char)(i ^ 0x5a));
	CHECK(riounmap(s, iobuf, sizeof iobuf) == 0);
	CHECK(rsend(s, "u", 1, 0) == 1);
	/* The client fills what it can without our reading, then closes:
	 * what it sent is read, then the end. */
	static char sink[100000];
	char g;
	CHECK(read(go[0], &g, 1) == 1);
	ssize_t n;
	size_t drained = 0;
	while ((n = rrecv(s, sink, sizeof sink, 0)) > 0)
		drained += n;
	CHECK(n == 0 && drained > 0);
	CHECK(rclose(s) == 0);
	return NULL;
}

int main(void)
{
	/* Misuse first. */
	errno = 0;
	CHECK(rsocket(AF_INET, SOCK_RAW, 0) == -1 && errno == EPROTONOSUPPORT);
	CHECK(rsocket(AF_UNIX, SOCK_STREAM, 0) == -1 && errno == EAFNOSUPPORT);
	char c;
	CHECK(rrecv(12345, &c, 1, 0) == -1 && errno == EBADF);
	CHECK(rsend(-1, &c, 1, 0) == -1 && errno == EBADF);
	CHECK(rclose(12345) == -1 && errno == EBADF);
	int u = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(u >= 0);
	CHECK(rrecv(u, &c, 1, 0) == -1 && errno == ENOTCONN);
	CHECK(rsend(u, &c, 1, 0) == -1 && errno == ENOTCONN);
	CHECK(rshutdown(u, SHUT_WR) == -1 && errno == ENOTCONN);
	struct sockaddr_in pa;
	socklen_t pl = sizeof pa;
	CHECK(rgetpeername(u, (struct sockaddr *)&pa, &pl) == -1 && errno == ENOTCONN);
	CHECK(rfcntl(u, F_GETFL) == O_RDWR);
	CHECK(rfcntl(u, F_SETFL, O_NONBLOCK) == 0 && rfcntl(u, F_GETFL) == (O_RDWR | O_NONBLOCK));
	CHECK(rsetsockopt(u, SOL_SOCKET, 12345, &pl, sizeof pl) == -1 && errno == ENOTSUP);
	/* Nobody listens on this port: refused. */
	struct sockaddr_in nobody = addr(PORT + 9);
	CHECK(rfcntl(u, F_SETFL, 0) == 0);
	errno = 0;
	CHECK(rconnect(u, (struct sockaddr *)&nobody, sizeof nobody) == -1 && errno == ECONNREFUSED);
	CHECK(rclose(u) == 0);
	/* The same, non-blocking: EINPROGRESS, then rpoll says POLLOUT|POLLERR
	 * and SO_ERROR says why (once). */
	u = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(u >= 0);
	CHECK(rconnect(u, (struct sockaddr *)&nobody, sizeof nobody) == -1 && errno == EINPROGRESS);
	CHECK(rconnect(u, (struct sockaddr *)&nobody, sizeof nobody) == -1 && errno == EALREADY);
	struct pollfd up = { .fd = u, .events = POLLOUT };
	CHECK(rpoll(&up, 1, 10000) == 1 && (up.revents & POLLOUT) && (up.revents & POLLERR));
	int err = 0;
	socklen_t el = sizeof err;
	CHECK(rgetsockopt(u, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == ECONNREFUSED && el == sizeof err);
	CHECK(rgetsockopt(u, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
	CHECK(rclose(u) == 0);

	/* A listener, and the big transfer. */
	struct sockaddr_in a = addr(PORT);
	lfd = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(lfd >= 0);
	int on = 1;
	CHECK(rsetsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0);
	CHECK(rbind(lfd, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(rlisten(lfd, 4) == 0);
	struct sockaddr_in name;
	socklen_t nl = sizeof name;
	CHECK(rgetsockname(lfd, (struct sockaddr *)&name, &nl) == 0 && name.sin_port == htons(PORT));
	/* Non-blocking accept with nothing queued: EAGAIN; rpoll says not ready. */
	CHECK(rfcntl(lfd, F_SETFL, O_NONBLOCK) == 0);
	CHECK(raccept(lfd, NULL, NULL) == -1 && errno == EAGAIN);
	struct pollfd lp = { .fd = lfd, .events = POLLIN };
	CHECK(rpoll(&lp, 1, 0) == 0);
	CHECK(rfcntl(lfd, F_SETFL, 0) == 0);

	pthread_t th;
	CHECK(pthread_create(&th, NULL, server, NULL) == 0);
	int s = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0);
	CHECK(rconnect(s, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(rconnect(s, (struct sockaddr *)&a, sizeof a) == -1 && errno == EISCONN);
	pl = sizeof pa;
	CHECK(rgetpeername(s, (struct sockaddr *)&pa, &pl) == 0 && pa.sin_port == htons(PORT));

	/* Nothing to read yet: EAGAIN with MSG_DONTWAIT; rpoll: writable, not
	 * readable; a pipe in the same call is seen too. */
	CHECK(rrecv(s, &c, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
	int p[2];
	CHECK(pipe(p) == 0 && write(p[1], "x", 1) == 1);
	struct pollfd pf[2] = { { .fd = s, .events = POLLIN | POLLOUT }, { .fd = p[0], .events = POLLIN } };
	CHECK(rpoll(pf, 2, 1000) == 2 && pf[0].revents == POLLOUT && pf[1].revents == POLLIN);

	unsigned char *big = malloc(BIG);
	for (size_t i = 0; i < BIG; i++)
		big[i] = pattern(i);
	/* Two iovecs in one rsendmsg, then the rest with rwrite. */
	struct iovec iov[2] = { { big, 1000 }, { big + 1000, 300000 } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	CHECK(rsendmsg(s, &mh, 0) == 301000);
	size_t off = 301000;
	while (off < BIG) {
		ssize_t n = rwrite(s, big + off, BIG - off);
		CHECK(n > 0);
		off += n;
	}
	CHECK(rsend(s, "peekdata", 8, 0) == 8);
	/* The server's message arrives: rpoll says readable. */
	struct pollfd rp = { .fd = s, .events = POLLIN };
	CHECK(rpoll(&rp, 1, 10000) == 1 && (rp.revents & POLLIN));
	CHECK(rrecv(s, &c, 1, 0) == 1 && c == 'm');
	/* No peer mapping: riowrite fails with EINVAL. */
	CHECK(riowrite(s, "z", 1, 0, 0) == (size_t)-1 && errno == EINVAL);
	CHECK(rsend(s, "w", 1, 0) == 1);
	/* Orderly shutdown: the server reads 0 and closes; so do we. */
	CHECK(rshutdown(s, SHUT_WR) == 0);
	CHECK(rsend(s, "x", 1, 0) == -1 && errno == EPIPE);
	CHECK(rrecv(s, &c, 1, 0) == 0);
	CHECK(pthread_join(th, NULL) == 0);
	CHECK(rclose(s) == 0);

	/* Non-blocking sends with a reader that does not read: a partial
	 * write, then EAGAIN. */
	/* Accepted sockets take the listener's RDMA_IOMAPSIZE; after the
	 * connection it is too late to change it. */
	int maps = 2;
	CHECK(rsetsockopt(lfd, SOL_RDMA, RDMA_IOMAPSIZE, &maps, sizeof maps) == 0);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &maps, sizeof maps) == 0);
	/* A non-blocking connect that succeeds: rselect sees it writable, and
	 * SO_ERROR is 0. */
	CHECK(rfcntl(s, F_SETFL, O_NONBLOCK) == 0);
	CHECK(rconnect(s, (struct sockaddr *)&a, sizeof a) == -1 && errno == EINPROGRESS);
	/* rpoll drives the connect (as rsockets do) and sees the request wait
	 * on the listener: POLLIN there, the connecting socket not yet
	 * writable (nobody accepted). */
	struct pollfd two[2] = { { .fd = lfd, .events = POLLIN }, { .fd = s, .events = POLLOUT } };
	CHECK(rpoll(two, 2, 10000) == 1 && two[0].revents == POLLIN && two[1].revents == 0);
	CHECK(pipe(go) == 0);
	CHECK(pthread_create(&th, NULL, io_server, NULL) == 0);
	fd_set wr;
	FD_ZERO(&wr);
	FD_SET(s, &wr);
	struct timeval tv = { 10, 0 };
	CHECK(rselect(s + 1, NULL, &wr, NULL, &tv) == 1 && FD_ISSET(s, &wr));
	err = -1;
	CHECK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
	CHECK(rfcntl(s, F_SETFL, 0) == 0);
	CHECK(rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &maps, sizeof maps) == -1 && errno == EINVAL);
	CHECK(rrecv(s, &c, 1, 0) == 1 && c == 'm');
	unsigned char src[4096];
	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (unsigned char)(i ^ 0x5a);
	size_t done = 0;
	while (done < sizeof src) {
		size_t n = riowrite(s, src + done, sizeof src - done, done, 0);
		CHECK(n != (size_t)-1 && n > 0);
		done += n;
	}
	CHECK(rsend(s, "w", 1, 0) == 1);
	CHECK(rrecv(s, &c, 1, 0) == 1 && c == 'u');
	CHECK(riowrite(s, src, 1, 0, 0) == (size_t)-1 && errno == EINVAL); /* unmapped now */
	CHECK(rfcntl(s, F_SETFL, O_NONBLOCK) == 0);
	ssize_t first = rsend(s, big, BIG, 0);
	CHECK(first > 0 && first < BIG);
	CHECK(rsend(s, big, BIG, 0) == -1 && errno == EAGAIN);
	CHECK(write(go[1], "g", 1) == 1);
	CHECK(rclose(s) == 0);
	CHECK(pthread_join(th, NULL) == 0);
	free(big);
	CHECK(rclose(lfd) == 0);
	CHECK(rpoll(&lp, 1, 0) == 1 && lp.revents == POLLNVAL);
	printf("ok\n");
	return 0;
}
