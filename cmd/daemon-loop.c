/*
 * The daemon's own multi-threaded session loop, the take barrier, and the
 * control socket.
 *
 * libfuse's fuse_session_loop_mt() cannot hold requests back without
 * sleeping in a worker, and a bounded pool of sleeping workers would
 * deadlock a take that needs writes to pass (rule 13).  So each worker
 * peeks at the request header itself: while the barrier is up, modifying
 * requests are copied to a queue and the worker goes back to the kernel at
 * once; everything else (reads, lookups, page-cache writeback, flush,
 * release, fsync, forget) is served as usual.  When the barrier drops, the
 * queue is replayed in arrival order.
 *
 * A take waits only for the modifying requests that are *changing* SRC
 * (D.inflight counts them), not for those still preserving (rule 13): a
 * request leaves the count while it preserves, holding a reference to the
 * layer it preserves into, and comes back through request_count(), which
 * waits while a barrier is up, before it changes SRC.  daemon-ops.c then
 * re-checks the epoch and preserves again if a take switched layers in
 * between.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "sched-slice.h"
#include "control.h"
#include "merge.h"
#include "ovsnap-private.h"

#define WORKERS_START 4
#define WORKERS_MAX 64
/* Idle workers kept after a burst: above it, a worker that finishes a
 * request exits (libfuse's max_idle_threads).  The kernel wakes idle
 * readers of /dev/fuse in turn, so each one kept costs a cold cache and
 * a switch to a thread that ran long ago, and a burst would otherwise
 * keep its peak for good. */
#define WORKERS_IDLE_MAX WORKERS_START
#define REPLAYERS_MAX 4
/* Tries of a merge of the active layer to find no preserve running
 * before it waits for them under its barrier. */
#define FOLD_ATTEMPTS 20

struct deferred {
	struct deferred *next;
	size_t size;
	char mem[];
};

/* Requests that change SRC: held back while the barrier is up. */
static bool request_modifies(const struct fuse_buf *buf)
{
	const struct fuse_in_header *in = buf->mem;

	if (buf->flags & FUSE_BUF_IS_FD || buf->size < sizeof(*in))
		return false;
	switch (in->opcode) {
	case FUSE_SETATTR:
	case FUSE_MKNOD:
	case FUSE_MKDIR:
	case FUSE_UNLINK:
	case FUSE_RMDIR:
	case FUSE_RENAME:
	case FUSE_RENAME2:
	case FUSE_LINK:
	case FUSE_SYMLINK:
	case FUSE_CREATE:
	case FUSE_SETXATTR:
	case FUSE_REMOVEXATTR:
	case FUSE_FALLOCATE:
	case FUSE_COPY_FILE_RANGE:
	case FUSE_TMPFILE:
		return true;
	case FUSE_OPEN: {
		const struct fuse_open_in *arg = (const void *)(in + 1);

		return buf->size >= sizeof(*in) + sizeof(*arg) && (arg->flags & O_TRUNC);
	}
	case FUSE_WRITE: {
		const struct fuse_write_in *arg = (const void *)(in + 1);

		/* Page-cache writeback (dirty mmap pages) must pass: the
		 * take forces it out and it belongs to the old snapshot. */
		return buf->size >= sizeof(*in) + sizeof(*arg) &&
		       !(arg->write_flags & FUSE_WRITE_CACHE);
	}
	default:
		return false;
	}
}

/* Caller holds loop_lock. */
static int defer_request(const struct fuse_buf *buf)
{
	struct deferred *d = malloc(sizeof(*d) + buf->size);

	if (!d)
		return -ENOMEM;
	d->next = NULL;
	d->size = buf->size;
	memcpy(d->mem, buf->mem, buf->size);
	if (D.deferred_tail)
		D.deferred_tail->next = d;
	else
		D.deferred_head = d;
	D.deferred_tail = d;
	D.ndeferred++;
	return 0;
}

/* Whether the request this thread is serving counts in D.inflight. */
static __thread bool counted;

/*
 * The count of modifying requests in flight and the barrier flag are
 * read and written with sequentially consistent atomics, so a request
 * counts itself without taking loop_lock (a contended mutex and a
 * condition-variable wake-up per request cost more than the request):
 *
 *   a request:  inflight++, then reads barrier; if it is up, it backs out
 *   a take:     barrier = 1 (under loop_lock), then reads inflight
 *
 * In any interleaving at least one side sees the other: either the
 * request backs out or the take waits for it.  Whoever brings inflight
 * to 0 while the barrier is up wakes the take, under loop_lock, so the
 * wake-up cannot fall between the take's check and its wait.
 */
static bool barrier_up(void)
{
	return __atomic_load_n(&D.barrier, __ATOMIC_SEQ_CST);
}

static void inflight_dec(void)
{
	if (__atomic_sub_fetch(&D.inflight, 1, __ATOMIC_SEQ_CST) == 0 && barrier_up()) {
		pthread_mutex_lock(&D.loop_lock);
		pthread_cond_broadcast(&D.barrier_cond);
		pthread_mutex_unlock(&D.loop_lock);
	}
}

/* Count this request unless the barrier is up; true when counted. */
static bool count_fast(void)
{
	__atomic_add_fetch(&D.inflight, 1, __ATOMIC_SEQ_CST);
	if (!barrier_up()) {
		counted = true;
		return true;
	}
	inflight_dec();
	return false;
}

/* Caller holds loop_lock and has seen the barrier down. */
static void count_locked(void)
{
	__atomic_add_fetch(&D.inflight, 1, __ATOMIC_SEQ_CST);
	counted = true;
}

