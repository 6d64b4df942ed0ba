/* A context's async_fd becomes readable when an async event is queued,
 * without the program calling the library, and without a completion
 * channel (middleware's async threads poll that fd first): a QP on an SRQ
 * moved to ERR queues IBV_EVENT_QP_LAST_WQE_REACHED; poll() on async_fd
 * sees it; ibv_get_async_event returns it naming the QP; once acknowledged
 * the fd is quiet again. Run against verbsim's drop-in libraries by
 * shim/tests/c_programs.rs, in one process and over a fabric. Exit 0 and
 * "ok" on success; the failing step and errno otherwise. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <infiniband/verbs.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	CHECK(ctx && pd && cq && srq);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .srq = srq, .cap = { .max_send_wr = 4, .max_send_sge = 1 }, .qp_type = IBV_QPT_RC };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp);

	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	CHECK(poll(&p, 1, 100) == 0);

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
	a.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);

	/* No library call from here until the fd says so. */
	p.revents = 0;
	CHECK(poll(&p, 1, 3000) == 1 && (p.revents & POLLIN));
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == qp);
	ibv_ack_async_event(&ev);
	p.revents = 0;
	CHECK(poll(&p, 1, 200) == 0);

	CHECK(ibv_destroy_qp(qp) == 0 && ibv_destroy_srq(srq) == 0 && ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0 && ibv_close_device(ctx) == 0);
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
