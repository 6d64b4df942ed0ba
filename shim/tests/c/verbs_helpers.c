/* libibverbs' functions that need a device: ibv_get_pkey_index,
 * ibv_init_ah_from_wc / ibv_create_ah_from_wc (IB GRH, RoCE v2 over IPv6
 * and IPv4, the errors), ibv_resolve_eth_l2_from_gid, ibv_reg_mr_iova,
 * the fork range calls, ibv_get_sysfs_path (SYSFS_PATH set by the test),
 * and libmlx5's mlx5dv_alloc_dm and mlx5dv_set_context_attr. Expected
 * values are rdma-core 44's rules applied by hand. Run by
 * shim/tests/c_programs.rs with VERBSIM_DEVICES=cx6,cx7 (an InfiniBand
 * and a RoCE port). */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

/* Exported by libibverbs, declared in rdma-core's provider header
 * (driver.h), which Debian does not install. */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
const char *ibv_get_sysfs_path(void);

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

static struct ibv_context *open_link(struct ibv_device **list, int n, int link)
{
	for (int i = 0; i < n; i++) {
		struct ibv_context *c = ibv_open_device(list[i]);
		struct ibv_port_attr pa;
		if (c && ibv_query_port(c, 1, &pa) == 0 && pa.link_layer == link)
			return c;
		if (c)
			ibv_close_device(c);
	}
	return NULL;
}