void request_uncount(void)
{
	if (!counted)
		return;
	counted = false;
	inflight_dec();
}

/*
 * Sleeping here is safe where sleeping at dispatch is not: no take or
 * merge ever waits for a request that is not counted, and the requests
 * they need (writeback, flush, release) are served by other workers.
 */
void request_count(void)
{
	if (counted || count_fast())
		return;
	pthread_mutex_lock(&D.loop_lock);
	while (D.barrier)
		pthread_cond_wait(&D.loop_cond, &D.loop_lock);
	count_locked();
	pthread_mutex_unlock(&D.loop_lock);
}

static void process_request(struct fuse_buf *buf)
{
	fuse_session_process_buf(D.se, buf);
	request_uncount();
}

/* ---- references to layers (rule 13) ------------------------------------- */

/*
 * A request preserving outside preserve_lock holds a reference to its
 * layer: a take retires the old layer but closes it only once the last
 * preserve into it is done, and a merge of the active layer waits for
 * them.  `ovsnap drop`/`merge` of an older layer first asks the daemon to
 * "quiesce", which waits until no retired layer is still written.
 */
struct layer_ref {
	struct ovs_layer *layer;
	uint64_t id;
	unsigned refs;
	uint64_t gen;		/* D.epoch when it was made: order of the layers */
	bool retired;		/* no longer D.layer: close at the last put */
	struct layer_ref *next;
};

static pthread_mutex_t layers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t layers_cond = PTHREAD_COND_INITIALIZER;
static struct layer_ref *layer_refs;
static unsigned npreserving;

/* Caller holds layers_lock. */
static struct layer_ref **layer_ref_find(const struct ovs_layer *layer)
{
	struct layer_ref **p = &layer_refs;

	while (*p && (*p)->layer != layer)
		p = &(*p)->next;
	return p;
}

struct ovs_layer *layer_get(void)
{
	struct layer_ref **p, *r;

	if (!D.layer)
		return NULL;
	pthread_mutex_lock(&layers_lock);
	p = layer_ref_find(D.layer);
	r = *p;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r) {
			pthread_mutex_unlock(&layers_lock);
			return NULL;
		}
		r->layer = D.layer;
		r->id = D.layer_id;
		r->gen = __atomic_load_n(&D.epoch, __ATOMIC_ACQUIRE);
		*p = r;
	}
	r->refs++;
	npreserving++;
	pthread_mutex_unlock(&layers_lock);
	return r->layer;
}

void layer_put(struct ovs_layer *layer)
{
	struct layer_ref **p, *r, *gone = NULL;

	if (!layer)
		return;
	pthread_mutex_lock(&layers_lock);
	p = layer_ref_find(layer);
	r = *p;
	npreserving--;
	if (r && --r->refs == 0) {
		*p = r->next;
		gone = r;
	}
	pthread_mutex_unlock(&layers_lock);
	if (gone && gone->retired) {
		ovs_layer_close(gone->layer);
		dbg("layer of snapshot %" PRIu64 " closed after its last preserve", gone->id);
	}
	free(gone);
	/* After the close: "quiesce" means the old layer is left alone. */
	pthread_mutex_lock(&layers_lock);
	pthread_cond_broadcast(&layers_cond);
	pthread_mutex_unlock(&layers_lock);
}

/* The layer is no longer D.layer (caller holds preserve_lock for writing). */
static void layer_retire(struct ovs_layer *layer)
{
	struct layer_ref *r;

	if (!layer)
		return;
	pthread_mutex_lock(&layers_lock);
	r = *layer_ref_find(layer);
	if (r)
		r->retired = true;
	pthread_mutex_unlock(&layers_lock);
	if (!r)
		ovs_layer_close(layer);
}

/* Wait until nothing preserves into a retired layer (all: into any
 * layer), or until timeout_ms passed (-1: no limit); true when idle.
 * Only D.layer gains references, and only under preserve_lock. */
static bool layers_wait_idle(bool all, long timeout_ms)
{
	struct timespec until;
	bool idle;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&layers_lock);
	for (;;) {
		struct layer_ref *r = layer_refs;

		while (r && !all && !r->retired)
			r = r->next;
		idle = !r;
		if (idle)
			break;
		if (timeout_ms < 0)
			pthread_cond_wait(&layers_cond, &layers_lock);
		else if (pthread_cond_timedwait(&layers_cond, &layers_lock, &until) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&layers_lock);
	return idle;
}

/*
 * Wait until nothing preserves into a retired layer but mine (a layer
 * the caller preserves into, which a take may retire meanwhile).  Once
 * a take switched layers, a preserve still running into the old layer
 * reads SRC (the directories above its object, copied up as parents)
 * as it was at the take: nothing of the new epoch may change SRC until
 * it is done.
 */
void layers_wait_retired(const struct ovs_layer *mine)
{
	pthread_mutex_lock(&layers_lock);
	for (;;) {
		struct layer_ref *r = *layer_ref_find(mine), *me = r;

		/* Only layers older than mine: a thread preserving into an
		 * older one never waits for mine (it is not retired before
		 * the older one), so no two threads wait for each other,
		 * however many takes fall during a long preserve. */
		r = layer_refs;
		while (r && (!r->retired || r == me || (me && r->gen >= me->gen)))
			r = r->next;
		if (!r)
			break;
		pthread_cond_wait(&layers_cond, &layers_lock);
	}
	pthread_mutex_unlock(&layers_lock);
}

static unsigned preserving_count(void)
{
	unsigned n;

	pthread_mutex_lock(&layers_lock);
	n = npreserving;
	pthread_mutex_unlock(&layers_lock);
	return n;
}

static void *worker_main(void *arg);

