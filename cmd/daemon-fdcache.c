/*
 * The daemon's bounded cache of open O_PATH fds of nodes (issue 13).
 *
 * A node is identified by its file handle; its fd is opened again from the
 * handle (open_by_handle_at with SRC's root as the mount fd) when it is
 * needed and not cached.  The cache holds at most `bound` fds that nobody
 * uses: min(4096, a quarter of the soft RLIMIT_NOFILE), at least 16,
 * looked at again every BOUND_REFRESH misses and at EMFILE, so a limit
 * lowered under a running daemon (prlimit) is followed.  An fd in use
 * (node_fd_get until node_fd_put) is never evicted: the cache then holds
 * more than its bound, and gives the extra back as the users put theirs.
 *
 * Pinned fds never leave: the root, objects removed from the tree (a
 * handle of an unlinked inode cannot be trusted to open it again), and
 * objects without a usable handle (all of them on a filesystem without
 * handles: the scheme before issue 13, one fd per cached inode).
 *
 * The cache's lock is innermost: nothing else is locked while it is held,
 * and no fd is opened under it (an eviction closes after unlocking).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon.h"
#include "ovsnap-private.h"

#define FD_CACHE_MAX 4096
#define FD_CACHE_MIN 16
#define BOUND_REFRESH 64	/* misses between looks at RLIMIT_NOFILE */
#define EVICT_BATCH 16		/* fds one call closes at most */

struct fd_slot {
	int fd;			/* -1: free */
	unsigned refs;
	struct dnode *node;
	int prev, next;		/* the LRU list (refs 0), or the free list (next) */
};

static struct {
	pthread_mutex_t lock;
	struct fd_slot *slots;
	int nslots;		/* allocated */
	int used;		/* slots holding an fd */
	int pinned;		/* pinned fds of nodes */
	int bound;
	int lru_head, lru_tail;	/* least recently used first */
	int free_head;
	int *slot_of_fd;	/* fd number -> slot, -1: none (node_relpath_free) */
	int nmap;
	unsigned misses;
} C = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.bound = FD_CACHE_MIN,
	.lru_head = -1, .lru_tail = -1, .free_head = -1,
};

/* The victims of an eviction, closed once the lock is dropped. */
struct victims {
	int fd[EVICT_BATCH + 1];
	int n;
};

static void victims_close(struct victims *v)
{
	for (int i = 0; i < v->n; i++)
		close(v->fd[i]);
	v->n = 0;
}

static int bound_from_limit(void)
{
	size_t b = ovs_nofile_quarter(FD_CACHE_MAX);

	return b < FD_CACHE_MIN ? FD_CACHE_MIN : (int)b;
}

void fdcache_init(void)
{
	__atomic_store_n(&C.bound, bound_from_limit(), __ATOMIC_RELAXED);
}

void nodes_counts(size_t *nnodes, size_t *bytes, int *nfds, int *bound)
{
	pthread_mutex_lock(&D.nodes_lock);
	*nnodes = D.nnodes;
	*bytes = D.node_bytes + D.nbuckets * sizeof(*D.buckets);
	pthread_mutex_unlock(&D.nodes_lock);
	pthread_mutex_lock(&C.lock);
	*nfds = C.used + C.pinned;
	*bound = C.bound;
	pthread_mutex_unlock(&C.lock);
}

static void lru_unlink(int s)
{
	struct fd_slot *e = &C.slots[s];

	if (e->prev >= 0)
		C.slots[e->prev].next = e->next;
	else
		C.lru_head = e->next;
	if (e->next >= 0)
		C.slots[e->next].prev = e->prev;
	else
		C.lru_tail = e->prev;
	e->prev = e->next = -1;
}

static void lru_append(int s)
{
	struct fd_slot *e = &C.slots[s];

	e->next = -1;
	e->prev = C.lru_tail;
	if (C.lru_tail >= 0)
		C.slots[C.lru_tail].next = s;
	else
		C.lru_head = s;
	C.lru_tail = s;
}

