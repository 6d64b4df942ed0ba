/* rdma_destroy_id and the events of the id it ends, as librdmacm and the
 * kernel's ucma do: an event queued and not yet taken goes with its id (a
 * listener's connection request takes its new id with it, whose peer is
 * rejected; a request's id takes its own events), and rdma_destroy_id
 * waits until the events already handed out for the id are acknowledged
 * on another thread, while a request that comes for the listener
 * meanwhile is never handed out. Run by shim/tests/c_programs.rs in one
 * process and over a shared fabric. Exit 0 and "ok" on success; the
 * failing step and errno otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)
#define TCHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return (void *)1; } } while (0)

static int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want, struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev)) {
		fprintf(stderr, "rdma_get_cm_event: errno %d\n", errno);
		return -1;
	}
	if (ev->event != want) {
		fprintf(stderr, "got %s (status %d), wanted %s\n", rdma_event_str(ev->event), ev->status, rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return -1;
	}
	if (id)
		*id = ev->id;
	return rdma_ack_cm_event(ev);
}

static struct sockaddr_in tick_dst;

/* Moves virtual time on: an address resolved on channel `h` of its own
 * (its event is waited for, so what was due before it has happened). */
static int tick(struct rdma_event_channel *h)
{
	struct rdma_cm_id *t;
	int r;
	if (rdma_create_id(h, &t, NULL, RDMA_PS_TCP))
		return -1;
	r = rdma_resolve_addr(t, NULL, (struct sockaddr *)&tick_dst, 2000) || expect(h, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
	return (rdma_destroy_id(t) || r) ? -1 : 0;
}

/* Lets the simulated world run until `ch` has an event queued, without
 * taking it; 1 once it has, 0 after 10 s. */
static int queued(struct rdma_event_channel *h, struct rdma_event_channel *ch)
{
	for (int i = 0; i < 10000; i++) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		if (tick(h))
			return 0;
		if (poll(&p, 1, 0) == 1)
			return 1;
		usleep(1000);
	}
	return 0;
}

/* rdma_get_cm_event on a non-blocking channel finds nothing. */
static int empty(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;
	errno = 0;
	if (rdma_get_cm_event(ch, &ev) == 0) {
		fprintf(stderr, "got %s (status %d) of id %p\n", rdma_event_str(ev->event), ev->status, (void *)ev->id);
		rdma_ack_cm_event(ev);
		return 0;
	}
	return errno == EAGAIN;
}

static int client(struct rdma_event_channel *ch, struct rdma_cm_id **id, struct sockaddr_in *srv)
{
	struct ibv_qp_init_attr qpa = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }, .qp_type = IBV_QPT_RC };
	if (rdma_create_id(ch, id, NULL, RDMA_PS_TCP) || rdma_resolve_addr(*id, NULL, (struct sockaddr *)srv, 2000) ||
	    expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) || rdma_resolve_route(*id, 2000) ||
	    expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) || rdma_create_qp(*id, NULL, &qpa))
		return -1;
	return 0;
}

static int listener(struct rdma_event_channel *ch, struct rdma_cm_id **id, struct sockaddr_in *srv, int port)
{
	srv->sin_family = AF_INET;
	srv->sin_port = htons(port);
	inet_pton(AF_INET, "10.0.0.1", &srv->sin_addr);
	if (rdma_create_id(ch, id, NULL, RDMA_PS_TCP) || rdma_bind_addr(*id, (struct sockaddr *)srv) || rdma_listen(*id, 4))
		return -1;
	return 0;
}

static struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };

struct late {
	struct rdma_event_channel *sch, *hch;
	struct rdma_cm_id *c4;
	struct rdma_cm_event *held;
	volatile int acked;
};

/* While the main thread waits in rdma_destroy_id of a listener whose
 * request this thread holds: a second request comes for the listener and
 * is never handed out; then the held one is acknowledged. */
static void *late_thread(void *arg)
{
	struct late *l = arg;
	usleep(100000);
	TCHECK(rdma_connect(l->c4, &cp) == 0);
	for (int i = 0; i < 50; i++) {
		TCHECK(tick(l->hch) == 0);
		TCHECK(empty(l->sch));
	}
	l->acked = 1;
	__sync_synchronize();
	TCHECK(rdma_ack_cm_event(l->held) == 0);
	return NULL;
}