/* Caller holds loop_lock. */
static void spawn_worker(void)
{
	pthread_t t;

	if (D.nworkers >= WORKERS_MAX)
		return;
	if (pthread_create(&t, NULL, worker_main, NULL) != 0) {
		dlog(LOG_WARNING, "cannot start another worker thread");
		return;
	}
	pthread_detach(t);
	D.nworkers++;
}

/*
 * After a request: whether this worker should exit because more than
 * WORKERS_IDLE_MAX others wait for requests.  They keep receiving, so
 * the pool never drops below them; when the last idle one wakes, another
 * starts (worker_main).  Rule 13 holds: a barrier holds no worker (held
 * requests are queued), and one waiting in request_count() is busy, not
 * idle.
 */
static bool too_many_idle(void)
{
#ifdef OVS_MUTANT_WORKERS_NEVER_EXIT	/* make check-mutants: the pool only grows */
	return false;
#endif
	return __atomic_load_n(&D.nidle, __ATOMIC_SEQ_CST) > WORKERS_IDLE_MAX;
}

static void *worker_main(void *arg)
{
	struct fuse_buf buf = { .mem = NULL };

	(void)arg;
	if (identity_thread_init() < 0)
		dlog(LOG_ERR, "set up the identity of a worker thread: %m");
	sched_short_slice();
	for (;;) {
		int res;

		/* Idle workers are counted without loop_lock: only the
		 * last one to wake up takes it, to start another. */
		__atomic_add_fetch(&D.nidle, 1, __ATOMIC_SEQ_CST);

		res = fuse_session_receive_buf(D.se, &buf);

		if (__atomic_sub_fetch(&D.nidle, 1, __ATOMIC_SEQ_CST) == 0 && res > 0) {
			pthread_mutex_lock(&D.loop_lock);
			spawn_worker();
			pthread_mutex_unlock(&D.loop_lock);
		}

		if (res == -EINTR)
			continue;
		if (res <= 0) {
			if (res < 0) {
				dlog(LOG_ERR, "receive from the kernel: %s", strerror(-res));
				fuse_session_exit(D.se);
			}
			break;
		}
		if (fuse_session_exited(D.se))
			break;
		if (!request_modifies(&buf) || count_fast()) {
			process_request(&buf);
			if (too_many_idle())
				break;
			continue;
		}
		pthread_mutex_lock(&D.loop_lock);
		if (D.barrier) {
			if (defer_request(&buf) < 0) {
				/* Cannot queue it: serve it after the take
				 * rather than drop it. */
				while (D.barrier)
					pthread_cond_wait(&D.loop_cond, &D.loop_lock);
			} else {
				pthread_mutex_unlock(&D.loop_lock);
				continue;
			}
		}
		count_locked();
		pthread_mutex_unlock(&D.loop_lock);
		process_request(&buf);
		if (too_many_idle())
			break;
	}
	free(buf.mem);
	pthread_mutex_lock(&D.loop_lock);
	D.nworkers--;
	pthread_cond_broadcast(&D.loop_cond);
	pthread_mutex_unlock(&D.loop_lock);
	return NULL;
}

/* Replay held requests in arrival order, until the queue is empty or a
 * new barrier goes up. */
static void *replayer_main(void *arg)
{
	(void)arg;
	identity_thread_init();
	sched_short_slice();
	pthread_mutex_lock(&D.loop_lock);
	while (!D.barrier && D.deferred_head) {
		struct deferred *d = D.deferred_head;
		struct fuse_buf buf = { .size = d->size, .mem = d->mem };

		D.deferred_head = d->next;
		if (!D.deferred_head)
			D.deferred_tail = NULL;
		D.ndeferred--;
		/* Counted in the same breath as the barrier check: a take
		 * raised in between would not wait for it. */
		count_locked();
		pthread_mutex_unlock(&D.loop_lock);
		if (!fuse_session_exited(D.se))
			process_request(&buf);
		else
			request_uncount();
		free(d);
		pthread_mutex_lock(&D.loop_lock);
	}
	D.nreplayers--;
	pthread_cond_broadcast(&D.loop_cond);
	pthread_mutex_unlock(&D.loop_lock);
	return NULL;
}

/* ---- the barrier --------------------------------------------------------- */

static void barrier_raise(void)
{
	pthread_mutex_lock(&D.loop_lock);
	__atomic_store_n(&D.barrier, true, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&D.inflight, __ATOMIC_SEQ_CST) > 0)
		pthread_cond_wait(&D.barrier_cond, &D.loop_lock);
	pthread_mutex_unlock(&D.loop_lock);
}

static void barrier_drop(void)
{
	pthread_mutex_lock(&D.loop_lock);
	__atomic_store_n(&D.barrier, false, __ATOMIC_SEQ_CST);
	pthread_cond_broadcast(&D.loop_cond);
	while (D.deferred_head && D.nreplayers < REPLAYERS_MAX &&
	       D.nreplayers < D.ndeferred) {
		pthread_t t;

		if (pthread_create(&t, NULL, replayer_main, NULL) != 0)
			break;
		pthread_detach(t);
		D.nreplayers++;
	}
	if (D.deferred_head && D.nreplayers == 0)
		dlog(LOG_ERR, "cannot start a thread to replay %u held requests", D.ndeferred);
	pthread_mutex_unlock(&D.loop_lock);
}

/* ---- writes in flight ------------------------------------------------------ */

static pthread_mutex_t writes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct write_in_flight *writes;

