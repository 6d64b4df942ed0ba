/* Datagram rsockets (SOCK_DGRAM over UD) in one process: an unbound
 * socket sends to a bound one, which learns the sender's address from
 * rrecvfrom and answers it; rconnect sets a default destination; an
 * oversized datagram is EMSGSIZE; rpoll sees a waiting datagram; listen
 * and accept are EOPNOTSUPP. Run by shim/tests/c_programs.rs. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rsocket.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); exit(1); } } while (0)

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(7800) };
	inet_pton(AF_INET, "10.0.0.1", &a.sin_addr);
	int srv = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(srv >= 0);
	CHECK(rbind(srv, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(rlisten(srv, 1) == -1 && errno == EOPNOTSUPP);
	int cli = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(cli >= 0);
	char buf[5000];
	CHECK(rrecv(srv, buf, sizeof buf, MSG_DONTWAIT) == -1 && errno == EAGAIN);

	CHECK(rsendto(cli, "ping", 4, 0, (struct sockaddr *)&a, sizeof a) == 4);
	struct pollfd p = { .fd = srv, .events = POLLIN };
	CHECK(rpoll(&p, 1, 10000) == 1 && p.revents == POLLIN);
	struct sockaddr_in from;
	socklen_t fl = sizeof from;
	CHECK(rrecvfrom(srv, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl) == 4 && memcmp(buf, "ping", 4) == 0);
	CHECK(fl == sizeof from && from.sin_family == AF_INET && from.sin_port != 0);
	struct sockaddr_in me;
	socklen_t ml = sizeof me;
	CHECK(rgetsockname(cli, (struct sockaddr *)&me, &ml) == 0 && me.sin_port == from.sin_port);

	/* The answer goes back to the address the datagram came from. */
	CHECK(rsendto(srv, "pong", 4, 0, (struct sockaddr *)&from, fl) == 4);
	CHECK(rrecv(cli, buf, sizeof buf, 0) == 4 && memcmp(buf, "pong", 4) == 0);

	/* A default destination; a datagram larger than a buffer is cut. */
	CHECK(rconnect(cli, (struct sockaddr *)&a, sizeof a) == 0);
	static char big[4064];
	memset(big, 'b', sizeof big);
	CHECK(rsend(cli, big, sizeof big, 0) == sizeof big);
	CHECK(rsend(cli, big, sizeof big + 1, 0) == -1 && errno == EMSGSIZE);
	CHECK(rrecv(srv, buf, 10, 0) == 10 && buf[9] == 'b');
	CHECK(rrecv(srv, buf, 10, MSG_DONTWAIT) == -1 && errno == EAGAIN);

	CHECK(rclose(cli) == 0 && rclose(srv) == 0);
	printf("ok\n");
	return 0;
}
