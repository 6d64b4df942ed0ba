/* mlx5dv_create_cq's attributes and MLX5_CQE_SIZE, as mlx5 checks them.
 * Prints "ok". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#define CHECK(c, ...) do { if (!(c)) { printf(__VA_ARGS__); printf("\n"); return 1; } } while (0)

static struct ibv_cq_ex *dv_cq(struct ibv_context *ctx, uint64_t mask, uint16_t size, uint32_t flags)
{
	struct ibv_cq_init_attr_ex a = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct mlx5dv_cq_init_attr d = { .comp_mask = mask, .cqe_size = size, .flags = flags,
					 .cqe_comp_res_format = MLX5DV_CQE_RES_FORMAT_HASH };
	errno = 0;
	return mlx5dv_create_cq(ctx, &a, &d);
}

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n > 0, "no devices");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open: %s", strerror(errno));

	struct ibv_cq_ex *cq = dv_cq(ctx, MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, 128, 0);
	CHECK(cq, "cqe_size 128: %s", strerror(errno));
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	cq = dv_cq(ctx, MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, 64, 0);
	CHECK(cq, "cqe_size 64: %s", strerror(errno));
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	CHECK(!dv_cq(ctx, MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, 100, 0) && errno == EINVAL, "cqe_size 100");
	CHECK(!dv_cq(ctx, 1 << 5, 64, 0) && errno == EINVAL, "unknown comp_mask");
	CHECK(!dv_cq(ctx, MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE, 0, 0) && errno == EINVAL, "no CQE compression caps");
	CHECK(!dv_cq(ctx, MLX5DV_CQ_INIT_ATTR_MASK_FLAGS | MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, 128,
		     MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD) && errno == EINVAL, "no CQE padding cap");

	/* MLX5_CQE_SIZE, when no size is given. */
	setenv("MLX5_CQE_SIZE", "100", 1);
	errno = 0;
	CHECK(!ibv_create_cq(ctx, 16, NULL, NULL, 0) && errno == EINVAL, "MLX5_CQE_SIZE=100: errno %d", errno);
	cq = dv_cq(ctx, MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, 64, 0);
	CHECK(cq, "an explicit size wins over the variable: %s", strerror(errno));
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	setenv("MLX5_CQE_SIZE", "128", 1);
	struct ibv_cq *c = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(c, "MLX5_CQE_SIZE=128: %s", strerror(errno));
	ibv_destroy_cq(c);
	unsetenv("MLX5_CQE_SIZE");

	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