static void map_set(int fd, int s)
{
	if (fd >= 0 && fd < C.nmap)
		C.slot_of_fd[fd] = s;
}

/* The slot no longer holds an fd (its node's fd_slot is cleared). */
static void slot_release(int s)
{
	struct fd_slot *e = &C.slots[s];

	map_set(e->fd, -1);
	e->node->fd_slot = -1;
	e->fd = -1;
	e->node = NULL;
	e->refs = 0;
	e->prev = -1;
	e->next = C.free_head;
	C.free_head = s;
	C.used--;
}

/* Slot s's fd to close (victims), the slot freed. */
static void slot_evict(int s, struct victims *v)
{
	if (!C.slots[s].refs)
		lru_unlink(s);
	v->fd[v->n++] = C.slots[s].fd;
	slot_release(s);
}

/* Close unused fds (least recently used first) down to the bound. */
static void evict_over_bound(int room, struct victims *v)
{
	while (C.used + room > C.bound && C.lru_head >= 0 && v->n < EVICT_BATCH)
		slot_evict(C.lru_head, v);
}

/* A slot for fd of n with refs references; -1 without memory. */
static int slot_insert(struct dnode *n, int fd, unsigned refs, struct victims *v)
{
	struct fd_slot *e;
	int s;

	evict_over_bound(1, v);
	if (fd >= C.nmap) {
		int nm = C.nmap ? C.nmap : 1024, *m;

		while (nm <= fd)
			nm *= 2;
		m = realloc(C.slot_of_fd, nm * sizeof(*m));
		if (!m)
			return -1;
		for (int i = C.nmap; i < nm; i++)
			m[i] = -1;
		C.slot_of_fd = m;
		C.nmap = nm;
	}
	if (C.free_head < 0) {
		int ns = C.nslots ? C.nslots * 2 : 64;
		struct fd_slot *sl = realloc(C.slots, ns * sizeof(*sl));

		if (!sl)
			return -1;
		for (int i = ns - 1; i >= C.nslots; i--) {
			sl[i] = (struct fd_slot){ .fd = -1, .prev = -1, .next = C.free_head };
			C.free_head = i;
		}
		C.slots = sl;
		C.nslots = ns;
	}
	s = C.free_head;
	e = &C.slots[s];
	C.free_head = e->next;
	e->fd = fd;
	e->node = n;
	e->refs = refs;
	e->prev = e->next = -1;
	if (!refs)
		lru_append(s);
	n->fd_slot = s;
	map_set(fd, s);
	C.used++;
	return s;
}

/* Keep fd as n's own for good. */
static void pin_locked(struct dnode *n, int fd)
{
	n->pinned_fd = fd;
	C.pinned++;
}

/* A put without a get, or a node freed while its fd is in use: said
 * once the lock is dropped (dlog may lock). */
static bool misuse;

static void say_misuse(void)
{
	if (__atomic_exchange_n(&misuse, false, __ATOMIC_RELAXED))
		dlog(LOG_ERR, "fd cache: an fd put by nobody's get, or freed while in use");
}

/* One user less of slot s; caller holds the lock. */
static void put_slot_locked(int s, struct victims *v)
{
	struct fd_slot *e = &C.slots[s];

	if (!e->refs) {
		__atomic_store_n(&misuse, true, __ATOMIC_RELAXED);
		return;
	}
	if (--e->refs)
		return;
	if (C.used > C.bound) {
		v->fd[v->n++] = e->fd;
		slot_release(s);
	} else {
		lru_append(s);
	}
}

int open_by_node_handle(unsigned char bytes, int type, const unsigned char *fh)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE_SZ];
	} h;

	h.fh.handle_bytes = bytes;
	h.fh.handle_type = type;
	memcpy(h.fh.f_handle, fh, bytes);
	return identity_open_by_handle(D.srcfd, &h.fh, O_PATH | O_CLOEXEC);
}

