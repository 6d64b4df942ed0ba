/* Device memory through the header's inline wrappers: ibv_alloc_dm (the
 * context's alloc_dm op), struct ibv_dm's fields, the copy functions'
 * return values (the errno itself, not -1), ibv_reg_dm_mr (zero-based),
 * ibv_free_dm's EBUSY while an MR is on the DM, ibv_import_dm.
 * Run by shim/tests/c_programs.rs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	CHECK(ctx);
	struct ibv_device_attr_ex ex;
	CHECK(ibv_query_device_ex(ctx, NULL, &ex) == 0);
	CHECK(ex.max_dm_size == 131072);

	struct ibv_alloc_dm_attr bad = { .length = 64, .comp_mask = 1 };
	errno = 0;
	CHECK(ibv_alloc_dm(ctx, &bad) == NULL && errno == EINVAL);
	struct ibv_alloc_dm_attr big = { .length = ex.max_dm_size + 1 };
	errno = 0;
	CHECK(ibv_alloc_dm(ctx, &big) == NULL && errno == EINVAL);

	struct ibv_alloc_dm_attr attr = { .length = 64, .log_align_req = 3 };
	struct ibv_dm *dm = ibv_alloc_dm(ctx, &attr);
	CHECK(dm);
	CHECK(dm->context == ctx && (dm->comp_mask & IBV_DM_MASK_HANDLE));

	unsigned char out[16], in[16];
	memset(out, 0xab, sizeof out);
	CHECK(ibv_memcpy_to_dm(dm, 8, out, sizeof out) == 0);
	CHECK(ibv_memcpy_to_dm(dm, 60, out, 8) == EFAULT);
	CHECK(ibv_memcpy_to_dm(dm, 2, out, 4) == EINVAL);
	CHECK(ibv_memcpy_from_dm(in, dm, 6, 4) == EINVAL);
	memset(in, 0, sizeof in);
	CHECK(ibv_memcpy_from_dm(in, dm, 8, sizeof in) == 0);
	CHECK(memcmp(in, out, sizeof in) == 0);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	errno = 0;
	CHECK(ibv_reg_dm_mr(pd, dm, 0, 64, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_reg_dm_mr(pd, dm, 8, 64, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE) == NULL &&
	      errno == EINVAL);
	struct ibv_mr *mr = ibv_reg_dm_mr(pd, dm, 8, 56, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
					  IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr);
	CHECK(mr->addr == NULL && mr->length == 56 && mr->pd == pd);
	CHECK(ibv_free_dm(dm) == EBUSY);

	struct ibv_dm *alias = ibv_import_dm(ctx, dm->handle);
	CHECK(alias && alias->handle == dm->handle);
	CHECK(ibv_memcpy_from_dm(in, alias, 8, sizeof in) == 0 && memcmp(in, out, sizeof in) == 0);
	ibv_unimport_dm(alias);

	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_free_dm(dm) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	printf("ok\n");
	return 0;
}
