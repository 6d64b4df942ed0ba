/* The simulated mlx5 core clock through the inline verbs of the installed
 * headers: ibv_query_rt_values_ex (the context's query_rt_values op) and
 * mlx5dv_get_clock_info + the inline mlx5dv_ts_to_ns; and
 * mlx5dv_query_port. Prints "ok". */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

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
	CHECK(attr.hca_core_clock == 156250, "hca_core_clock %llu", (unsigned long long)attr.hca_core_clock);

	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	int rc = ibv_query_rt_values_ex(ctx, &v);
	CHECK(rc == 0, "query_rt_values_ex: %d", rc);
	CHECK(v.comp_mask == IBV_VALUES_MASK_RAW_CLOCK, "comp_mask %u", v.comp_mask);
	CHECK(v.raw_clock.tv_sec == 0, "tv_sec %ld", (long)v.raw_clock.tv_sec);
	unsigned long long cycles = v.raw_clock.tv_nsec;

	struct ibv_values_ex bad = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK | 0x80 };
	rc = ibv_query_rt_values_ex(ctx, &bad);
	CHECK(rc == EINVAL, "unknown comp_mask bit: %d, want EINVAL", rc);

	struct mlx5dv_clock_info ci;
	memset(&ci, 0xff, sizeof(ci));
	rc = mlx5dv_get_clock_info(ctx, &ci);
	CHECK(rc == 0, "mlx5dv_get_clock_info: %d", rc);
	CHECK(ci.last_cycles >= cycles, "last_cycles %llu < clock %llu",
	      (unsigned long long)ci.last_cycles, cycles);
	CHECK(ci.mask == 0x7fffffffffffffffULL, "mask %llx", (unsigned long long)ci.mask);
	/* 6.4 ns a tick: 1000 ticks after the info are 6400 ns after it. */
	uint64_t at = mlx5dv_ts_to_ns(&ci, ci.last_cycles);
	uint64_t later = mlx5dv_ts_to_ns(&ci, ci.last_cycles + 1000);
	CHECK(at == ci.nsec, "ts_to_ns(last_cycles) %llu != nsec %llu",
	      (unsigned long long)at, (unsigned long long)ci.nsec);
	CHECK(later - at >= 6399 && later - at <= 6401, "1000 ticks = %llu ns",
	      (unsigned long long)(later - at));
	uint64_t earlier = mlx5dv_ts_to_ns(&ci, ci.last_cycles - 10);
	CHECK(at - earlier >= 63 && at - earlier <= 65, "10 ticks before = %llu ns",
	      (unsigned long long)(at - earlier));

	/* mlx5dv_query_port: no e-switch offloads, no multiport: all zero. */
	struct mlx5dv_port port;
	memset(&port, 0xff, sizeof(port));
	rc = mlx5dv_query_port(ctx, 1, &port);
	CHECK(rc == 0 && port.flags == 0, "mlx5dv_query_port: %d, flags %llx", rc,
	      (unsigned long long)port.flags);
	CHECK(mlx5dv_query_port(ctx, 9, &port) == EINVAL, "port 9");

	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
