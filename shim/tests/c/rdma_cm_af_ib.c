/* AF_IB addresses (struct sockaddr_ib, as libfabric's verbs provider
 * passes them) in the simulated CM: a listener binds device 0's port by
 * its GID and a service id, a client resolves the same address and
 * connects; the local and peer addresses the ids report are sockaddr_ib
 * (the port's GID, the service id: port space and port), including the id
 * the CONNECT_REQUEST brings; rdma_getaddrinfo with AF_IB hints and no
 * name answers with them and keeps RAI_PASSIVE; rdma_get_devices lists
 * the contexts ids use, so a PD made on one serves an id's QP. A GID no port has is
 * EADDRNOTAVAIL, an unknown family EINVAL, and the id stays usable; AF_IB
 * multicast stays EOPNOTSUPP. Run against verbsim's drop-in libraries by
 * shim/tests/c_programs.rs. Exit 0 and "ok" on success; the failing step
 * and errno otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/ib.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

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

/* The address is a sockaddr_ib of GID `gid` and service id `sid`. */
static int is_ib(struct sockaddr *sa, const union ibv_gid *gid, uint64_t sid)
{
	struct sockaddr_ib *ib = (struct sockaddr_ib *)sa;
	if (ib->sib_family != AF_IB)
		return 0;
	if (memcmp(&ib->sib_addr, gid, 16))
		return 0;
	return be64toh(ib->sib_sid) == sid;
}

int main(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel(), *cch = rdma_create_event_channel();
	struct rdma_cm_id *listener, *client, *server, *other;
	struct ibv_context **devs;
	struct ibv_pd *pd;
	union ibv_gid gid;
	struct sockaddr_ib ib, bad;
	struct sockaddr_in in = { .sin_family = AF_INET };
	struct sockaddr_storage odd;
	struct rdma_addrinfo hints, *res;
	struct ibv_qp_init_attr qpa = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }, .qp_type = IBV_QPT_RC };
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
	const uint64_t sid = RDMA_IB_PS_IB | 7471;
	int n;

	CHECK(sch && cch);
	devs = rdma_get_devices(&n);
	CHECK(devs && n > 0);
	CHECK(ibv_query_gid(devs[0], 1, 0, &gid) == 0);
	memset(&ib, 0, sizeof ib);
	ib.sib_family = AF_IB;
	ib.sib_pkey = htobe16(0xffff);
	memcpy(&ib.sib_addr, &gid, 16);
	ib.sib_sid = htobe64(sid);
	ib.sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK | 0xffff);

	/* rdma_getaddrinfo: no name, AF_IB hints: the hints' address, passive kept. */
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_family = AF_IB;
	hints.ai_port_space = RDMA_PS_IB;
	hints.ai_src_addr = (struct sockaddr *)&ib;
	hints.ai_src_len = sizeof ib;
	CHECK(rdma_getaddrinfo(NULL, NULL, &hints, &res) == 0);
	CHECK(res->ai_family == AF_IB && (res->ai_flags & RAI_PASSIVE));
	CHECK(res->ai_src_len == sizeof(struct sockaddr_ib) && is_ib(res->ai_src_addr, &gid, sid));
	rdma_freeaddrinfo(res);

	/* A GID no port has, and an unknown family: refused, nothing bound. */
	CHECK(rdma_create_id(sch, &listener, NULL, RDMA_PS_IB) == 0);
	bad = ib;
	memset(&bad.sib_addr, 0x5a, 16);
	errno = 0;
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&bad) == -1 && errno == EADDRNOTAVAIL);
	memset(&odd, 0, sizeof odd);
	odd.ss_family = 99;
	errno = 0;
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&odd) == -1 && errno == EINVAL);
	CHECK(listener->verbs == NULL);

	/* The listener binds the port by GID and service id. */
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&ib) == 0 && listener->verbs != NULL);
	/* rdma_get_devices lists the contexts the ids use (librdmacm opens
	 * each device once): a PD made on one serves an id's QP. */
	CHECK(listener->verbs == devs[0]);
	CHECK(is_ib(rdma_get_local_addr(listener), &gid, sid));
	CHECK(rdma_listen(listener, 4) == 0);
	errno = 0;
	CHECK(rdma_join_multicast(listener, (struct sockaddr *)&ib, NULL) == -1 && errno == EOPNOTSUPP);

	/* The client resolves it and connects. */
	CHECK(rdma_create_id(cch, &client, NULL, RDMA_PS_IB) == 0);
	CHECK(rdma_resolve_addr(client, NULL, (struct sockaddr *)&ib, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) == 0);
	CHECK(rdma_get_peer_addr(client)->sa_family == AF_IB && is_ib(rdma_get_peer_addr(client), &gid, sid));
	CHECK(rdma_get_local_addr(client)->sa_family == AF_IB);
	CHECK(rdma_resolve_route(client, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) == 0);
	pd = ibv_alloc_pd(devs[0]);
	CHECK(pd && client->verbs == devs[0]);
	CHECK(rdma_create_qp(client, pd, &qpa) == 0);
	CHECK(rdma_connect(client, &cp) == 0);
	CHECK(expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, &server) == 0);
	CHECK(server != listener && is_ib(rdma_get_local_addr(server), &gid, sid));
	CHECK(rdma_get_peer_addr(server)->sa_family == AF_IB);
	CHECK(rdma_create_qp(server, NULL, &qpa) == 0);
	CHECK(rdma_accept(server, &cp) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ESTABLISHED, NULL) == 0);
	CHECK(expect(sch, RDMA_CM_EVENT_ESTABLISHED, NULL) == 0);

	/* Another id still binds an IPv4 address and reports it as AF_INET. */
	CHECK(rdma_create_id(sch, &other, NULL, RDMA_PS_TCP) == 0);
	inet_pton(AF_INET, "10.0.0.1", &in.sin_addr);
	CHECK(rdma_bind_addr(other, (struct sockaddr *)&in) == 0 && rdma_get_local_addr(other)->sa_family == AF_INET);
	CHECK(rdma_destroy_id(other) == 0);

	CHECK(rdma_disconnect(client) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_DISCONNECTED, NULL) == 0);
	CHECK(expect(sch, RDMA_CM_EVENT_DISCONNECTED, NULL) == 0);
	rdma_destroy_qp(client);
	rdma_destroy_qp(server);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(rdma_destroy_id(client) == 0 && rdma_destroy_id(server) == 0 && rdma_destroy_id(listener) == 0);
	rdma_free_devices(devs);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
	printf("ok\n");
	return 0;
}
