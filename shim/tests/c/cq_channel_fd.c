/* A completion channel's fd is readable exactly while an event is pending:
 * two RC QPs on the two simulated devices, one SEND; poll() on the channel
 * fd before and after the event is taken. Run by shim/tests/c_programs.rs. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

static int readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static int to_rts(struct ibv_qp *qp, uint32_t dest, uint16_t dlid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = 0 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR; a.path_mtu = IBV_MTU_1024; a.dest_qp_num = dest; a.rq_psn = 0;
	a.max_dest_rd_atomic = 1; a.min_rnr_timer = 12; a.ah_attr.dlid = dlid; a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS; a.timeout = 14; a.retry_cnt = 7; a.rnr_retry = 7; a.sq_psn = 0; a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 2);
	struct ibv_context *c0 = ibv_open_device(list[0]), *c1 = ibv_open_device(list[1]);
	ibv_free_device_list(list);
	CHECK(c0 && c1);
	struct ibv_pd *p0 = ibv_alloc_pd(c0), *p1 = ibv_alloc_pd(c1);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(c1);
	CHECK(p0 && p1 && ch);
	struct ibv_cq *cq0 = ibv_create_cq(c0, 16, NULL, NULL, 0), *cq1 = ibv_create_cq(c1, 16, (void *)0x77, ch, 0);
	CHECK(cq0 && cq1);
	struct ibv_qp_init_attr ia = { .send_cq = cq0, .recv_cq = cq0, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *q0 = ibv_create_qp(p0, &ia);
	ia.send_cq = cq1; ia.recv_cq = cq1;
	struct ibv_qp *q1 = ibv_create_qp(p1, &ia);
	CHECK(q0 && q1);
	struct ibv_port_attr pa0, pa1;
	CHECK(ibv_query_port(c0, 1, &pa0) == 0 && ibv_query_port(c1, 1, &pa1) == 0);
	CHECK(to_rts(q0, q1->qp_num, pa1.lid) == 0 && to_rts(q1, q0->qp_num, pa0.lid) == 0);
	CHECK(q0->state == IBV_QPS_RTS);

	char src[32] = "event", dst[32] = { 0 };
	struct ibv_mr *m0 = ibv_reg_mr(p0, src, sizeof src, 0), *m1 = ibv_reg_mr(p1, dst, sizeof dst, IBV_ACCESS_LOCAL_WRITE);
	CHECK(m0 && m1);
	struct ibv_sge rs = { .addr = (uintptr_t)dst, .length = sizeof dst, .lkey = m1->lkey };
	struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *br;
	CHECK(ibv_post_recv(q1, &rw, &br) == 0);
	CHECK(ibv_req_notify_cq(cq1, 0) == 0);
	CHECK(!readable(ch->fd));                       /* nothing yet */

	struct ibv_sge ss = { .addr = (uintptr_t)src, .length = sizeof src, .lkey = m0->lkey };
	struct ibv_send_wr sw = { .wr_id = 2, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bs;
	CHECK(ibv_post_send(q0, &sw, &bs) == 0);
	CHECK(readable(ch->fd));                        /* the receive completed: an event waits */

	struct ibv_cq *ev_cq; void *ev_ctx;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0);
	CHECK(ev_cq == cq1 && ev_ctx == (void *)0x77);
	CHECK(!readable(ch->fd));                       /* taken: not readable any more */
	ibv_ack_cq_events(cq1, 1);
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(cq1, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1);
	CHECK(strcmp(dst, "event") == 0);

	CHECK(ibv_destroy_qp(q0) == 0 && ibv_destroy_qp(q1) == 0);
	CHECK(ibv_dereg_mr(m0) == 0 && ibv_dereg_mr(m1) == 0);
	CHECK(ibv_destroy_cq(cq0) == 0 && ibv_destroy_cq(cq1) == 0);
	CHECK(ibv_destroy_comp_channel(ch) == 0);
	CHECK(ibv_dealloc_pd(p0) == 0 && ibv_dealloc_pd(p1) == 0);
	CHECK(ibv_close_device(c0) == 0 && ibv_close_device(c1) == 0);
	printf("ok\n");
	return 0;
}
