/* rdma_accept and rdma_connect with a NULL conn_param, as rping's server
 * accepts: librdmacm then takes the depths the request offered (the
 * device's largest on connect), so both QPs may issue RDMA READs. The
 * client connects asking for one outstanding READ each way; the server
 * accepts with NULL and reads the client's buffer, then the client (which
 * connected with NULL on a second connection) reads the server's. Run
 * against verbsim's drop-in libraries by shim/tests/c_programs.rs. Exit 0
 * and "ok" on success; the failing step and errno otherwise. */
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

/* Connects a new client to the listener (conn_param `cp`, NULL allowed),
 * accepts with NULL, then `reader` READs 64 bytes of the other side's
 * buffer. */
static int connect_and_read(struct rdma_event_channel *sch, struct rdma_event_channel *cch,
			    struct sockaddr_in *srv, struct rdma_conn_param *cp, int server_reads)
{
	struct rdma_cm_id *client, *server;
	struct ibv_qp_init_attr qpa = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }, .qp_type = IBV_QPT_RC };
	char cbuf[64], sbuf[64];
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct ibv_wc wc;
	int n;

	memset(cbuf, 'c', sizeof cbuf);
	memset(sbuf, 's', sizeof sbuf);
	CHECK(rdma_create_id(cch, &client, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(client, NULL, (struct sockaddr *)srv, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) == 0);
	CHECK(rdma_resolve_route(client, 2000) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) == 0);
	CHECK(rdma_create_qp(client, NULL, &qpa) == 0);
	CHECK(rdma_connect(client, cp) == 0);
	CHECK(expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, &server) == 0);
	CHECK(rdma_create_qp(server, NULL, &qpa) == 0);
	CHECK(rdma_accept(server, NULL) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_ESTABLISHED, NULL) == 0);
	CHECK(expect(sch, RDMA_CM_EVENT_ESTABLISHED, NULL) == 0);

	struct rdma_cm_id *reader = server_reads ? server : client;
	struct rdma_cm_id *target = server_reads ? client : server;
	char *rbuf = server_reads ? sbuf : cbuf, *tbuf = server_reads ? cbuf : sbuf;
	CHECK(ibv_query_qp(reader->qp, &attr, IBV_QP_MAX_QP_RD_ATOMIC, &init) == 0);
	CHECK(attr.max_rd_atomic >= 1);
	struct ibv_mr *rmr = ibv_reg_mr(reader->pd, rbuf, 64, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *tmr = ibv_reg_mr(target->pd, tbuf, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(rmr && tmr);
	struct ibv_sge sge = { .addr = (uintptr_t)rbuf, .length = 64, .lkey = rmr->lkey };
	struct ibv_send_wr wr = { .wr_id = 5, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)tbuf;
	wr.wr.rdma.rkey = tmr->rkey;
	CHECK(ibv_post_send(reader->qp, &wr, &bad) == 0);
	for (int spins = 0; (n = ibv_poll_cq(reader->send_cq, 1, &wc)) == 0; spins++)
		CHECK(spins < 1000000);
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ);
	CHECK(memcmp(rbuf, tbuf, 64) == 0);

	CHECK(rdma_disconnect(client) == 0);
	CHECK(expect(cch, RDMA_CM_EVENT_DISCONNECTED, NULL) == 0);
	CHECK(expect(sch, RDMA_CM_EVENT_DISCONNECTED, NULL) == 0);
	CHECK(ibv_dereg_mr(rmr) == 0 && ibv_dereg_mr(tmr) == 0);
	rdma_destroy_qp(server);
	rdma_destroy_qp(client);
	CHECK(rdma_destroy_id(server) == 0 && rdma_destroy_id(client) == 0);
	return 0;
}

int main(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel(), *cch = rdma_create_event_channel();
	struct rdma_cm_id *listener;
	struct sockaddr_in srv = { .sin_family = AF_INET, .sin_port = htons(7472) };
	struct rdma_conn_param one = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };

	CHECK(sch && cch);
	inet_pton(AF_INET, "10.0.0.1", &srv.sin_addr);
	CHECK(rdma_create_id(sch, &listener, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&srv) == 0);
	CHECK(rdma_listen(listener, 4) == 0);
	CHECK(connect_and_read(sch, cch, &srv, &one, 1) == 0);
	CHECK(connect_and_read(sch, cch, &srv, NULL, 0) == 0);
	CHECK(rdma_destroy_id(listener) == 0);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
	printf("ok\n");
	return 0;
}
