/* fork() with another thread busy in the library: the child must not
 * inherit a held lock. The child gets a copy of the world and can use the
 * objects it inherited; the parent goes on. Run by shim/tests/c_programs.rs. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__, #x, errno); return 1; } } while (0)

static struct ibv_context *ctx;
static volatile int stop;

static void *busy(void *arg)
{
	(void)arg;
	while (!stop) {
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		if (pd)
			ibv_dealloc_pd(pd);
	}
	return NULL;
}

int main(void)
{
	int n, status;
	pthread_t t;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n > 0);
	ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	CHECK(pthread_create(&t, NULL, busy, NULL) == 0);
	for (int i = 0; i < 20; i++) {
		pid_t child = fork();
		CHECK(child >= 0);
		if (child == 0) {
			/* The inherited objects are usable in the child's copy. */
			struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
			if (!cq || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd))
				_exit(3);
			_exit(0);
		}
		CHECK(waitpid(child, &status, 0) == child);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	stop = 1;
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