void write_in_flight_begin(struct write_in_flight *w, fuse_ino_t ino, off_t off, size_t len)
{
	*w = (struct write_in_flight){ .ino = ino, .off = off, .len = len };
	pthread_mutex_lock(&writes_lock);
	w->next = writes;
	if (writes)
		writes->pprev = &w->next;
	w->pprev = &writes;
	writes = w;
	pthread_mutex_unlock(&writes_lock);
}

void write_in_flight_end(struct write_in_flight *w)
{
	pthread_mutex_lock(&writes_lock);
	*w->pprev = w->next;
	if (w->next)
		w->next->pprev = w->pprev;
	pthread_mutex_unlock(&writes_lock);
}

struct byte_range {
	uint64_t start, end;
};

static int cmp_range(const void *a, const void *b)
{
	const struct byte_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The ranges of ino's writes in flight, widened to whole pages and
 * sorted (malloc'ed, NULL when there are none).  The take's test with a
 * held write checks that no larger folio of the file is locked on this
 * kernel: the take would wait for the write otherwise. */
static size_t held_ranges(fuse_ino_t ino, struct byte_range **out)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	struct byte_range *r = NULL;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&writes_lock);
	for (struct write_in_flight *w = writes; w; w = w->next) {
		if (w->ino != ino)
			continue;
		if (n == cap) {
			struct byte_range *nr = realloc(r, (cap = cap ? 2 * cap : 8) * sizeof(*r));

			if (!nr)
				break;
			r = nr;
		}
		r[n].start = (uint64_t)w->off & ~(page - 1);
		r[n].end = ((uint64_t)w->off + w->len + page - 1) & ~(page - 1);
		n++;
	}
	pthread_mutex_unlock(&writes_lock);
	qsort(r, n, sizeof(*r), cmp_range);
	*out = r;
	return n;
}

static void write_back(fuse_ino_t ino, uint64_t off, uint64_t len)
{
	int rc = fuse_lowlevel_notify_inval_inode(D.se, ino, (off_t)off, (off_t)len);

	if (rc < 0 && rc != -ENOENT)
		dlog(LOG_WARNING, "write back inode %#" PRIx64 ": %s", (uint64_t)ino,
		     strerror(-rc));
}

/*
 * Rule 10: dirty pages of shared writable mmaps reach the daemon only when
 * the kernel writes them back; invalidating an inode writes them back and
 * waits.  This runs BEFORE the barrier goes up: a held write(2) keeps its
 * page-cache pages locked until it is answered, so invalidating its inode
 * while it is held would never return.  For the same reason it goes
 * around the pages of write(2)s still being served (rule 13: one may be
 * preserving for a long time; it lands after the take anyway).  Pages
 * dirtied after this point are racing the take and land after it.
 */
static void flush_dirty_pages(void)
{
	fuse_ino_t *inos;
	size_t n = nodes_with_writers(&inos);

	for (size_t i = 0; i < n; i++) {
		struct byte_range *held;
		size_t nheld = held_ranges(inos[i], &held);
		uint64_t from = 0;

		for (size_t k = 0; k < nheld; k++) {
			if (held[k].start > from)
				write_back(inos[i], from, held[k].start - from);
			if (held[k].end > from)
				from = held[k].end;
		}
		write_back(inos[i], from, 0);	/* to the end */
		free(held);
	}
	free(inos);
}

/* ---- control commands ---------------------------------------------------- */

static bool test_hooks(void)
{
	const char *e = getenv("OVSNAPD_TEST_HOOKS");

	return e && strcmp(e, "1") == 0;
}

/*
 * Test hook of the rule 13 tests: with OVSNAPD_TEST_HOOKS=1 and
 * OVSNAPD_TEST_PRESERVE_GATE=PATH, a request that went through the
 * preservation path waits, still holding its layer, for as long as PATH
 * exists: a preserve as long as the test wants.  With
 * OVSNAPD_TEST_PRESERVE_GATE_IN=NAME as well, only a request that
 * preserved something at or below SRC's top-level entry NAME waits, so
 * that one preserve is held while others run (issue 13); if PATH is a
 * directory then, one that preserved NAME/ENTRY... waits for as long as
 * PATH/ENTRY exists, so that the test releases them one by one.
 */
static __thread char gate_entry[NAME_MAX + 1];

bool test_preserve_gate_wants(const struct ovs_relpath *path)
{
	const char *in = test_hooks() ? getenv("OVSNAPD_TEST_PRESERVE_GATE_IN") : NULL;

	if (!in || path->n == 0 || strcmp(path->names[0], in) != 0)
		return false;
	snprintf(gate_entry, sizeof(gate_entry), "%s", path->n > 1 ? path->names[1] : "");
	return true;
}

/*
 * Test hook: with OVSNAPD_TEST_HOOKS=1 and OVSNAPD_TEST_NO_MOVE=1 an
 * unlink preserves its file by a copy, never by moving the file itself
 * into the layer (ovs_preserve_unlink): the way every other filesystem
 * takes, tested on XFS too, and a baseline for bench/metadata-bench.sh
 * (OVSNAPD_BASE: a script that sets both and execs ovsnapd).
 */
bool test_no_move(void)
{
	static int no_move = -1;
	int v = __atomic_load_n(&no_move, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *e = getenv("OVSNAPD_TEST_NO_MOVE");

		v = test_hooks() && e && strcmp(e, "1") == 0;
		__atomic_store_n(&no_move, v, __ATOMIC_RELAXED);
	}
	return v;
}

