/* IBV_SEND_INLINE through ibv_post_send from memory that is not
 * registered, as UCX's rc_verbs/ud_verbs and rdma_client post: the data
 * is copied at post time and the lkey plays no part. Two RC QPs of one
 * device connected to each other, and two UD QPs: a SEND from a stack
 * buffer with lkey 0 arrives whole, even though the buffer is overwritten
 * right after the post; a SEND longer than max_inline_data is refused at
 * post. Run against verbsim's drop-in libraries by
 * shim/tests/c_programs.rs. Exit 0 and "ok" on success; the failing step
 * and errno otherwise. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

static int to_rts(struct ibv_qp *qp, uint32_t dest, uint16_t lid, enum ibv_qp_type t)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if (t == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
			return -1;
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			return -1;
		a.qp_state = IBV_QPS_RTS;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int wait_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int n, spins = 0;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && spins++ < 1000000)
		;
	return n == 1 && wc->status == IBV_WC_SUCCESS ? 0 : -1;
}

/* One inline SEND from an unregistered stack buffer, `type` QPs. */
static int send_inline(struct ibv_context *ctx, struct ibv_pd *pd, uint16_t lid, enum ibv_qp_type type)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 2, .max_recv_sge = 1, .max_inline_data = 64 }, .qp_type = type };
	struct ibv_qp *a, *b;
	char rbuf[128 + 40], part1[20], part2[12];
	struct ibv_wc wc;
	int grh = type == IBV_QPT_UD ? 40 : 0;

	CHECK(cq);
	CHECK((a = ibv_create_qp(pd, &ia)) && (b = ibv_create_qp(pd, &ia)));
	CHECK(ia.cap.max_inline_data >= 32);
	CHECK(to_rts(a, b->qp_num, lid, type) == 0 && to_rts(b, a->qp_num, lid, type) == 0);
	struct ibv_mr *mr = ibv_reg_mr(pd, rbuf, sizeof rbuf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	memset(rbuf, 0, sizeof rbuf);
	struct ibv_sge rs = { .addr = (uintptr_t)rbuf, .length = sizeof rbuf, .lkey = mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_recv(b, &rw, &bad_r) == 0);

	/* Two SGEs over unregistered memory, lkey 0. */
	memcpy(part1, "inline from the stac", 20);
	memcpy(part2, "k, no MR...", 12);
	struct ibv_sge ss[2] = { { .addr = (uintptr_t)part1, .length = 20, .lkey = 0 }, { .addr = (uintptr_t)part2, .length = 12, .lkey = 0 } };
	struct ibv_send_wr sw = { .wr_id = 2, .sg_list = ss, .num_sge = 2, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED }, *bad_s;
	struct ibv_ah *ah = NULL;
	if (type == IBV_QPT_UD) {
		struct ibv_ah_attr aa = { .dlid = lid, .port_num = 1 };
		CHECK((ah = ibv_create_ah(pd, &aa)));
		sw.wr.ud.ah = ah;
		sw.wr.ud.remote_qpn = b->qp_num;
		sw.wr.ud.remote_qkey = 0x11111111;
	}
	CHECK(ibv_post_send(a, &sw, &bad_s) == 0);
	/* The bytes were taken at post: changing them now changes nothing. */
	memset(part1, 'x', sizeof part1);
	memset(part2, 'x', sizeof part2);
	for (int got = 0; got < 2; got++) {
		CHECK(wait_one(cq, &wc) == 0);
		if (wc.wr_id == 1)
			CHECK(wc.byte_len == 32 + grh && memcmp(rbuf + grh, "inline from the stack, no MR...", 32) == 0);
		else
			CHECK(wc.wr_id == 2);
	}

	/* Longer than max_inline_data: refused at post. */
	char big[4096];
	struct ibv_sge bs = { .addr = (uintptr_t)big, .length = ia.cap.max_inline_data + 1, .lkey = 0 };
	sw.sg_list = &bs;
	sw.num_sge = 1;
	int rc = ibv_post_send(a, &sw, &bad_s);
	CHECK(rc != 0 && bad_s == &sw);

	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0);
	if (ah)
		CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(ibv_dereg_mr(mr) == 0 && ibv_destroy_cq(cq) == 0);
	return 0;
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_port_attr pa;
	CHECK(pd && ibv_query_port(ctx, 1, &pa) == 0);
	CHECK(send_inline(ctx, pd, pa.lid, IBV_QPT_RC) == 0);
	CHECK(send_inline(ctx, pd, pa.lid, IBV_QPT_UD) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0 && ibv_close_device(ctx) == 0);
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
