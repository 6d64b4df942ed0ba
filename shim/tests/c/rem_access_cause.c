/* Two RDMA WRITEs refused by the responder for different reasons (a bad
 * rkey, then an access past the end of the region), each on a fresh RC
 * pair between device 0 and device 1; both complete with
 * IBV_WC_REM_ACCESS_ERR. Standard error goes to standard output, so the
 * test reads the library's VERBSIM_SHIM_LOG lines with the program's.
 * Prints "ok" at the end. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define CHECK(c, ...) do { if (!(c)) { printf(__VA_ARGS__); printf("\n"); exit(1); } } while (0)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint16_t lid;
	char buf[4096];
};

static void open_side(struct ibv_device *dev, struct side *s)
{
	s->ctx = ibv_open_device(dev);
	CHECK(s->ctx, "open: %s", strerror(errno));
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 16, NULL, NULL, 0);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(s->pd && s->cq && s->mr, "pd/cq/mr: %s", strerror(errno));
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(s->ctx, 1, &pa) == 0, "query_port");
	s->lid = pa.lid;
}

static void new_qp(struct side *s)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	s->qp = ibv_create_qp(s->pd, &ia);
	CHECK(s->qp, "create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	CHECK(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS) == 0, "INIT");
}

static void connect_to(struct side *s, const struct side *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qp->qp_num, .rq_psn = 0, .max_dest_rd_atomic = 1,
		.min_rnr_timer = 12, .ah_attr = { .dlid = peer->lid, .port_num = 1 },
	};
	CHECK(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER) == 0, "RTR: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 8;
	a.retry_cnt = 3;
	a.rnr_retry = 3;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	CHECK(ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0,
	      "RTS: %s", strerror(errno));
}

/* One WRITE of 64 bytes from a to b at offset `off` with `rkey`. */
static enum ibv_wc_status write_once(struct side *a, struct side *b, uint64_t off,
				     uint32_t rkey, uint64_t wr_id)
{
	new_qp(a);
	new_qp(b);
	connect_to(a, b);
	connect_to(b, a);
	struct ibv_sge sge = { .addr = (uintptr_t)a->buf, .length = 64, .lkey = a->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)b->buf + off, .rkey = rkey },
	};
	struct ibv_send_wr *bad;
	CHECK(ibv_post_send(a->qp, &wr, &bad) == 0, "post_send");
	struct ibv_wc wc;
	int n;
	while ((n = ibv_poll_cq(a->cq, 1, &wc)) == 0)
		;
	CHECK(n == 1 && wc.wr_id == wr_id, "poll: %d", n);
	ibv_destroy_qp(a->qp);
	ibv_destroy_qp(b->qp);
	return wc.status;
}

int main(void)
{
	dup2(1, 2);
	setvbuf(stdout, NULL, _IONBF, 0);
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 2, "two devices");
	static struct side a, b;
	open_side(list[0], &a);
	open_side(list[1], &b);
	enum ibv_wc_status s1 = write_once(&a, &b, 0, b.mr->rkey ^ 0x5a5a00, 1);
	enum ibv_wc_status s2 = write_once(&a, &b, sizeof(b.buf) - 8, b.mr->rkey, 2);
	CHECK(s1 == IBV_WC_REM_ACCESS_ERR && s2 == IBV_WC_REM_ACCESS_ERR,
	      "statuses %d %d", s1, s2);
	printf("ok\n");
	return 0;
}