void test_preserve_gate(bool in_dir)
{
	const char *gate = test_hooks() ? getenv("OVSNAPD_TEST_PRESERVE_GATE") : NULL;
	char each[PATH_MAX];
	struct stat st;

	if (!gate || stat(gate, &st) < 0)
		return;
	if (getenv("OVSNAPD_TEST_PRESERVE_GATE_IN") && !in_dir)
		return;
	if (S_ISDIR(st.st_mode)) {
		if (!in_dir || !gate_entry[0])
			return;
		snprintf(each, sizeof(each), "%s/%s", gate, gate_entry);
		gate = each;
	}
	dlog(LOG_INFO, "test hook: preserve held while %s exists", gate);
	while (access(gate, F_OK) == 0)
		usleep(10000);
}

/*
 * Test hook of the crash tests: with OVSNAPD_TEST_HOOKS=1 and
 * OVSNAPD_TEST_CRASH_AFTER=N in its environment (or after the control
 * request "take-crash-after N"), the daemon dies as by SIGKILL right
 * after step N of a take:
 *   1 dirty pages flushed   2 barrier raised   3 filesystem synced
 *   4 layer directories created (before the registry names them)
 *   5 registry written      6 switched to the new layer
 *   7 barrier dropped (before the answer)
 */
enum take_step {
	TAKE_FLUSHED = 1,
	TAKE_BARRIER_RAISED,
	TAKE_SYNCED,
	TAKE_LAYER_MADE,
	TAKE_REGISTERED,
	TAKE_SWITCHED,
	TAKE_BARRIER_DROPPED,
};

static long take_crash_after = -1;

static void take_step(enum take_step step)
{
	if (take_crash_after < 0) {
		const char *e = getenv("OVSNAPD_TEST_CRASH_AFTER");

		take_crash_after = test_hooks() && e ? strtol(e, NULL, 10) : 0;
	}
	if (take_crash_after == step) {
		dlog(LOG_WARNING, "test hook: dying after step %d of a take", (int)step);
		_exit(9);
	}
}

static void take_step_layer_made(void)
{
	take_step(TAKE_LAYER_MADE);
}

static int take_snapshot(const char *name, int lockfd, uint64_t *id_out)
{
	char upper[PATH_MAX];
	struct ovs_layer *layer = NULL, *old;
	uint64_t id;
	int rc;

	if (lockfd >= 0)
		ovs_lock_note(lockfd, "take (ovsnapd)");
	flush_dirty_pages();
	take_step(TAKE_FLUSHED);
	barrier_raise();
	take_step(TAKE_BARRIER_RAISED);

	/* Rule 12: what the snapshot shows is on disk before it exists. */
	if (syncfs(D.srcfd) < 0) {
		rc = ovs_err(errno, "syncfs %s: %m", D.src);
		goto out;
	}
	take_step(TAKE_SYNCED);
	/* The CLI may have changed the registry (names, holds, drops). */
	rc = ovs_registry_load(D.vol);
	if (rc < 0)
		goto out;
	D.vol->lockfd = lockfd;
	ovs_test_hook_layer_made = take_step_layer_made;
	rc = ovs_registry_add_snapshot(D.vol, name, D.srcfd, &id);
	ovs_test_hook_layer_made = NULL;
	D.vol->lockfd = -1;
	if (rc < 0)
		goto out;
	take_step(TAKE_REGISTERED);
	rc = ovs_snapshot_upper(D.vol, id, upper, sizeof(upper));
	if (rc == 0)	/* from the store's fd (DESIGN.md rule 20) */
		rc = ovs_snapshot_layer_open(D.vol, id, D.srcfd, 0, &layer);
	if (rc < 0) {
		char why[1024];

		/* Never leave a registered layer that receives nothing. */
		snprintf(why, sizeof(why), "%s", ovs_last_error());
		D.vol->lockfd = lockfd;
		if (ovs_registry_remove_snapshot(D.vol, id) < 0)
			dlog(LOG_ERR, "cannot unregister snapshot %" PRIu64 " after a failed take: %s",
			     id, ovs_last_error());
		D.vol->lockfd = -1;
		rc = ovs_err(-rc, "%s", why);
		goto out;
	}

	/* The switch: no change is between preserve and change now.
	 * Requests still preserving into the old layer keep it open and
	 * preserve again into this one before they change SRC. */
	pthread_rwlock_wrlock(&D.preserve_lock);
	old = D.layer;
	D.layer = layer;
	D.layer_id = id;
	__atomic_add_fetch(&D.epoch, 1, __ATOMIC_ACQ_REL);
	layer_retire(old);
	pthread_rwlock_unlock(&D.preserve_lock);
	take_step(TAKE_SWITCHED);
	dlog(LOG_INFO, "snapshot %" PRIu64 " taken; changes now go to %s", id, upper);
	*id_out = id;
	rc = 0;
out:
	barrier_drop();
	if (rc == 0)
		take_step(TAKE_BARRIER_DROPPED);
	return rc;
}

/*
 * Fold the active layer away while the volume stays online (issue 5):
 * merge the newest snapshot `newer` into `older` (a drop of the newest, or
 * `ovsnap merge A newest`), or, with older == 0, drop the only snapshot
 * and preserve nothing until the next take.  Under the barrier as for a
 * take, and with preserve_lock held for writing from start to end:
 * page-cache writeback passes the barrier and preserves, and nothing may
 * be preserved into a layer that is being merged away.
 *
 * Afterwards changes are preserved into older's layer.  That is right:
 * whatever U_newer covered, U_older covers now, with the same content
 * (a path that changed between the two takes was covered in U_older
 * already and keeps that entry); what neither covers is unchanged since
 * older was taken.
 *
 * Once the merge has begun (its intent record written) it must finish
 * before any further change is preserved: neither layer alone is right to
 * preserve into halfway.  If it fails there, *fatal is set and the daemon
 * stops serving, as if it had crashed with its barrier up; the next
 * ovsnap command finishes the merge, `ovsnap activate` serves again.
 */