static int open_from_handle(struct dnode *n)
{
	return open_by_node_handle(n->fh_bytes, n->fh_type, n->fh);
}

/* The limit may have been lowered under us: follow it, and make room. */
static void follow_limit(void)
{
	struct victims v = { .n = 0 };
	int bound = bound_from_limit();

	pthread_mutex_lock(&C.lock);
	__atomic_store_n(&C.bound, bound, __ATOMIC_RELAXED);
	evict_over_bound(0, &v);
	pthread_mutex_unlock(&C.lock);
	victims_close(&v);
}

int node_fd_get(struct dnode *n)
{
	struct victims v = { .n = 0 };
	bool refresh;
	int fd, s;

	/* The snapshot's copy now: not to be reached through the node. */
	if (__atomic_load_n(&n->gone, __ATOMIC_ACQUIRE) == NODE_MOVED) {
		errno = ESTALE;
		return -ESTALE;
	}
	pthread_mutex_lock(&C.lock);
	if (n->pinned_fd >= 0) {
		fd = n->pinned_fd;
		pthread_mutex_unlock(&C.lock);
		return fd;
	}
	s = n->fd_slot;
	if (s >= 0) {
		if (C.slots[s].refs++ == 0)
			lru_unlink(s);
		fd = C.slots[s].fd;
		pthread_mutex_unlock(&C.lock);
		return fd;
	}
	refresh = __atomic_add_fetch(&C.misses, 1, __ATOMIC_RELAXED) % BOUND_REFRESH == 0;
	pthread_mutex_unlock(&C.lock);

	if (!n->fh_bytes) {
		/* Never: a node without a handle has a pinned fd. */
		errno = ESTALE;
		return -ESTALE;
	}
	if (refresh)
		follow_limit();
	fd = open_from_handle(n);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
		follow_limit();
		fd = open_from_handle(n);
	}
	if (fd < 0)
		return -errno;

	pthread_mutex_lock(&C.lock);
	if (__atomic_load_n(&n->gone, __ATOMIC_ACQUIRE) == NODE_MOVED) {
		/* Moved while it opened (fdcache_drop ran or runs after). */
		pthread_mutex_unlock(&C.lock);
		close(fd);
		errno = ESTALE;
		return -ESTALE;
	}
	if (n->pinned_fd >= 0 || n->fd_slot >= 0) {
		/* Another thread opened it meanwhile: use theirs. */
		v.fd[v.n++] = fd;
		if (n->pinned_fd >= 0) {
			fd = n->pinned_fd;
		} else {
			s = n->fd_slot;
			if (C.slots[s].refs++ == 0)
				lru_unlink(s);
			fd = C.slots[s].fd;
		}
	} else if (slot_insert(n, fd, 1, &v) < 0) {
		pin_locked(n, fd);	/* no memory for a slot */
	}
	pthread_mutex_unlock(&C.lock);
	victims_close(&v);
	return fd;
}

void node_fd_put(struct dnode *n)
{
	struct victims v = { .n = 0 };

	pthread_mutex_lock(&C.lock);
	if (n->fd_slot >= 0)
		put_slot_locked(n->fd_slot, &v);
	pthread_mutex_unlock(&C.lock);
	victims_close(&v);
	say_misuse();
}

void node_fd_put_fd(int fd)
{
	struct victims v = { .n = 0 };

	if (fd < 0)
		return;
	pthread_mutex_lock(&C.lock);
	if (fd < C.nmap && C.slot_of_fd[fd] >= 0)
		put_slot_locked(C.slot_of_fd[fd], &v);
	pthread_mutex_unlock(&C.lock);
	victims_close(&v);
	say_misuse();
}

