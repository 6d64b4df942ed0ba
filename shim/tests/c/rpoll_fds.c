/* rpoll and rselect on ordinary descriptors and on the descriptors the
 * drop-in libraries own (a CM event channel's, a completion channel's):
 * a pipe is ready exactly when written; the CM channel's fd becomes ready
 * when rdma_resolve_addr's event is pending and stops being ready once it
 * is taken; a closed fd is POLLNVAL (rpoll) and EBADF (rselect). Run by
 * shim/tests/c_programs.rs. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

int main(void)
{
	int p[2];
	char c = 'x';
	CHECK(pipe(p) == 0);

	/* A pipe: not ready, then ready for reading; always ready for writing. */
	struct pollfd pf[2] = { { .fd = p[0], .events = POLLIN }, { .fd = p[1], .events = POLLOUT } };
	CHECK(rpoll(pf, 1, 0) == 0 && pf[0].revents == 0);
	CHECK(rpoll(pf, 2, 20) == 1 && pf[0].revents == 0 && pf[1].revents == POLLOUT);
	CHECK(write(p[1], &c, 1) == 1);
	CHECK(rpoll(pf, 1, -1) == 1 && pf[0].revents == POLLIN);

	fd_set rd, wr;
	struct timeval tv = { 0, 0 };
	FD_ZERO(&rd); FD_ZERO(&wr);
	FD_SET(p[0], &rd); FD_SET(p[1], &wr);
	CHECK(rselect(p[1] + 1, &rd, &wr, NULL, &tv) == 2 && FD_ISSET(p[0], &rd) && FD_ISSET(p[1], &wr));
	CHECK(read(p[0], &c, 1) == 1);
	FD_ZERO(&rd); FD_SET(p[0], &rd);
	tv.tv_usec = 20000;
	CHECK(rselect(p[0] + 1, &rd, NULL, NULL, &tv) == 0 && !FD_ISSET(p[0], &rd));

	/* The CM event channel's fd, mixed with the pipe in one call. */
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(7500) };
	CHECK(ch && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	struct pollfd mix[2] = { { .fd = p[0], .events = POLLIN }, { .fd = ch->fd, .events = POLLIN } };
	CHECK(rpoll(mix, 2, 0) == 0);
	inet_pton(AF_INET, "10.0.0.1", &dst.sin_addr);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	CHECK(rpoll(mix, 2, 5000) == 1 && mix[0].revents == 0 && mix[1].revents == POLLIN);
	FD_ZERO(&rd); FD_SET(ch->fd, &rd); FD_SET(p[0], &rd);
	tv.tv_sec = 5; tv.tv_usec = 0;
	CHECK(rselect((ch->fd > p[0] ? ch->fd : p[0]) + 1, &rd, NULL, NULL, &tv) == 1 && FD_ISSET(ch->fd, &rd) && !FD_ISSET(p[0], &rd));
	CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(rdma_ack_cm_event(ev) == 0);
	CHECK(rpoll(mix, 2, 20) == 0 && mix[1].revents == 0);

	/* A completion channel's fd: not ready while no completion event waits. */
	struct ibv_comp_channel *cc = ibv_create_comp_channel(id->verbs);
	CHECK(cc);
	struct pollfd pc = { .fd = cc->fd, .events = POLLIN };
	CHECK(rpoll(&pc, 1, 10) == 0 && pc.revents == 0);
	CHECK(ibv_destroy_comp_channel(cc) == 0);

	/* A closed descriptor: POLLNVAL from rpoll, EBADF from rselect. */
	int gone = p[0];
	close(p[0]);
	struct pollfd pb = { .fd = gone, .events = POLLIN };
	CHECK(rpoll(&pb, 1, 0) == 1 && pb.revents == POLLNVAL);
	FD_ZERO(&rd); FD_SET(gone, &rd);
	tv.tv_sec = 0;
	errno = 0;
	CHECK(rselect(gone + 1, &rd, NULL, NULL, &tv) == -1 && errno == EBADF);

	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
	close(p[1]);
	printf("ok\n");
	return 0;
}