static int fold_active_layer(uint64_t older, uint64_t newer, int lockfd, bool *fatal)
{
	char upper[PATH_MAX], intent[256];
	struct ovs_layer *layer = NULL, *old;
	size_t n;
	int rc;

	if (lockfd >= 0)
		ovs_lock_note(lockfd, older ? "merge (ovsnapd)" : "drop (ovsnapd)");
	/* No preserve may be running into the layers being merged; one
	 * that began before then preserves again into the survivor (the
	 * epoch moves).  Rather than hold the barrier up while a long one
	 * finishes, wait for it outside the barrier and try again; only
	 * when preserves keep overlapping does the barrier wait for them. */
	for (int attempt = 0;; attempt++) {
		flush_dirty_pages();
		barrier_raise();
		pthread_rwlock_wrlock(&D.preserve_lock);
		if (layers_wait_idle(true, 0) || attempt == FOLD_ATTEMPTS)
			break;
		pthread_rwlock_unlock(&D.preserve_lock);
		barrier_drop();
		layers_wait_idle(true, 1000);
	}
	layers_wait_idle(true, -1);

	rc = ovs_registry_load(D.vol);
	if (rc < 0)
		goto out;
	n = ovs_snapshot_count(D.vol);
	if (n == 0 || ovs_snapshot_at(D.vol, n - 1)->id != newer || D.layer_id != newer) {
		rc = ovs_err(ESTALE, "snapshot %" PRIu64 " is not the layer this daemon "
			     "preserves into (%" PRIu64 ")", newer, D.layer_id);
		goto out;
	}
	if (older) {
		/* Open the survivor first: once the merge has begun there is
		 * no going back to the old layer. */
		rc = ovs_snapshot_upper(D.vol, older, upper, sizeof(upper));
		if (rc == 0)	/* from the store's fd (DESIGN.md rule 20) */
			rc = ovs_snapshot_layer_open(D.vol, older, D.srcfd, 0, &layer);
		if (rc < 0)
			goto out;
	}
	D.vol->lockfd = lockfd;
	if (older)
		rc = ovs_merge_snapshots_flags(D.vol, older, newer, OVS_MERGE_UNDER_BARRIER,
					       NULL, NULL);
	else
		rc = ovs_drop_snapshot_flags(D.vol, newer, OVS_MERGE_UNDER_BARRIER, NULL, NULL);
	D.vol->lockfd = -1;
	if (rc < 0) {
		/* A refusal (a view, a redirect) changes nothing; a failure
		 * halfway leaves the intent record behind. */
		if (ovs_intent_read(D.vol, intent, sizeof(intent)) != 0 || intent[0]) {
			char why[1024];

			snprintf(why, sizeof(why), "%s", ovs_last_error());
			*fatal = true;
			rc = ovs_err(-rc, "%s; the snapshot mount stops: run 'ovsnap activate %s' "
				     "to finish the merge and serve again", why, D.src);
		}
		ovs_layer_close(layer);
		goto out;
	}

	old = D.layer;
	D.layer = layer;
	D.layer_id = older;
	/* The per-node "covered in this epoch" memo names the old layer. */
	__atomic_add_fetch(&D.epoch, 1, __ATOMIC_ACQ_REL);
	ovs_layer_close(old);
	if (older)
		dlog(LOG_INFO, "snapshot %" PRIu64 " merged into %" PRIu64 "; changes now go "
		     "to %s", newer, older, upper);
	else
		dlog(LOG_INFO, "snapshot %" PRIu64 " dropped; no snapshot left, nothing "
		     "to preserve until the next take", newer);
out:
	if (!*fatal) {
		pthread_rwlock_unlock(&D.preserve_lock);
		barrier_drop();
	}
	return rc;
}

/* Test hook: hold the barrier for ms milliseconds, as a take would. */
static void barrier_hold(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	barrier_raise();
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	barrier_drop();
}

static int stop_daemon(bool lazy)
{
	unsigned long open;

	pthread_mutex_lock(&D.nodes_lock);
	open = D.open_handles;
	pthread_mutex_unlock(&D.nodes_lock);
	if (open && !lazy)
		return ovs_err(EBUSY, "files are open (%lu handles)", open);
	/* Before the unmount: the workers end with it, and the main thread
	 * must then wait for this thread's answer. */
	pthread_mutex_lock(&D.loop_lock);
	D.stopping = true;
	pthread_mutex_unlock(&D.loop_lock);
	if (umount2(D.src, lazy ? MNT_DETACH : 0) < 0) {
		int err = errno;

		pthread_mutex_lock(&D.loop_lock);
		D.stopping = false;
		pthread_mutex_unlock(&D.loop_lock);
		if (err == EBUSY)
			return ovs_err(EBUSY, "%s is busy (a process works in it)", D.src);
		return ovs_err(err, "unmount %s: %s", D.src, strerror(err));
	}
	return 0;
}

/* take, stop and the test hook one at a time; status answers meanwhile. */
static pthread_mutex_t command_lock = PTHREAD_MUTEX_INITIALIZER;
static bool stop_answered;
static long stop_linger_ms;	/* test hook "stop-linger MS" */
static char detached_sock[PATH_MAX];

/* Answer under this pid's name from now on (see "stop lazy"): true if
 * the socket is there now. */
static bool answer_as_detached(void)
{
	return ovs_detached_socket(getpid(), detached_sock, sizeof(detached_sock)) == 0 &&
	       rename(ovs_volume_socket(D.vol), detached_sock) == 0;
}

