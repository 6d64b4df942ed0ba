/* AF_IB addresses (struct sockaddr_ib, as libfabric's verbs provider and
 * mckey -M pass them) are not modelled by the simulated CM: rdma_bind_addr,
 * rdma_resolve_addr and rdma_join_multicast refuse them with EOPNOTSUPP,
 * while an unknown family stays EINVAL and the id stays usable. Run
 * against verbsim's drop-in libraries by shim/tests/c_programs.rs. Exit 0
 * and "ok" on success; the failing step and errno otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct sockaddr_ib ib;
	struct sockaddr_in in = { .sin_family = AF_INET };
	struct sockaddr_storage odd;

	CHECK(ch && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	memset(&ib, 0, sizeof ib);
	ib.sib_family = AF_IB;
	ib.sib_sid = htobe64(RDMA_IB_IP_PS_TCP | 7471);
	ib.sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK | 0xffff);
	errno = 0;
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&ib) == -1 && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&ib, 1000) == -1 && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(rdma_join_multicast(id, (struct sockaddr *)&ib, NULL) == -1 && errno == EOPNOTSUPP);
	memset(&odd, 0, sizeof odd);
	odd.ss_family = 99;
	errno = 0;
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&odd) == -1 && errno == EINVAL);
	/* Nothing changed: the id binds an IPv4 address afterwards. */
	inet_pton(AF_INET, "10.0.0.1", &in.sin_addr);
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&in) == 0 && id->verbs != NULL);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
	printf("ok\n");
	return 0;
}
