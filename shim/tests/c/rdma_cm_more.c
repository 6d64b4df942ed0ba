/* librdmacm beyond the basics, on one process: rdma_migrate_id (queued
 * events move with the id; a NULL channel makes it synchronous; a
 * listener's connection requests follow it), rdma_get_src_port /
 * rdma_get_dst_port, rdma_create_srq serving rdma_create_qp,
 * rdma_destroy_srq, rdma_notify's errors on connected and unconnected
 * ids, rdma_reject_ece (the peer sees reason 35). Run by
 * shim/tests/c_programs.rs. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

static int expect_status(struct rdma_event_channel *ch, enum rdma_cm_event_type want, struct rdma_cm_id **id, int *status)
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
	if (status)
		*status = ev->status;
	return rdma_ack_cm_event(ev);
}

static int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want, struct rdma_cm_id **id)
{
	return expect_status(ch, want, id, NULL);
}

static int readable(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}

int main(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel(), *lch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel(), *mch = rdma_create_event_channel();
	struct rdma_cm_id *listener, *client, *server, *sid, *client2, *server2;
	struct sockaddr_in srv = { .sin_family = AF_INET, .sin_port = htons(7471) };
	struct ibv_qp_init_attr qpa = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }, .qp_type = IBV_QPT_RC };
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
	char msg[32] = "through the id's SRQ", buf[32] = { 0 };
	int n, status;
	struct ibv_wc wc;

	CHECK(sch && lch && cch && mch);
	inet_pton(AF_INET, "10.0.0.1", &srv.sin_addr);
	CHECK(rdma_create_id(sch, &listener, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&srv) == 0);
	CHECK(rdma_listen(listener, 4) == 0);
	CHECK(rdma_get_src_port(listener) == htons(7471) && rdma_get_dst_port(listener) == 0);
	/* The listener moves: its connection requests come on lch. */
	CHECK(rdma_migrate_id(listener, lch) == 0 && listener->channel == lch);
	errno = 0;
	CHECK(rdma_migrate_id(listener, (struct rdma_event_channel *)&srv) == -1 && errno == EINVAL);

	/* An event queued on the old channel moves with the id. */
	CHECK(rdma_create_id(cch, &client, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(client, NULL, (struct sockaddr *)&srv, 2000) == 0);
	CHECK(rdma_migrate_id(client, mch) == 0 && client->channel == mch);
	CHECK(!readable(cch));
	CHECK(expect(mch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) == 0);
	CHECK(rdma_resolve_route(client, 2000) == 0);
	CHECK(expect(mch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) == 0);

	/* A NULL channel: synchronous calls; migrating a synchronous id to
	 * NULL again is EINVAL; back to a channel, events come there. */
	CHECK(rdma_create_id(cch, &sid, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_migrate_id(sid, NULL) == 0);
	CHECK(rdma_resolve_addr(sid, NULL, (struct sockaddr *)&srv, 2000) == 0);
	CHECK(sid->verbs != NULL && !readable(cch) && !readable(mch));
	errno = 0;
	CHECK(rdma_migrate_id(sid, NULL) == -1 && errno == EINVAL);
	CHECK(rdma_migrate_id(sid, cch) == 0);
	CHECK(rdma_resolve_route(sid, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) == 0);
	CHECK(rdma_destroy_id(sid) == 0);

	CHECK(rdma_create_qp(client, NULL, &qpa) == 0);
	CHECK(rdma_connect(client, &cp) == 0);
	CHECK(!readable(sch));
	CHECK(expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, &server) == 0);
	CHECK(server->channel == lch);
	/* Ports, network byte order, from both ends. */
	CHECK(rdma_get_src_port(server) == htons(7471) && rdma_get_dst_port(client) == htons(7471));
	CHECK(rdma_get_src_port(client) != 0 && rdma_get_dst_port(server) == rdma_get_src_port(client));

	/* The id's SRQ serves its QP. */
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	CHECK(rdma_create_srq(server, NULL, &sa) == 0 && server->srq != NULL);
	CHECK(sa.attr.max_wr >= 8);
	errno = 0;
	CHECK(rdma_create_srq(server, NULL, &sa) == -1 && errno == EINVAL);
	struct ibv_qp_init_attr sqa = qpa;
	CHECK(rdma_create_qp(server, NULL, &sqa) == 0);
	CHECK(sqa.srq == server->srq && server->qp->srq == server->srq);
	struct ibv_mr *smr = ibv_reg_mr(server->pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(smr);
	struct ibv_sge rsge = { .addr = (uintptr_t)buf, .length = sizeof buf, .lkey = smr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 77, .sg_list = &rsge, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_srq_recv(server->srq, &rwr, &bad_r) == 0);
	CHECK(rdma_accept(server, &cp) == 0);
	CHECK(expect(mch, RDMA_CM_EVENT_ESTABLISHED, NULL) == 0);
	CHECK(expect(lch, RDMA_CM_EVENT_ESTABLISHED, NULL) == 0);

	/* rdma_notify: COMM_EST on an established connection is EISCONN;
	 * an event the CM does not act on, or an id without a connection,
	 * EINVAL. */
	errno = 0;
	CHECK(rdma_notify(server, IBV_EVENT_COMM_EST) == -1 && errno == EISCONN);
	errno = 0;
	CHECK(rdma_notify(server, IBV_EVENT_QP_FATAL) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(rdma_notify(listener, IBV_EVENT_COMM_EST) == -1 && errno == EINVAL);

	struct ibv_mr *cmr = ibv_reg_mr(client->pd, msg, sizeof msg, 0);
	CHECK(cmr);
	struct ibv_sge ssge = { .addr = (uintptr_t)msg, .length = sizeof msg, .lkey = cmr->lkey };
	struct ibv_send_wr swr = { .wr_id = 9, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_s;
	CHECK(ibv_post_send(client->qp, &swr, &bad_s) == 0);
	while ((n = ibv_poll_cq(server->recv_cq, 1, &wc)) == 0)
		;
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 77 && strcmp(buf, msg) == 0);

	/* rdma_reject_ece: the active side sees REJECTED with reason 35. */
	CHECK(rdma_create_id(cch, &client2, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(client2, NULL, (struct sockaddr *)&srv, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) == 0);
	CHECK(rdma_resolve_route(client2, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) == 0);
	CHECK(rdma_create_qp(client2, NULL, &qpa) == 0);
	CHECK(rdma_connect(client2, &cp) == 0);
	CHECK(expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, &server2) == 0);
	CHECK(rdma_reject_ece(server2, "no", 3) == 0);
	CHECK(expect_status(cch, RDMA_CM_EVENT_REJECTED, NULL, &status) == 0);
	CHECK(status == 35);
	rdma_destroy_qp(client2);
	CHECK(rdma_destroy_id(client2) == 0 && rdma_destroy_id(server2) == 0);

	/* rdma_destroy_ep takes the id's SRQ along: its PD is free after. */
	struct rdma_cm_id *ep;
	CHECK(rdma_create_id(cch, &ep, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(ep, NULL, (struct sockaddr *)&srv, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) == 0);
	struct ibv_pd *own_pd = ibv_alloc_pd(ep->verbs);
	CHECK(own_pd);
	CHECK(rdma_create_srq(ep, own_pd, &sa) == 0 && ep->srq && ep->srq->pd == own_pd);
	errno = 0;
	CHECK(ibv_dealloc_pd(own_pd) == EBUSY);
	rdma_destroy_ep(ep);
	CHECK(ibv_dealloc_pd(own_pd) == 0);

	CHECK(rdma_disconnect(client) == 0);
	CHECK(expect(mch, RDMA_CM_EVENT_DISCONNECTED, NULL) == 0);
	CHECK(expect(lch, RDMA_CM_EVENT_DISCONNECTED, NULL) == 0);
	CHECK(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(cmr) == 0);
	rdma_destroy_qp(server);
	rdma_destroy_srq(server);
	CHECK(server->srq == NULL);
	rdma_destroy_qp(client);
	CHECK(rdma_destroy_id(server) == 0 && rdma_destroy_id(client) == 0 && rdma_destroy_id(listener) == 0);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(lch);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(mch);
	printf("ok\n");
	return 0;
}