/*
 * Whether the snapshot mount was detached behind the daemon's back (an
 * `umount -l` of SRC while processes still use it): SRC's path no longer
 * shows this daemon's mount, so what is written there goes straight to
 * the real directory, while the kernel still sends this daemon the
 * requests of the detached mount's users.  Without its volume socket's
 * name, activate mounts a new daemon, and activate and take see this one
 * as detached and wait for its users (DESIGN.md rule 17), instead of
 * taking it for the volume's: activate would do nothing and a take would
 * switch layers here while SRC went unprotected.  AT_STATX_DONT_SYNC:
 * the attributes of this mount's root need no request to the daemon.
 *
 * SRC's path showing another device says only that the mount is not
 * there now: a folder above SRC renamed (by a user who owns it, say)
 * moves the mount with it, and one swapped for a symlink leads the path
 * elsewhere, the mount still attached.  Taken for a detach, either left
 * the volume "broken" for good (the daemon answering as detached once
 * the name was back, every take refused until an activate).  So the
 * mount table decides then: a detached mount is in it no more, under
 * any path.
 */
static bool detached_behind_our_back(void)
{
	struct statx stx;

	if (detached_sock[0] || __atomic_load_n(&D.stopping, __ATOMIC_ACQUIRE) ||
	    D.fuse_dev == makedev(0, 0))
		return false;
	if (statx(AT_FDCWD, D.src, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_TYPE, &stx) == 0 &&
	    makedev(stx.stx_dev_major, stx.stx_dev_minor) == D.fuse_dev)
		return false;
	/* an unreadable table cannot tell: not detached */
	return ovs_mount_devno_mounted(D.fuse_dev) == 0;
}

static void handle_request(int conn)
{
	char req[OVS_CTL_MSG_MAX];
	int passed = -1, rc;

	rc = ovs_ctl_recv(conn, req, sizeof(req), &passed);
	if (rc < 0)
		return;
	dbg("control: %s", req);
	if (detached_behind_our_back()) {
		pthread_mutex_lock(&command_lock);
		if (!detached_sock[0] && answer_as_detached())
			dlog(LOG_WARNING, "the snapshot mount of %s was detached (umount -l?) while "
			     "in use: serving its users until they are gone; %s is not protected "
			     "until 'ovsnap activate'", D.src, D.src);
		pthread_mutex_unlock(&command_lock);
		if (passed >= 0)
			close(passed);
		ovs_ctl_reply(conn, "err %d the snapshot mount of %s was detached; its daemon "
			      "serves its remaining users only", ESTALE, D.src);
		return;
	}
	if (strcmp(req, "status") == 0) {
		unsigned long open;
		size_t nnodes, nbytes;
		int nfds, fdbound;
		unsigned nsx, nss;

		ns_lock_waiting(&D.ns_lock, &nsx, &nss);
		pthread_mutex_lock(&D.nodes_lock);
		open = D.open_handles;
		pthread_mutex_unlock(&D.nodes_lock);
		nodes_counts(&nnodes, &nbytes, &nfds, &fdbound);
		ovs_ctl_reply(conn, "ok pid=%d layer=%" PRIu64 " epoch=%" PRIu64
			      " open=%lu deferred=%u barrier=%d preserving=%u nodes=%zu"
			      " nodebytes=%zu nodefds=%d fdbound=%d relocks=%u nswait=%u/%u"
			      " yields=%lu fusedev=%u:%u src=%s",
			      (int)getpid(), D.layer_id,
			      __atomic_load_n(&D.epoch, __ATOMIC_ACQUIRE), open, D.ndeferred,
			      (int)__atomic_load_n(&D.barrier, __ATOMIC_SEQ_CST), preserving_count(), nnodes, nbytes, nfds,
			      D.handles ? fdbound : -1, __atomic_load_n(&D.relocks, __ATOMIC_RELAXED),
			      nsx, nss, ovs_copy_yields(), major(D.fuse_dev),
			      minor(D.fuse_dev), D.src);
	} else if (strcmp(req, "quiesce") == 0) {
		/* The CLI holds the volume lock: no take can retire another
		 * layer until it is done. */
		layers_wait_idle(false, -1);
		ovs_ctl_reply(conn, "ok");
	} else if (strcmp(req, "take") == 0 || strncmp(req, "take ", 5) == 0) {
		const char *name = req[4] ? req + 5 : "-";
		uint64_t id = 0;

		pthread_mutex_lock(&command_lock);
		rc = take_snapshot(strcmp(name, "-") ? name : NULL, passed, &id);
		pthread_mutex_unlock(&command_lock);
		if (rc < 0) {
			dlog(LOG_ERR, "take failed: %s", ovs_last_error());
			ovs_ctl_reply(conn, "err %d %s", -rc, ovs_last_error());
		} else {
			ovs_ctl_reply(conn, "ok %" PRIu64, id);
		}
	} else if (strcmp(req, "stop") == 0 || strcmp(req, "stop lazy") == 0) {
		pthread_mutex_lock(&command_lock);
		rc = stop_daemon(strcmp(req, "stop lazy") == 0);
		if (rc < 0) {
			pthread_mutex_unlock(&command_lock);
			ovs_ctl_reply(conn, "err %d %s", -rc, ovs_last_error());
		} else {
			dlog(LOG_INFO, "stopped by request (%s)", req);
			/* A new daemon may start at once: the socket path is
			 * no longer ours.  Detached, this daemon serves on
			 * until its last user goes: it answers under its pid's
			 * name so that activate and take can find its users
			 * (DESIGN.md rule 17). */
			if (strcmp(req, "stop lazy") == 0 && answer_as_detached())
				dlog(LOG_INFO, "detached; serving its users until they are gone");
			else
				unlink(ovs_volume_socket(D.vol));
			ovs_ctl_reply(conn, "ok");
			/* The main thread exits once this is out; keep
			 * command_lock so nothing else starts. */
			pthread_mutex_lock(&D.loop_lock);
			stop_answered = true;
			pthread_cond_broadcast(&D.loop_cond);
			pthread_mutex_unlock(&D.loop_lock);
		}
	} else if (strncmp(req, "merge-active ", 13) == 0 ||
		   strncmp(req, "drop-active ", 12) == 0) {
		bool drop = req[0] == 'd', fatal = false;
		uint64_t older = 0, newer = 0;

		if (drop ? sscanf(req, "drop-active %" SCNu64, &newer) != 1
			 : sscanf(req, "merge-active %" SCNu64 " %" SCNu64, &older, &newer) != 2 ||
			   older == 0) {
			ovs_ctl_reply(conn, "err %d bad request: %.64s", EINVAL, req);
		} else {
			pthread_mutex_lock(&command_lock);
			rc = 0;
			if (drop) {
				/* The one before it, or none: then nothing
				 * is left to preserve into. */
				rc = ovs_registry_load(D.vol);
				for (size_t i = 1; rc == 0 && i < ovs_snapshot_count(D.vol); i++)
					if (ovs_snapshot_at(D.vol, i)->id == newer)
						older = ovs_snapshot_at(D.vol, i - 1)->id;
			}
			if (rc == 0)
				rc = fold_active_layer(older, newer, passed, &fatal);
			if (rc < 0) {
				dlog(fatal ? LOG_CRIT : LOG_ERR, "%s failed: %s", req,
				     ovs_last_error());
				ovs_ctl_reply(conn, "err %d %s", -rc, ovs_last_error());
			} else {
				ovs_ctl_reply(conn, "ok %" PRIu64, older);
			}
			if (fatal)
				_exit(1);	/* barrier up: nothing reaches SRC */
			pthread_mutex_unlock(&command_lock);
		}
	} else if (strncmp(req, "take-crash-after ", 17) == 0 && test_hooks()) {
		pthread_mutex_lock(&command_lock);
		take_crash_after = strtol(req + 17, NULL, 10);
		pthread_mutex_unlock(&command_lock);
		ovs_ctl_reply(conn, "ok");
	} else if (strncmp(req, "stop-linger ", 12) == 0 && test_hooks()) {
		/* After a stop, stay a while with every fd open before
		 * exiting: deactivate must wait for the exit, not the
		 * answer (tests/ts/admin/deactivate_test.sh). */
		stop_linger_ms = strtol(req + 12, NULL, 10);
		ovs_ctl_reply(conn, "ok");
	} else if (strncmp(req, "barrier-hold ", 13) == 0 && test_hooks()) {
		pthread_mutex_lock(&command_lock);
		barrier_hold(strtol(req + 13, NULL, 10));
		pthread_mutex_unlock(&command_lock);
		ovs_ctl_reply(conn, "ok");
	} else if (restore_request(conn, req, passed)) {
		/* answered (daemon-restore.c) */
	} else {
		ovs_ctl_reply(conn, "err %d unknown request: %.64s", EINVAL, req);
	}
	/* The CLI's volume lock stays held until the reply is out. */
	if (passed >= 0)
		close(passed);
}

