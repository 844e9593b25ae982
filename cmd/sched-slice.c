/*
 * The short scheduler slice of the FUSE daemons' workers (ovsnapd's own
 * pool, ovsnap-viewd's libfuse pool).
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sched-slice.h"

/*
 * Every request is a hand-off: the caller wakes a worker and sleeps until
 * it answers.  ovsnapd and ovsnap-viewd each run in a session of their
 * own, so in a group of the scheduler of their own (autogroup, or a
 * systemd unit's cgroup), never the caller's: when the caller sleeps its group leaves the CPU, and with
 * other groups runnable there the worker waits for whichever of them has
 * the earliest deadline, often a whole slice of a busy process.  A plain
 * FUSE passthrough started the same way waits just as long (ovsnapd(8),
 * Costs).  A short slice (EEVDF, Linux 6.12+: sched_runtime of a
 * SCHED_OTHER thread, 0.1 ms the least) gives a woken worker, and its
 * group, an early deadline: it runs soon after the wake-up instead.  It
 * changes latency only, not the CPU share the daemon gets.  Older
 * kernels ignore it; a failure changes nothing but speed.
 */
#define SHORT_SLICE_NS 100000ULL

struct sched_attr_slice {	/* struct sched_attr, which glibc lacks */
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
};

#define SHORT_SLICE_RESET_ON_FORK 0x01	/* SCHED_FLAG_RESET_ON_FORK */

void sched_short_slice(void)
{
#ifdef SYS_sched_setattr
	struct sched_attr_slice a = {
		.size = sizeof(a),
		.sched_runtime = SHORT_SLICE_NS,
	};
	int policy = sched_getscheduler(0);

	/* Keep the policy the daemon was started with: an admin who ran it
	 * under chrt -r, -f, -i or -d (or a unit's CPUSchedulingPolicy=)
	 * chose it over any slice.  SCHED_BATCH is a fair policy too, whose
	 * threads take a custom slice as SCHED_OTHER ones do. */
	if (policy < 0)
		return;
	if (policy & SCHED_RESET_ON_FORK)
		a.sched_flags = SHORT_SLICE_RESET_ON_FORK;
	policy &= ~SCHED_RESET_ON_FORK;
	if (policy != SCHED_OTHER && policy != SCHED_BATCH)
		return;
	a.sched_policy = policy;

	/* Keep the nice value the daemon was started with. */
	errno = 0;
	a.sched_nice = getpriority(PRIO_PROCESS, 0);
	if (errno == 0)
		syscall(SYS_sched_setattr, 0, &a, 0);
#endif
}

