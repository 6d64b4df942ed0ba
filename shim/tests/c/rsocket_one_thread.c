/* rsockets driven from one thread: a non-blocking listener and a
 * non-blocking connect brought up with rpoll, 300 KB moved with
 * non-blocking sends and receives interleaved, a shutdown seen as EOF.
 * Run twice with the same seed by shim/tests/c_programs.rs, which
 * compares the traces. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rsocket.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); exit(1); } } while (0)
#define LEN 300000

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(7700) };
	inet_pton(AF_INET, "10.0.0.1", &a.sin_addr);
	int l = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(l >= 0 && rbind(l, (struct sockaddr *)&a, sizeof a) == 0 && rlisten(l, 1) == 0);
	int c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(c >= 0);
	CHECK(rconnect(c, (struct sockaddr *)&a, sizeof a) == -1 && errno == EINPROGRESS);
	struct pollfd p[2] = { { .fd = l, .events = POLLIN }, { .fd = c, .events = POLLOUT } };
	while (!(p[0].revents & POLLIN))
		CHECK(rpoll(p, 2, -1) >= 1);
	int s = raccept(l, NULL, NULL);
	CHECK(s >= 0);
	p[1].revents = 0;
	while (!(p[1].revents & POLLOUT))
		CHECK(rpoll(&p[1], 1, -1) == 1);
	CHECK(p[1].revents == POLLOUT);

	static unsigned char out[LEN], in[LEN];
	for (int i = 0; i < LEN; i++)
		out[i] = (unsigned char)(i * 7 + 3);
	size_t sent = 0, got = 0;
	CHECK(rfcntl(s, F_SETFL, O_NONBLOCK) == 0);
	while (got < LEN) {
		if (sent < LEN) {
			ssize_t n = rsend(c, out + sent, LEN - sent, 0);
			CHECK(n > 0 || errno == EAGAIN);
			if (n > 0)
				sent += n;
		}
		ssize_t n = rrecv(s, in + got, LEN - got, 0);
		CHECK(n > 0 || errno == EAGAIN);
		if (n > 0)
			got += n;
	}
	CHECK(memcmp(in, out, LEN) == 0);
	CHECK(rshutdown(c, SHUT_WR) == 0);
	struct pollfd e = { .fd = s, .events = POLLIN };
	CHECK(rpoll(&e, 1, -1) == 1 && (e.revents & POLLIN));
	char x;
	CHECK(rrecv(s, &x, 1, 0) == 0);
	CHECK(rclose(s) == 0 && rclose(c) == 0 && rclose(l) == 0);
	printf("ok\n");
	return 0;
}