static void *connection_main(void *arg)
{
	int conn = (int)(intptr_t)arg;

	handle_request(conn);
	close(conn);
	return NULL;
}

/* One thread per connection: a status must answer while a take runs. */
static void *control_main(void *arg)
{
	(void)arg;
	for (;;) {
		int conn = accept4(D.ctl_fd, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;

		if (conn < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EINVAL || errno == EBADF)
				break;	/* shut down */
			dlog(LOG_ERR, "accept on the control socket: %m");
			sleep(1);
			continue;
		}
		if (pthread_create(&t, NULL, connection_main, (void *)(intptr_t)conn) != 0) {
			ovs_ctl_reply(conn, "err %d cannot start a thread", EAGAIN);
			close(conn);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

int daemon_loop(void)
{
	pthread_t ctl;
	bool stopped;

	pthread_mutex_lock(&D.loop_lock);
	for (int i = 0; i < WORKERS_START; i++)
		spawn_worker();
	pthread_mutex_unlock(&D.loop_lock);
	if (pthread_create(&ctl, NULL, control_main, NULL) != 0) {
		dlog(LOG_ERR, "cannot start the control thread");
		return 1;
	}

	pthread_detach(ctl);

	pthread_mutex_lock(&D.loop_lock);
	while (D.nworkers > 0 || D.nreplayers > 0)
		pthread_cond_wait(&D.loop_cond, &D.loop_lock);
	/* A stop unmounts before it answers: let the answer out first. */
	while (D.stopping && !stop_answered)
		pthread_cond_wait(&D.loop_cond, &D.loop_lock);
	stopped = D.stopping;
	pthread_mutex_unlock(&D.loop_lock);
	if (stopped && stop_linger_ms > 0) {
		struct timespec ts = { .tv_sec = stop_linger_ms / 1000,
				       .tv_nsec = (stop_linger_ms % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	if (detached_sock[0])
		unlink(detached_sock);
	/* (Detached, the volume's socket may be a new daemon's.) */
	if (!stopped && !detached_sock[0]) {
		/* Someone unmounted SRC behind our back: nothing left to
		 * serve.  The socket would only mislead the CLI. */
		dlog(LOG_WARNING, "%s was unmounted; exiting", D.src);
		unlink(ovs_volume_socket(D.vol));
	}
	return 0;
}