int main(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *c1 = rdma_create_event_channel(), *c2 = rdma_create_event_channel();
	struct rdma_event_channel *c3 = rdma_create_event_channel(), *c4ch = rdma_create_event_channel();
	struct rdma_event_channel *hch = rdma_create_event_channel(), *tch = rdma_create_event_channel();
	struct rdma_cm_id *l1, *l2, *l3, *id1, *id2, *id3, *id4, *s2, *s3;
	struct sockaddr_in a1, a2, a3;
	pthread_t t;
	void *tret;

	CHECK(sch && c1 && c2 && c3 && c4ch);
	CHECK(fcntl(sch->fd, F_SETFL, fcntl(sch->fd, F_GETFL) | O_NONBLOCK) == 0);
	CHECK(hch && tch);
	CHECK(listener(sch, &l1, &a1, 7471) == 0);
	tick_dst = a1;

	/* 1. A listener's connection request, queued and not taken, goes with
	 * the listener; the peer is rejected. */
	CHECK(client(c1, &id1, &a1) == 0);
	CHECK(rdma_connect(id1, &cp) == 0);
	CHECK(queued(hch, sch));
	CHECK(rdma_destroy_id(l1) == 0);
	CHECK(empty(sch));
	CHECK(expect(c1, RDMA_CM_EVENT_REJECTED, NULL) == 0);

	/* 2. A request's id destroyed with its ESTABLISHED untaken. */
	CHECK(listener(sch, &l2, &a2, 7472) == 0);
	CHECK(client(c2, &id2, &a2) == 0);
	CHECK(rdma_connect(id2, &cp) == 0);
	CHECK(queued(hch, sch));
	CHECK(expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, &s2) == 0);
	struct ibv_qp_init_attr sqa = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }, .qp_type = IBV_QPT_RC };
	CHECK(rdma_create_qp(s2, NULL, &sqa) == 0);
	CHECK(rdma_accept(s2, &cp) == 0);
	CHECK(expect(c2, RDMA_CM_EVENT_ESTABLISHED, NULL) == 0);
	CHECK(queued(hch, sch));
	rdma_destroy_qp(s2);
	CHECK(rdma_destroy_id(s2) == 0);
	CHECK(empty(sch));
	CHECK(expect(c2, RDMA_CM_EVENT_DISCONNECTED, NULL) == 0);

	/* 3. rdma_destroy_id of a listener whose request another thread holds
	 * waits for its acknowledgement; a request that comes meanwhile is
	 * not handed out, and its peer is rejected. */
	CHECK(listener(sch, &l3, &a3, 7473) == 0);
	CHECK(client(c3, &id3, &a3) == 0);
	CHECK(client(c4ch, &id4, &a3) == 0);
	CHECK(rdma_connect(id3, &cp) == 0);
	CHECK(queued(hch, sch));
	struct late l = { .sch = sch, .hch = tch, .c4 = id4 };
	CHECK(rdma_get_cm_event(sch, &l.held) == 0 && l.held->event == RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(l.held->listen_id == l3);
	s3 = l.held->id;
	CHECK(pthread_create(&t, NULL, late_thread, &l) == 0);
	CHECK(rdma_destroy_id(l3) == 0);
	__sync_synchronize();
	CHECK(l.acked == 1);
	CHECK(pthread_join(t, &tret) == 0 && tret == NULL);
	CHECK(expect(c4ch, RDMA_CM_EVENT_REJECTED, NULL) == 0);
	/* The request's own id stays the program's until it destroys it; its
	 * peer, never answered, has given up by now (or is rejected). */
	CHECK(rdma_destroy_id(s3) == 0);
	struct rdma_cm_event *e3;
	CHECK(rdma_get_cm_event(c3, &e3) == 0 && e3->id == id3);
	CHECK(e3->event == RDMA_CM_EVENT_UNREACHABLE || e3->event == RDMA_CM_EVENT_REJECTED);
	CHECK(rdma_ack_cm_event(e3) == 0);
	CHECK(empty(sch));

	rdma_destroy_qp(id1);
	rdma_destroy_qp(id2);
	rdma_destroy_qp(id3);
	rdma_destroy_qp(id4);
	CHECK(rdma_destroy_id(id1) == 0 && rdma_destroy_id(id2) == 0 && rdma_destroy_id(id3) == 0 && rdma_destroy_id(id4) == 0);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(c1);
	rdma_destroy_event_channel(c2);
	rdma_destroy_event_channel(c3);
	rdma_destroy_event_channel(c4ch);
	rdma_destroy_event_channel(hch);
	rdma_destroy_event_channel(tch);
	printf("ok\n");
	return 0;
}
