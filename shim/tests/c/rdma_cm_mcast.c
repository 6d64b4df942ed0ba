/* CM multicast through the drop-in librdmacm: two UDP ids on two devices
 * join 239.1.2.3; RDMA_CM_EVENT_MULTICAST_JOIN carries param.ud (MLID,
 * MGID, QPN 0xFFFFFF, Q_Key) and the join's context; a UD SEND to the
 * group reaches both QPs (the sender's own too: loopback), and after
 * rdma_leave_multicast no more. Errors as librdmacm reports them. Run by
 * shim/tests/c_programs.rs; exit 0 and "ok" on success. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

struct member {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	char buf[2048];
};

static int setup(struct member *m, const char *ip)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct ibv_qp_init_attr qpa = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 }, .qp_type = IBV_QPT_UD };
	inet_pton(AF_INET, ip, &a.sin_addr);
	m->ch = rdma_create_event_channel();
	CHECK(m->ch);
	CHECK(rdma_create_id(m->ch, &m->id, NULL, RDMA_PS_UDP) == 0);
	CHECK(rdma_bind_addr(m->id, (struct sockaddr *)&a) == 0);
	CHECK(rdma_create_qp(m->id, NULL, &qpa) == 0);
	m->mr = ibv_reg_mr(m->id->pd, m->buf, sizeof m->buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(m->mr);
	return 0;
}

static int post_recv(struct member *m)
{
	struct ibv_sge sge = { .addr = (uintptr_t)m->buf, .length = 1024, .lkey = m->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(m->id->qp, &wr, &bad);
}

/* Fetches the join event: its UD parameters and context. */
static int joined(struct member *m, struct rdma_ud_param *ud)
{
	struct rdma_cm_event *ev;
	CHECK(rdma_get_cm_event(m->ch, &ev) == 0);
	if (ev->event != RDMA_CM_EVENT_MULTICAST_JOIN) {
		fprintf(stderr, "got %s (status %d)\n", rdma_event_str(ev->event), ev->status);
		return 1;
	}
	CHECK(ev->id == m->id && ev->status == 0);
	*ud = ev->param.ud;
	CHECK(rdma_ack_cm_event(ev) == 0);
	return 0;
}

/* Polls m's receive CQ for one datagram; returns its payload length, or -1. */
static int got(struct member *m)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(m->id->recv_cq, 1, &wc);
	if (n != 1)
		return -1;
	if (wc.status != IBV_WC_SUCCESS || !(wc.wc_flags & IBV_WC_GRH))
		return -2;
	return (int)wc.byte_len - 40;
}

static int send_to(struct member *m, struct ibv_ah *ah, struct rdma_ud_param *ud, const char *msg)
{
	struct ibv_wc wc;
	int n;
	strcpy(m->buf + 1024, msg);
	struct ibv_sge sge = { .addr = (uintptr_t)(m->buf + 1024), .length = strlen(msg) + 1, .lkey = m->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = ud->qp_num;
	wr.wr.ud.remote_qkey = ud->qkey;
	CHECK(ibv_post_send(m->id->qp, &wr, &bad) == 0);
	while ((n = ibv_poll_cq(m->id->send_cq, 1, &wc)) == 0)
		;
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9);
	return 0;
}

int main(void)
{
	static struct member a, b;
	struct sockaddr_in grp = { .sin_family = AF_INET }, other = { .sin_family = AF_INET };
	struct rdma_ud_param ud, udb;
	static const uint8_t mgid[16] = { 0xff, 0x12, 0x40, 0x01, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x0f, 1, 2, 3 };
	int ctx_a = 1, ctx_b = 2;

	inet_pton(AF_INET, "239.1.2.3", &grp.sin_addr);
	inet_pton(AF_INET, "239.4.5.6", &other.sin_addr);
	CHECK(setup(&a, "10.0.0.1") == 0 && setup(&b, "10.0.1.1") == 0);

	CHECK(rdma_join_multicast(a.id, (struct sockaddr *)&grp, &ctx_a) == 0);
	CHECK(joined(&a, &ud) == 0);
	CHECK(ud.private_data == &ctx_a);
	CHECK(ud.qp_num == 0xffffff && ud.qkey == 0x01234567);
	CHECK(ud.ah_attr.dlid == 0xc001 && ud.ah_attr.is_global == 1 && ud.ah_attr.port_num == 1);
	CHECK(memcmp(ud.ah_attr.grh.dgid.raw, mgid, 16) == 0);

	struct rdma_cm_join_mc_attr_ex ex = { .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, .join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER, .addr = (struct sockaddr *)&grp };
	CHECK(rdma_join_multicast_ex(b.id, &ex, &ctx_b) == 0);
	CHECK(joined(&b, &udb) == 0);
	CHECK(udb.private_data == &ctx_b && udb.ah_attr.dlid == 0xc001);

	/* Errors: the same group twice, a group not joined, bad join attributes. */
	CHECK(rdma_join_multicast(a.id, (struct sockaddr *)&grp, NULL) == -1 && errno == EADDRINUSE);
	CHECK(rdma_leave_multicast(a.id, (struct sockaddr *)&other) == -1 && errno == EADDRNOTAVAIL);
	ex.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	CHECK(rdma_join_multicast_ex(a.id, &ex, NULL) == -1 && errno == EINVAL);
	ex.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	CHECK(rdma_join_multicast_ex(a.id, &ex, NULL) == -1 && errno == ENOTSUP);

	/* A sends to the group: B and A itself receive. */
	struct ibv_ah *ah = ibv_create_ah(a.id->pd, &ud.ah_attr);
	CHECK(ah);
	CHECK(post_recv(&a) == 0 && post_recv(&b) == 0);
	CHECK(send_to(&a, ah, &ud, "to the group") == 0);
	CHECK(got(&b) == 13 && strcmp(b.buf + 40, "to the group") == 0);
	CHECK(memcmp(b.buf + 24, mgid, 16) == 0);
	CHECK(got(&a) == 13);

	/* B leaves: the next datagram reaches A only. */
	CHECK(rdma_leave_multicast(b.id, (struct sockaddr *)&grp) == 0);
	CHECK(post_recv(&a) == 0 && post_recv(&b) == 0);
	CHECK(send_to(&a, ah, &ud, "again") == 0);
	CHECK(got(&a) == 6);
	CHECK(got(&b) == -1);

	CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(rdma_leave_multicast(a.id, (struct sockaddr *)&grp) == 0);
	CHECK(ibv_dereg_mr(a.mr) == 0 && ibv_dereg_mr(b.mr) == 0);
	rdma_destroy_qp(a.id);
	rdma_destroy_qp(b.id);
	CHECK(rdma_destroy_id(a.id) == 0 && rdma_destroy_id(b.id) == 0);
	rdma_destroy_event_channel(a.ch);
	rdma_destroy_event_channel(b.ch);
	printf("ok\n");
	return 0;
}
