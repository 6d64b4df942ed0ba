/* A signal whose handler runs while ibv_get_cq_event, ibv_get_async_event
 * or rdma_get_cm_event waits with nothing to return ends the wait with -1
 * and errno EINTR, as the read() libibverbs and librdmacm make of the
 * channel's fd does (qperf ends its tests from a SIGALRM handler
 * installed without SA_RESTART, then expects the wait to return). Run
 * against verbsim's drop-in libraries by shim/tests/c_programs.rs. Exit
 * 0 and "ok" on success; the failing step and errno otherwise. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void arm(void)
{
	struct itimerval t = { .it_value = { .tv_usec = 200000 } };
	setitimer(ITIMER_REAL, &t, NULL);
}

/* A CM wait whose channel another thread destroys: it goes on waiting (the
 * kernel's read holds the channel's file), and only a signal ends it. */
static struct rdma_event_channel *doomed;
static volatile int wait_ret = 1, wait_errno, returned;

static void *wait_on_doomed(void *arg)
{
	struct rdma_cm_event *ev;
	(void)arg;
	errno = 0;
	wait_ret = rdma_get_cm_event(doomed, &ev);
	wait_errno = errno;
	returned = 1;
	return NULL;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);

	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, ch, 0);
	CHECK(ctx && ch && cq && ibv_req_notify_cq(cq, 0) == 0);

	struct ibv_cq *ecq;
	void *ectx;
	arm();
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &ecq, &ectx) == -1 && errno == EINTR && alarms == 1);

	struct ibv_async_event ae;
	arm();
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &ae) == -1 && errno == EINTR && alarms == 2);

	struct rdma_event_channel *cm = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	CHECK(cm);
	arm();
	errno = 0;
	CHECK(rdma_get_cm_event(cm, &ev) == -1 && errno == EINTR && alarms == 3);

	rdma_destroy_event_channel(cm);

	doomed = rdma_create_event_channel();
	CHECK(doomed);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, wait_on_doomed, NULL) == 0);
	usleep(100000);
	CHECK(!returned);
	rdma_destroy_event_channel(doomed);
	usleep(300000);
	CHECK(!returned); /* still waiting: no EINVAL for the destroyed channel */
	CHECK(pthread_kill(t, SIGALRM) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(returned && wait_ret == -1 && wait_errno == EINTR);

	CHECK(ibv_destroy_cq(cq) == 0 && ibv_destroy_comp_channel(ch) == 0 && ibv_close_device(ctx) == 0);
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
