/* On-demand paging through the installed headers: the ODP capabilities,
 * ibv_advise_mr (the context's advise_mr op) and its checks, and an
 * implicit ODP MR over the whole address space. Prints "ok". */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define CHECK(c, ...) do { if (!(c)) { printf(__VA_ARGS__); printf("\n"); return 1; } } while (0)

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n > 0, "no devices");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open: %s", strerror(errno));
	struct ibv_device_attr_ex attr;
	CHECK(ibv_query_device_ex(ctx, NULL, &attr) == 0, "query_device_ex");
	CHECK(attr.odp_caps.general_caps & IBV_ODP_SUPPORT, "no ODP");
	CHECK(attr.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT, "no implicit ODP");
	CHECK(attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE, "no RC write ODP");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");
	char *buf = calloc(1, 8192);
	struct ibv_mr *odp = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	CHECK(odp, "reg_mr ODP: %s", strerror(errno));
	struct ibv_mr *ro = ibv_reg_mr(pd, buf + 4096, 4096, IBV_ACCESS_ON_DEMAND);
	CHECK(ro, "reg_mr ODP read-only: %s", strerror(errno));
	struct ibv_mr *plain = ibv_reg_mr(pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(plain, "reg_mr: %s", strerror(errno));

	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 4096, .lkey = odp->lkey };
	int rc = ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
	CHECK(rc == 0, "advise_mr: %d", rc);
	rc = ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1);
	CHECK(rc == 0, "advise_mr async: %d", rc);
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80, &sge, 1) == EINVAL, "unknown flags");
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 0) == EINVAL, "empty list");
	CHECK(ibv_advise_mr(pd, (enum ibv_advise_mr_advice)7, 0, &sge, 1) == EOPNOTSUPP, "unknown advice");
	struct ibv_sge past = { .addr = (uintptr_t)buf + 4000, .length = 200, .lkey = odp->lkey };
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &past, 1) == EFAULT, "range past the MR");
	struct ibv_sge pl = { .addr = (uintptr_t)buf + 4096, .length = 64, .lkey = plain->lkey };
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &pl, 1) == ENOENT, "not an ODP MR");
	struct ibv_sge r = { .addr = (uintptr_t)buf + 4096, .length = 64, .lkey = ro->lkey };
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &r, 1) == 0, "read-only ODP, PREFETCH");
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &r, 1) == EPERM,
	      "read-only ODP, PREFETCH_WRITE");

	/* Implicit ODP: one key for every address. */
	errno = 0;
	CHECK(!ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT,
	      "NULL without ON_DEMAND: errno %d", errno);
	struct ibv_mr *imp = ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	CHECK(imp, "implicit ODP MR: %s", strerror(errno));
	CHECK(imp->addr == NULL && imp->length == SIZE_MAX, "implicit MR addr %p length %zu", imp->addr, imp->length);
	struct ibv_sge any = { .addr = (uintptr_t)buf + 100, .length = 64, .lkey = imp->lkey };
	CHECK(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &any, 1) == 0, "advise on the implicit MR");

	CHECK(ibv_dereg_mr(imp) == 0 && ibv_dereg_mr(plain) == 0 && ibv_dereg_mr(ro) == 0 && ibv_dereg_mr(odp) == 0,
	      "dereg");
	ibv_dealloc_pd(pd);
	free(buf);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