static unsigned short ip_csum(const unsigned char *h)
{
	unsigned sum = 0;
	for (int i = 0; i < 20; i += 2)
		if (i != 10)
			sum += (h[i] << 8) | h[i + 1];
	while (sum > 0xffff)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 2);
	struct ibv_context *ib = open_link(list, n, IBV_LINK_LAYER_INFINIBAND);
	struct ibv_context *roce = open_link(list, n, IBV_LINK_LAYER_ETHERNET);
	ibv_free_device_list(list);
	CHECK(ib && roce);

	/* ibv_get_pkey_index: the table's index, -1 otherwise. */
	__be16 pkey;
	CHECK(ibv_query_pkey(ib, 1, 0, &pkey) == 0);
	CHECK(ibv_get_pkey_index(ib, 1, pkey) == 0);
	errno = 0;
	CHECK(ibv_get_pkey_index(ib, 1, htobe16(0x1234)) == -1 && errno == ENOENT);
	errno = 0;
	CHECK(ibv_get_pkey_index(ib, 9, pkey) == -1 && errno == EINVAL);

	/* ibv_init_ah_from_wc, InfiniBand: an IPv6-shaped GRH, next header 0x1b. */
	union ibv_gid own, remote = { .raw = { 0xfe, 0x80, [15] = 0x34, [14] = 0x12 } };
	CHECK(ibv_query_gid(ib, 1, 0, &own) == 0);
	struct ibv_grh grh = { 0 };
	grh.version_tclass_flow = htobe32((6u << 28) | (0x23u << 20) | 0x12345);
	grh.next_hdr = 0x1b;
	grh.hop_limit = 17;
	grh.sgid = remote;
	grh.dgid = own;
	struct ibv_wc wc = { .slid = 7, .sl = 3, .dlid_path_bits = 1, .wc_flags = IBV_WC_GRH };
	struct ibv_ah_attr ah;
	memset(&ah, 0xee, sizeof ah);
	CHECK(ibv_init_ah_from_wc(ib, 1, &wc, &grh, &ah) == 0);
	CHECK(ah.is_global == 1 && ah.dlid == 7 && ah.sl == 3 && ah.src_path_bits == 1 && ah.port_num == 1);
	CHECK(memcmp(ah.grh.dgid.raw, remote.raw, 16) == 0 && ah.grh.sgid_index == 0);
	CHECK(ah.grh.hop_limit == 17 && ah.grh.traffic_class == 0x23 && ah.grh.flow_label == 0x12345);
	CHECK(ah.static_rate == 0);
	/* Without IBV_WC_GRH: a local address, the flow label still read. */
	wc.wc_flags = 0;
	CHECK(ibv_init_ah_from_wc(ib, 1, &wc, &grh, &ah) == 0);
	CHECK(ah.is_global == 0 && ah.dlid == 7 && ah.grh.hop_limit == 0 && ah.grh.flow_label == 0x12345);
	wc.wc_flags = IBV_WC_GRH;
	/* ibv_create_ah_from_wc shares it. */
	struct ibv_pd *pd = ibv_alloc_pd(ib);
	CHECK(pd);
	struct ibv_ah *a = ibv_create_ah_from_wc(pd, &wc, &grh, 1);
	CHECK(a && a->pd == pd);
	CHECK(ibv_destroy_ah(a) == 0);
	/* Errors: another next header; a multicast destination; no GRH buffer. */
	grh.next_hdr = 6;
	errno = 0;
	CHECK(ibv_init_ah_from_wc(ib, 1, &wc, &grh, &ah) == -1 && errno == EPROTONOSUPPORT);
	errno = 0;
	CHECK(ibv_create_ah_from_wc(pd, &wc, &grh, 1) == NULL && errno == EPROTONOSUPPORT);
	grh.next_hdr = 0x1b;
	grh.dgid.raw[0] = 0xff;
	errno = 0;
	CHECK(ibv_init_ah_from_wc(ib, 1, &wc, &grh, &ah) == -1 && errno == EINVAL);
	grh.dgid = own;
	errno = 0;
	CHECK(ibv_init_ah_from_wc(ib, 1, &wc, NULL, &ah) == -1 && errno == EINVAL);

	/* RoCE v2 over IPv6 (next header UDP): index 1 is the RoCE v2 GID. */
	union ibv_gid v2;
	CHECK(ibv_query_gid(roce, 1, 1, &v2) == 0);
	grh.next_hdr = IPPROTO_UDP;
	grh.dgid = v2;
	CHECK(ibv_init_ah_from_wc(roce, 1, &wc, &grh, &ah) == 0);
	CHECK(ah.grh.sgid_index == 1 && ah.grh.hop_limit == 17);
	/* The same GID looked for as RoCE v1 (next header 0x1b) is not there. */
	grh.next_hdr = 0x1b;
	errno = 0;
	CHECK(ibv_init_ah_from_wc(roce, 1, &wc, &grh, &ah) == -1 && errno != 0);

	/* RoCE v2 over IPv4: the IPv4 header in the GRH's last 20 bytes. */
	unsigned char g4[40] = { 0 };
	unsigned char *ip = g4 + 20;
	ip[0] = 0x45; ip[1] = 0x10; ip[8] = 33; ip[9] = 17;
	ip[12] = 10; ip[13] = 0; ip[14] = 0; ip[15] = 9;
	memcpy(ip + 16, v2.raw + 12, 4);
	unsigned short cs = ip_csum(ip);
	ip[10] = cs >> 8; ip[11] = cs & 0xff;
	CHECK(ibv_init_ah_from_wc(roce, 1, &wc, (struct ibv_grh *)g4, &ah) == 0);
	unsigned char mapped[16] = { [10] = 0xff, [11] = 0xff, [12] = 10, [15] = 9 };
	CHECK(ah.is_global && ah.grh.sgid_index == 1 && memcmp(ah.grh.dgid.raw, mapped, 16) == 0);
	CHECK(ah.grh.hop_limit == 33 && ah.grh.traffic_class == 0x10);
	ip[16] = 224;
	errno = 0;
	CHECK(ibv_init_ah_from_wc(roce, 1, &wc, (struct ibv_grh *)g4, &ah) == -1 && errno == EINVAL);

	/* ibv_resolve_eth_l2_from_gid: the MAC behind a RoCE GID. */
	union ibv_gid ll;
	CHECK(ibv_query_gid(roce, 1, 0, &ll) == 0);
	uint8_t want[6] = { ll.raw[8] ^ 2, ll.raw[9], ll.raw[10], ll.raw[13], ll.raw[14], ll.raw[15] };
	struct ibv_ah_attr ra = { .port_num = 1, .is_global = 1 };
	uint8_t mac[6];
	uint16_t vid = 0;
	ra.grh.dgid = ll;
	CHECK(ibv_resolve_eth_l2_from_gid(roce, &ra, mac, &vid) == 0);
	CHECK(memcmp(mac, want, 6) == 0 && vid == 0xffff);
	memset(mac, 0, 6);
	ra.grh.dgid = v2; /* IP-based: the port that holds it answers */
	CHECK(ibv_resolve_eth_l2_from_gid(roce, &ra, mac, NULL) == 0 && memcmp(mac, want, 6) == 0);
	unsigned char mc[16] = { [10] = 0xff, [11] = 0xff, [12] = 224, [13] = 0x81, [14] = 2, [15] = 3 };
	memcpy(ra.grh.dgid.raw, mc, 16);
	CHECK(ibv_resolve_eth_l2_from_gid(roce, &ra, mac, NULL) == 0);
	CHECK(mac[0] == 1 && mac[1] == 0 && mac[2] == 0x5e && mac[3] == 1 && mac[4] == 2 && mac[5] == 3);
	memcpy(ra.grh.dgid.raw, mapped, 16); /* 10.0.0.9: nobody */
	CHECK(ibv_resolve_eth_l2_from_gid(roce, &ra, mac, NULL) == -EHOSTUNREACH);
	ra.grh.dgid = own;
	CHECK(ibv_resolve_eth_l2_from_gid(ib, &ra, mac, NULL) == -EINVAL);

	/* ibv_reg_mr_iova: the iova with the classic int access flags. */
	char *buf = malloc(8192);
	CHECK(buf);
	memset(buf, 'x', 8192);
	struct ibv_mr *mr = ibv_reg_mr_iova(pd, buf, 4096, 0x10000, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr && mr->addr == buf && mr->length == 4096 && mr->pd == pd);
	CHECK(ibv_dereg_mr(mr) == 0);
	errno = 0;
	CHECK(ibv_reg_mr_iova(pd, buf, 4096, 0x10000, IBV_ACCESS_REMOTE_WRITE) == NULL && errno == EINVAL);

	/* The fork range calls succeed and the child still has the pages. */
	CHECK(ibv_dontfork_range(buf, 8192) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(buf[4096] == 'x' ? 0 : 3);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(ibv_dofork_range(buf, 8192) == 0);
	CHECK(ibv_dontfork_range(NULL, 0) == 0);

	/* ibv_get_sysfs_path: $SYSFS_PATH without trailing slashes, kept. */
	const char *sp = ibv_get_sysfs_path();
	CHECK(sp && strcmp(sp, "/tmp/verbsim-sysfs") == 0);
	setenv("SYSFS_PATH", "/elsewhere", 1);
	CHECK(ibv_get_sysfs_path() == sp);

	/* mlx5dv_alloc_dm: MEMIC is the device memory ibv_alloc_dm gives. */
	struct ibv_alloc_dm_attr da = { .length = 64 };
	struct mlx5dv_alloc_dm_attr mda = { .type = MLX5DV_DM_TYPE_MEMIC };
	struct ibv_dm *dm = mlx5dv_alloc_dm(ib, &da, &mda);
	CHECK(dm && dm->context == ib);
	char in[8] = "dm-data", out[8] = { 0 };
	CHECK(ibv_memcpy_to_dm(dm, 0, in, 8) == 0 && ibv_memcpy_from_dm(out, dm, 0, 8) == 0);
	CHECK(memcmp(in, out, 8) == 0);
	CHECK(ibv_free_dm(dm) == 0);
	mda.type = MLX5DV_DM_TYPE_STEERING_SW_ICM;
	errno = 0;
	CHECK(mlx5dv_alloc_dm(ib, &da, &mda) == NULL && errno == EOPNOTSUPP);
	mda.type = MLX5DV_DM_TYPE_MEMIC;
	mda.comp_mask = 1;
	errno = 0;
	CHECK(mlx5dv_alloc_dm(ib, &da, &mda) == NULL && errno == EINVAL);

	/* mlx5dv_set_context_attr: buffer allocators taken; other types not. */
	struct mlx5dv_ctx_allocators al = { 0 };
	CHECK(mlx5dv_set_context_attr(ib, MLX5DV_CTX_ATTR_BUF_ALLOCATORS, &al) == 0);
	errno = 0;
	CHECK(mlx5dv_set_context_attr(ib, 77, &al) == EOPNOTSUPP && errno == EOPNOTSUPP);

	free(buf);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ib) == 0 && ibv_close_device(roce) == 0);
	printf("ok\n");
	return 0;
}
