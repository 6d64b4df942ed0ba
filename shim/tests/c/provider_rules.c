/* What each provider and libibverbs decide before the device: rxe has no
 * parent domains (EOPNOTSUPP), ibv_rereg_mr's input checks and its answer
 * to flags 0 (IBV_REREG_MR_ERR_CMD: the kernel refuses), and mlx5's ECE
 * (vendor 0 is EOPNOTSUPP, the caller's struct is not rewritten, the
 * options read back 0 until a modify). Device 0 is rxe, device 1 a
 * ConnectX-6 (VERBSIM_DEVICES=rxe,cx6). Prints "ok". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define CHECK(c, ...) do { if (!(c)) { printf(__VA_ARGS__); printf("\n"); return 1; } } while (0)

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n == 2, "two devices expected, got %d", n);
	struct ibv_context *rxe = ibv_open_device(list[0]);
	struct ibv_context *mlx = ibv_open_device(list[1]);
	CHECK(rxe && mlx, "open: %s", strerror(errno));

	/* Parent domains: mlx5 only. */
	struct ibv_pd *rpd = ibv_alloc_pd(rxe);
	struct ibv_pd *mpd = ibv_alloc_pd(mlx);
	CHECK(rpd && mpd, "alloc_pd");
	struct ibv_parent_domain_init_attr a = { .pd = rpd };
	errno = 0;
	CHECK(!ibv_alloc_parent_domain(rxe, &a) && errno == EOPNOTSUPP,
	      "rxe parent domain: errno %d", errno);
	a.pd = mpd;
	struct ibv_pd *parent = ibv_alloc_parent_domain(mlx, &a);
	CHECK(parent, "mlx5 parent domain: %s", strerror(errno));
	CHECK(ibv_dealloc_pd(parent) == 0, "dealloc parent");

	/* ibv_rereg_mr. */
	char *buf = calloc(1, 4096);
	struct ibv_pd *mpd2 = ibv_alloc_pd(mlx);
	struct ibv_mr *mr = ibv_reg_mr(mpd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr && mpd2, "reg_mr");
	errno = 0;
	CHECK(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_CMD && errno == EINVAL,
	      "flags 0: the kernel's refusal (errno %d)", errno);
	errno = 0;
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, mpd2, NULL, 0, IBV_ACCESS_REMOTE_READ) ==
		      IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
	      "access without CHANGE_ACCESS (errno %d)", errno);
	CHECK(mr->pd == mpd, "the PD did not move");
	CHECK(ibv_rereg_mr(mr, 1 << 5, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT, "unknown flag");
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, mpd2, NULL, 0, 0) == 0, "CHANGE_PD");
	CHECK(mr->pd == mpd2, "the PD moved");

	/* ECE on mlx5. */
	struct ibv_cq *cq = ibv_create_cq(mlx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(mpd, &qa);
	CHECK(cq && qp, "create_qp: %s", strerror(errno));
	struct ibv_ece e = { .vendor_id = 0, .options = 1 };
	CHECK(ibv_set_ece(qp, &e) == EOPNOTSUPP, "vendor 0");
	e.vendor_id = 0x02c9;
	e.options = 0xffff0001;
	CHECK(ibv_set_ece(qp, &e) == 0, "set_ece: %s", strerror(errno));
	CHECK(e.options == 0xffff0001, "set_ece rewrote the caller's options: %#x", e.options);
	struct ibv_ece q = { 0 };
	CHECK(ibv_query_ece(qp, &q) == 0 && q.vendor_id == 0x02c9 && q.options == 0,
	      "before a modify: vendor %#x options %#x", q.vendor_id, q.options);
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1 };
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS) == 0, "modify");
	CHECK(ibv_query_ece(qp, &q) == 0 && q.options != 0 && (q.options & ~0xffff0001u) == 0,
	      "after a modify: options %#x", q.options);

	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(mpd2);
	ibv_dealloc_pd(mpd);
	ibv_dealloc_pd(rpd);
	free(buf);
	ibv_close_device(rxe);
	ibv_close_device(mlx);
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
