/* rdma_establish through the drop-in librdmacm: a client that connects
 * without a QP (its own QP number in the connection parameters) gets
 * RDMA_CM_EVENT_CONNECT_RESPONSE, moves its QP with rdma_init_qp_attr and
 * confirms with rdma_establish; only then does the server get
 * ESTABLISHED. A SEND over the application's QP proves the QP moved.
 * Run by shim/tests/c_programs.rs; exit 0 and "ok" on success. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

static int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want, struct rdma_cm_id **id, uint32_t *qp_num)
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
	if (qp_num)
		*qp_num = ev->param.conn.qp_num;
	return rdma_ack_cm_event(ev);
}

/* Whether an event waits on the channel (its fd is readable). */
static int readable(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}

int main(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel(), *cch = rdma_create_event_channel();
	struct rdma_cm_id *listener, *client, *server;
	struct sockaddr_in srv = { .sin_family = AF_INET, .sin_port = htons(7472) };
	struct ibv_qp_init_attr qpa = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }, .qp_type = IBV_QPT_RC };
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
	char msg[64] = "sent over my own QP", buf[64] = { 0 };
	struct ibv_qp_attr attr;
	struct ibv_mr *smr, *cmr;
	struct ibv_wc wc;
	struct ibv_cq *cq;
	struct ibv_qp *own;
	uint32_t req_qpn = 0, rep_qpn = 0;
	int mask, n = 0;

	CHECK(sch && cch);
	inet_pton(AF_INET, "10.0.1.1", &srv.sin_addr);
	CHECK(rdma_create_id(sch, &listener, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&srv) == 0);
	CHECK(rdma_listen(listener, 4) == 0);

	CHECK(rdma_create_id(cch, &client, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(client, NULL, (struct sockaddr *)&srv, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL, NULL) == 0);
	CHECK(rdma_resolve_route(client, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL, NULL) == 0);
	/* rdma_establish before any connection: a state error. */
	CHECK(rdma_establish(client) == -1 && errno == EINVAL);

	/* The application's own QP, not the CM's. */
	CHECK(client->verbs && client->pd);
	cq = ibv_create_cq(client->verbs, 8, NULL, NULL, 0);
	CHECK(cq);
	qpa.send_cq = cq;
	qpa.recv_cq = cq;
	own = ibv_create_qp(client->pd, &qpa);
	CHECK(own);
	CHECK(client->qp == NULL);
	cp.qp_num = own->qp_num;
	CHECK(rdma_connect(client, &cp) == 0);

	CHECK(expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, &server, &req_qpn) == 0);
	CHECK(req_qpn == own->qp_num);
	qpa.send_cq = NULL;
	qpa.recv_cq = NULL;
	CHECK(rdma_create_qp(server, NULL, &qpa) == 0);
	smr = ibv_reg_mr(server->pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(smr);
	struct ibv_sge rsge = { .addr = (uintptr_t)buf, .length = sizeof buf, .lkey = smr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rsge, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_recv(server->qp, &rwr, &bad_r) == 0);
	cp.qp_num = 0;
	CHECK(rdma_accept(server, &cp) == 0);

	/* Without a QP the client sees the REP, not ESTABLISHED. */
	CHECK(expect(cch, RDMA_CM_EVENT_CONNECT_RESPONSE, NULL, &rep_qpn) == 0);
	CHECK(rep_qpn == server->qp->qp_num);
	CHECK(!readable(sch));
	/* An id with a QP is confirmed by librdmacm itself. */
	CHECK(rdma_establish(server) == -1 && errno == EINVAL);

	int states[3] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };
	for (int i = 0; i < 3; i++) {
		memset(&attr, 0, sizeof attr);
		attr.qp_state = states[i];
		CHECK(rdma_init_qp_attr(client, &attr, &mask) == 0);
		CHECK(ibv_modify_qp(own, &attr, mask) == 0);
	}
	CHECK(rdma_establish(client) == 0);
	CHECK(expect(sch, RDMA_CM_EVENT_ESTABLISHED, NULL, NULL) == 0);
	CHECK(rdma_establish(client) == -1 && errno == EINVAL);

	cmr = ibv_reg_mr(client->pd, msg, sizeof msg, 0);
	CHECK(cmr);
	struct ibv_sge ssge = { .addr = (uintptr_t)msg, .length = sizeof msg, .lkey = cmr->lkey };
	struct ibv_send_wr swr = { .wr_id = 9, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_s;
	CHECK(ibv_post_send(own, &swr, &bad_s) == 0);
	while ((n = ibv_poll_cq(server->recv_cq, 1, &wc)) == 0)
		;
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 && wc.byte_len == sizeof msg);
	CHECK(strcmp(buf, "sent over my own QP") == 0);
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9);

	CHECK(rdma_disconnect(server) == 0);
	CHECK(expect(sch, RDMA_CM_EVENT_DISCONNECTED, NULL, NULL) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_DISCONNECTED, NULL, NULL) == 0);
	CHECK(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(cmr) == 0);
	rdma_destroy_qp(server);
	CHECK(ibv_destroy_qp(own) == 0 && ibv_destroy_cq(cq) == 0);
	CHECK(rdma_destroy_id(server) == 0 && rdma_destroy_id(client) == 0 && rdma_destroy_id(listener) == 0);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
	printf("ok\n");
	return 0;
}
