/* A client and a server in one process, connected through librdmacm's
 * asynchronous API (event channel, rdma_create_qp with automatic CQs),
 * exchanging one SEND: run against verbsim's drop-in libraries by
 * shim/tests/c_programs.rs. Exit 0 and "ok" on success; the failing step
 * and errno otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
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

int main(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel(), *cch = rdma_create_event_channel();
	struct rdma_cm_id *listener, *client, *server;
	struct sockaddr_in srv = { .sin_family = AF_INET, .sin_port = htons(7471) };
	struct ibv_qp_init_attr qpa = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }, .qp_type = IBV_QPT_RC };
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
	char msg[64] = "hello over rdma_cm", buf[64] = { 0 };
	struct ibv_mr *smr, *cmr;
	struct ibv_wc wc;
	int n = 0;

	CHECK(sch && cch);
	inet_pton(AF_INET, "10.0.0.1", &srv.sin_addr);
	CHECK(rdma_create_id(sch, &listener, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&srv) == 0);
	CHECK(listener->verbs != NULL);
	CHECK(rdma_listen(listener, 4) == 0);

	CHECK(rdma_create_id(cch, &client, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(client, NULL, (struct sockaddr *)&srv, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) == 0);
	CHECK(rdma_resolve_route(client, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) == 0);
	CHECK(rdma_create_qp(client, NULL, &qpa) == 0);
	CHECK(client->qp && client->send_cq && client->recv_cq && client->pd);
	CHECK(rdma_connect(client, &cp) == 0);

	CHECK(expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, &server) == 0);
	CHECK(server != listener && server->verbs != NULL);
	CHECK(rdma_create_qp(server, NULL, &qpa) == 0);
	smr = ibv_reg_mr(server->pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(smr);
	struct ibv_sge rsge = { .addr = (uintptr_t)buf, .length = sizeof buf, .lkey = smr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rsge, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_recv(server->qp, &rwr, &bad_r) == 0);
	CHECK(rdma_accept(server, &cp) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ESTABLISHED, NULL) == 0);
	CHECK(expect(sch, RDMA_CM_EVENT_ESTABLISHED, NULL) == 0);

	cmr = ibv_reg_mr(client->pd, msg, sizeof msg, 0);
	CHECK(cmr);
	struct ibv_sge ssge = { .addr = (uintptr_t)msg, .length = sizeof msg, .lkey = cmr->lkey };
	struct ibv_send_wr swr = { .wr_id = 9, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_s;
	CHECK(ibv_post_send(client->qp, &swr, &bad_s) == 0);
	while ((n = ibv_poll_cq(server->recv_cq, 1, &wc)) == 0)
		;
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 && wc.byte_len == sizeof msg);
	CHECK(strcmp(buf, "hello over rdma_cm") == 0);
	while ((n = ibv_poll_cq(client->send_cq, 1, &wc)) == 0)
		;
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9);

	CHECK(rdma_disconnect(client) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_DISCONNECTED, NULL) == 0);
	CHECK(expect(sch, RDMA_CM_EVENT_DISCONNECTED, NULL) == 0);
	CHECK(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(cmr) == 0);
	rdma_destroy_qp(server);
	rdma_destroy_qp(client);
	CHECK(rdma_destroy_id(server) == 0 && rdma_destroy_id(client) == 0 && rdma_destroy_id(listener) == 0);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
	printf("ok\n");
	return 0;
}
