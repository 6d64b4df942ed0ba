/* Failing verbs leave their error in errno as well as returning it:
 * libibverbs' int verbs return a positive errno and, failing through a
 * system call, set errno to it (perror after a failed ibv_modify_qp must
 * not print "Success"); librdmacm returns -1 with errno. Each call starts
 * with errno at 0. Run by shim/tests/c_programs.rs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)
/* The verb returned `want` and errno holds the same value. */
#define FAILS_WITH(call, want) do { errno = 0; int r_ = (call); CHECK(r_ == (want)); CHECK(errno == (want)); } while (0)

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	CHECK(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(pd && cq);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp);

	/* RESET -> RTS is not a transition. */
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };
	FAILS_WITH(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	/* A PD and a CQ in use by a QP. */
	FAILS_WITH(ibv_dealloc_pd(pd), EBUSY);
	FAILS_WITH(ibv_destroy_cq(cq), EBUSY);
	/* ibv_query_qp with a NULL attribute. */
	struct ibv_qp_init_attr qi;
	FAILS_WITH(ibv_query_qp(qp, NULL, IBV_QP_STATE, &qi), EINVAL);
	/* A CQ of zero entries cannot be resized to. */
	FAILS_WITH(ibv_resize_cq(cq, 0), EINVAL);

	/* ibv_query_gid_table: a negative errno, and errno. */
	struct ibv_gid_entry ent[1];
	errno = 0;
	CHECK(ibv_query_gid_table(ctx, ent, 1, 1) == -EINVAL && errno == EINVAL);

	CHECK(ibv_destroy_qp(qp) == 0);
	/* Destroyed: the pointer is no longer an object. */
	FAILS_WITH(ibv_destroy_qp(qp), EINVAL);
	CHECK(ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0);

	/* librdmacm: -1 with errno. rdma_listen on an id bound to nothing. */
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	CHECK(ch && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	errno = 0;
	CHECK(rdma_connect(id, NULL) == -1 && errno == EINVAL);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
	CHECK(ibv_close_device(ctx) == 0);
	printf("ok\n");
	return 0;
}
