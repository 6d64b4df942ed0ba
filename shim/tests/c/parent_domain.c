/* Parent domains through the installed headers' inline
 * ibv_alloc_parent_domain: a PD wherever one is taken, the references
 * mlx5 keeps (EBUSY), the attribute checks (EINVAL). Prints "ok". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define CHECK(c, ...) do { if (!(c)) { printf(__VA_ARGS__); printf("\n"); return 1; } } while (0)

static int allocs;
static void *my_alloc(struct ibv_pd *pd, void *ctx, size_t size, size_t align, uint64_t type)
{
	(void)pd; (void)ctx; (void)size; (void)align; (void)type;
	allocs++;
	return IBV_ALLOCATOR_USE_DEFAULT;
}
static void my_free(struct ibv_pd *pd, void *ctx, void *ptr, uint64_t type)
{
	(void)pd; (void)ctx; (void)ptr; (void)type;
}

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n > 0, "no devices");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open: %s", strerror(errno));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");

	struct ibv_parent_domain_init_attr a = { 0 };
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(ctx, &a) && errno == EINVAL, "NULL pd: errno %d", errno);
	a.pd = pd;
	a.comp_mask = 1 << 7;
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(ctx, &a) && errno == EINVAL, "unknown comp_mask: errno %d", errno);
	a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	a.alloc = my_alloc;
	a.free = my_free;
	a.pd_context = &allocs;
	struct ibv_pd *parent = ibv_alloc_parent_domain(ctx, &a);
	CHECK(parent, "alloc_parent_domain: %s", strerror(errno));
	CHECK(parent != pd && parent->context == ctx && parent->handle == pd->handle,
	      "the parent domain copies the PD's context and handle");

	/* An MR and a QP on the parent domain. */
	char *buf = calloc(1, 4096);
	struct ibv_mr *mr = ibv_reg_mr(parent, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr && mr->pd == parent, "reg_mr on the parent domain: %s", strerror(errno));
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq, "create_cq");
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(parent, &qa);
	CHECK(qp && qp->pd == parent, "create_qp on the parent domain: %s", strerror(errno));

	/* An extended CQ names a parent domain, never a plain PD. */
	struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD, .parent_domain = pd };
	errno = 0;
	CHECK(!ibv_create_cq_ex(ctx, &ca) && errno == EINVAL, "CQ on a plain PD: errno %d", errno);
	ca.parent_domain = parent;
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
	CHECK(cqx, "CQ on the parent domain: %s", strerror(errno));

	/* The references: the PD is busy while the parent domain names it, the
	 * parent domain while a QP or CQ was made on it. */
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc of the contained PD");
	CHECK(ibv_dealloc_pd(parent) == EBUSY, "dealloc of a parent domain with a QP and a CQ");
	CHECK(ibv_destroy_qp(qp) == 0, "destroy_qp");
	CHECK(ibv_dealloc_pd(parent) == EBUSY, "dealloc of a parent domain with a CQ");
	CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)) == 0, "destroy_cq_ex");
	CHECK(ibv_dereg_mr(mr) == 0, "dereg_mr");
	CHECK(ibv_dealloc_pd(parent) == 0, "dealloc of the parent domain");
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc of the PD");
	CHECK(allocs == 0, "the simulator keeps no buffers in the program's memory");

	ibv_destroy_cq(cq);
	free(buf);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