bool fdcache_holds(struct dnode *n)
{
	bool holds;

	pthread_mutex_lock(&C.lock);
	holds = n->pinned_fd >= 0 || n->fd_slot >= 0;
	pthread_mutex_unlock(&C.lock);
	return holds;
}

int fdcache_bound(void)
{
	/* without the lock: every entry of a listing asks */
	return __atomic_load_n(&C.bound, __ATOMIC_RELAXED);
}

void fdcache_offer(struct dnode *n, int fd)
{
	struct victims v = { .n = 0 };

	/* Lookups fill the cache without a miss: follow the limit here too. */
	if (__atomic_add_fetch(&C.misses, 1, __ATOMIC_RELAXED) % BOUND_REFRESH == 0)
		follow_limit();
	pthread_mutex_lock(&C.lock);
	if (n->pinned_fd >= 0 || n->fd_slot >= 0)
		v.fd[v.n++] = fd;
	else if (!n->fh_bytes || slot_insert(n, fd, 0, &v) < 0)
		pin_locked(n, fd);
	pthread_mutex_unlock(&C.lock);
	victims_close(&v);
}

/* Caller holds the lock: n's cached fd becomes its pinned one.  Users of
 * the fd keep it: it only stops being the cache's. */
static void pin_slot_locked(struct dnode *n)
{
	int s = n->fd_slot, fd = C.slots[s].fd;

	if (!C.slots[s].refs)
		lru_unlink(s);
	slot_release(s);
	pin_locked(n, fd);
}

void fdcache_pin(struct dnode *n, bool may_open)
{
	int fd;

	pthread_mutex_lock(&C.lock);
	if (n->pinned_fd >= 0 || n->fd_slot >= 0) {
		if (n->pinned_fd < 0)
			pin_slot_locked(n);
		pthread_mutex_unlock(&C.lock);
		return;
	}
	pthread_mutex_unlock(&C.lock);
	if (!n->fh_bytes || !may_open)
		return;
	/* Still in memory if anyone holds it open; gone (ESTALE) otherwise,
	 * and then nobody can reach it through the node either. */
	fd = open_from_handle(n);
	if (fd < 0)
		return;
	pthread_mutex_lock(&C.lock);
	if (n->pinned_fd < 0 && n->fd_slot < 0) {
		pin_locked(n, fd);
		fd = -1;
	} else if (n->pinned_fd < 0) {
		pin_slot_locked(n);	/* a get raced with us */
	}
	pthread_mutex_unlock(&C.lock);
	if (fd >= 0)
		close(fd);
}

void fdcache_pin_fd(struct dnode *n, int fd)
{
	pthread_mutex_lock(&C.lock);
	if (n->pinned_fd < 0 && n->fd_slot < 0) {
		pin_locked(n, fd);
		fd = -1;
	} else if (n->pinned_fd < 0) {
		pin_slot_locked(n);
	}
	pthread_mutex_unlock(&C.lock);
	if (fd >= 0)
		close(fd);
}

void fdcache_forget(struct dnode *n)
{
	struct victims v = { .n = 0 };
	int s;

	pthread_mutex_lock(&C.lock);
	s = n->fd_slot;
	if (s >= 0) {
		if (C.slots[s].refs)
			__atomic_store_n(&misuse, true, __ATOMIC_RELAXED);
		slot_evict(s, &v);
	}
	if (n->pinned_fd >= 0) {
		v.fd[v.n++] = n->pinned_fd;
		n->pinned_fd = -1;
		C.pinned--;
	}
	pthread_mutex_unlock(&C.lock);
	victims_close(&v);
	say_misuse();
}

void fdcache_drop(struct dnode *n)
{
	struct victims v = { .n = 0 };
	int s;

	pthread_mutex_lock(&C.lock);
	s = n->fd_slot;
	if (s >= 0 && !C.slots[s].refs)
		slot_evict(s, &v);
	pthread_mutex_unlock(&C.lock);
	victims_close(&v);
}
