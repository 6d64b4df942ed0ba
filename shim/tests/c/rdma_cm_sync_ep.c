/* Synchronous rdma_cm endpoints as rdma_server and rdma_client use them:
 * rdma_getaddrinfo with only a port space in the hints (so the answer's
 * QP type decides), rdma_create_ep with a qp_init_attr whose qp_type is 0,
 * a server thread blocked in rdma_get_request until the client connects
 * (it waits as long as it takes, here 200 ms), rdma_accept and
 * rdma_connect with NULL, one SEND each way, and rdma_disconnect on both
 * sides. Run against verbsim's drop-in libraries by
 * shim/tests/c_programs.rs. Exit 0 and "ok" on success; the failing step
 * and errno otherwise. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return (void *)1; } } while (0)

static struct rdma_cm_id *listen_id;

static int complete(struct rdma_cm_id *id, int send)
{
	struct ibv_wc wc;
	int ret;
	while ((ret = send ? rdma_get_send_comp(id, &wc) : rdma_get_recv_comp(id, &wc)) == 0)
		;
	return ret == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

static void *server(void *arg)
{
	struct rdma_cm_id *id;
	char recv_msg[16] = { 0 }, send_msg[16] = "pong";
	struct ibv_mr *rmr, *smr;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	CHECK(rdma_get_request(listen_id, &id) == 0);
	CHECK(id->qp != NULL);
	CHECK(ibv_query_qp(id->qp, &qa, IBV_QP_CAP, &qi) == 0);
	CHECK(qi.qp_type == IBV_QPT_RC);
	CHECK((rmr = rdma_reg_msgs(id, recv_msg, 16)) && (smr = rdma_reg_msgs(id, send_msg, 16)));
	CHECK(rdma_post_recv(id, NULL, recv_msg, 16, rmr) == 0);
	CHECK(rdma_accept(id, NULL) == 0);
	CHECK(complete(id, 0) == 0);
	CHECK(strcmp(recv_msg, "ping") == 0);
	CHECK(rdma_post_send(id, NULL, send_msg, 16, smr, 0) == 0);
	CHECK(complete(id, 1) == 0);
	CHECK(rdma_disconnect(id) == 0);
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
	rdma_destroy_ep(id);
	return NULL;
}

static void *client(void *arg)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = { .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 }, .sq_sig_all = 1 };
	struct rdma_cm_id *id;
	char recv_msg[16] = { 0 }, send_msg[16] = "ping";
	struct ibv_mr *rmr, *smr;

	CHECK(rdma_getaddrinfo("10.0.0.1", "7473", &hints, &res) == 0);
	CHECK(res->ai_qp_type == IBV_QPT_RC && res->ai_port_space == RDMA_PS_TCP);
	CHECK(rdma_create_ep(&id, res, NULL, &attr) == 0);
	CHECK(attr.qp_type == IBV_QPT_RC && id->qp != NULL);
	CHECK((rmr = rdma_reg_msgs(id, recv_msg, 16)) && (smr = rdma_reg_msgs(id, send_msg, 16)));
	CHECK(rdma_post_recv(id, NULL, recv_msg, 16, rmr) == 0);
	CHECK(rdma_connect(id, NULL) == 0);
	CHECK(rdma_post_send(id, NULL, send_msg, 16, smr, 0) == 0);
	CHECK(complete(id, 1) == 0);
	CHECK(complete(id, 0) == 0);
	CHECK(strcmp(recv_msg, "pong") == 0);
	CHECK(rdma_disconnect(id) == 0);
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
	rdma_destroy_ep(id);
	rdma_freeaddrinfo(res);
	return NULL;
}

int main(void)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = { .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 }, .sq_sig_all = 1 };
	pthread_t st, ct;
	void *sr, *cr;

	if (rdma_getaddrinfo(NULL, "7473", &hints, &res) || rdma_create_ep(&listen_id, res, NULL, &attr) || rdma_listen(listen_id, 0)) {
		fprintf(stderr, "passive endpoint: errno %d\n", errno);
		return 1;
	}
	pthread_create(&st, NULL, server, NULL);
	usleep(200000);
	pthread_create(&ct, NULL, client, NULL);
	pthread_join(ct, &cr);
	pthread_join(st, &sr);
	if (sr || cr)
		return 1;
	rdma_destroy_ep(listen_id);
	rdma_freeaddrinfo(res);
	printf("ok\n");
	return 0;
}
