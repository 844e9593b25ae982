/*
 * ovsnapd, the snapshot-mount daemon: a FUSE file system mounted over SRC
 * that preserves what is about to change into the newest snapshot's upper
 * layer before letting the change reach the real directory.
 *
 *   ovsnapd.c       setup: volume, the real SRC, layer, mount, ready fd
 *   daemon-nodes.c  the inode table (node <-> real object, live path) and
 *                   acting with the caller's identity
 *   daemon-ops.c    the FUSE operations with the preservation rules
 *   daemon-loop.c   worker threads, the take barrier, the control socket
 */
#ifndef OVSNAP_DAEMON_H
#define OVSNAP_DAEMON_H

#define FUSE_USE_VERSION OVS_FUSE_USE_VERSION
#include <fuse_lowlevel.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "libovsnap.h"
#include "preserve.h"

/*
 * One real object the kernel knows (keyed by st_dev/st_ino, like
 * libfuse's passthrough_hp).  It is identified by its file handle
 * (name_to_handle_at), which includes the generation: an inode number
 * reused for a new object gives another handle, so a lookup that finds
 * the number with another handle drops the old node (daemon-nodes.c).
 * Its O_PATH fd lives in a bounded cache (node_fd_get/node_fd_put), or
 * stays pinned for the node's life: the root, an object removed from the
 * tree, an object without a usable handle (and every object on a
 * filesystem without handles).  parent/name is one current name of the
 * object (the engine wants its chain of names); a node whose last known
 * name was removed has name NULL and needs no preservation any more: it
 * is no longer part of the tree.
 */
struct dnode {
	dev_t dev;
	ino_t ino;
	int pinned_fd;		/* O_PATH | O_NOFOLLOW, never evicted; or -1 */
	int fd_slot;		/* its slot in the fd cache, or -1 (cache lock) */
	uint64_t nlookup;	/* kernel references */
	unsigned children;	/* nodes whose parent this is */
	unsigned nopen;		/* open handles (files and directories) */
	unsigned nwriters;	/* handles open for writing */
	uint16_t type;		/* S_IFMT bits (16 bits: the node stays 88 bytes) */
	/* A change of the name failed (no memory): parent/name are out of
	 * date, and so are the chains of everything below; a preserve
	 * through them fails with EIO until a later change names it again. */
	bool name_lost;
	/* The object is leaving SRC for a layer, itself its preserved copy
	 * (NODE_MOVING: an unlink claimed it, node_move_claim), or has left
	 * (NODE_MOVED): no handle opens, no change starts, and once moved no
	 * fd is handed out, so nothing reaches the snapshot's copy (__atomic) */
	unsigned char gone;
	unsigned char fh_bytes;	/* 0: no handle (the fd is pinned) */
	/* D.known_seq when a listing last found it by its handle, without
	 * an fd (node_get_known), 0: never (nodes lock) */
	uint16_t known_at;
	int fh_type;
	struct dnode *parent;
	char *name;
	/* What is covered (preserved) in the layer of an epoch, so that a
	 * later change in the same epoch needs nothing: epoch << 1 when the
	 * object was last found covered in it; | 1 when, a folder, every
	 * name in it was too (an ancestor, or the folder's own name, is a
	 * whiteout, a non-directory or opaque there: new since the take),
	 * so that a create in it preserves nothing.  Renames keep that
	 * true: a folder's new name is covered before it moves.  Only grows
	 * (node_covered_set, __atomic) */
	uint64_t covered;
	struct dnode *hnext;	/* hash chain */
	unsigned char fh[];	/* the file handle's bytes */
};

/* The parts of a covered word (struct dnode's covered). */
static inline uint64_t covered_word(uint64_t epoch, bool names)
{
	return epoch << 1 | names;
}

static inline uint64_t covered_epoch(uint64_t c)
{
	return c >> 1;
}

static inline bool covered_names(uint64_t c)
{
	return c & 1;
}

/* An open file or directory. */
struct dhandle {
	int fd;
	struct dnode *node;
	bool writable;
	/* Who opened it: page writeback through it acts as them. */
	uid_t uid;
	gid_t gid;
	/* directories */
	void *dir;		/* DIR * */
	off_t dir_offset;
	struct dirent *dir_entry;	/* read ahead, not yet returned */
};

/* A phase-fair reader-writer lock (daemon-nslock.c): a waiting exclusive
 * holder gets in once the shared holders it found are done, and the
 * shared holders that waited for it get in before the next one. */
struct ns_lock {
	pthread_mutex_t mutex;
	pthread_cond_t shared_cond, exclusive_cond;
	unsigned shared;		/* holding it shared */
	bool exclusive;			/* holding it exclusive */
	unsigned shared_waiting, exclusive_waiting;
	unsigned shared_admitted;	/* waited through the last exclusive turn */
	uint64_t exclusive_turns;	/* exclusive holds ended */
};

#define NS_LOCK_INITIALIZER { .mutex = PTHREAD_MUTEX_INITIALIZER, \
	.shared_cond = PTHREAD_COND_INITIALIZER, .exclusive_cond = PTHREAD_COND_INITIALIZER }

/* urgent: page-cache writeback, which waits for no waiting exclusive
 * holder (a take waits for it).  No thread takes the lock twice. */
void ns_lock_shared(struct ns_lock *l, bool urgent);
void ns_lock_exclusive(struct ns_lock *l);
void ns_unlock(struct ns_lock *l);
/* For the status reply: how many wait, each way. */
void ns_lock_waiting(struct ns_lock *l, unsigned *exclusive, unsigned *shared);

struct daemon {
	/* set up once */
	char *src;			/* absolute path of SRC */
	struct ovs_volume *vol;
	int srcfd;			/* SRC's real root directory (O_RDONLY) */
	dev_t src_dev;
	dev_t fuse_dev;		/* st_dev of the snapshot mount (detached or not) */
	struct fuse_session *se;
	bool debug;
	bool foreground;
	int ctl_fd;			/* listening control socket */

	/* the layer; changed only by a take under preserve_lock (write) */
	pthread_rwlock_t preserve_lock;	/* read: a change in progress */
	/* first changes and namespace changes (rule 9, daemon-ops.c) */
	struct ns_lock ns_lock;		/* shared: a change of marked objects;
					 * exclusive: directories move */
	pthread_mutex_t busy_lock;
	pthread_cond_t busy_cond;	/* a busy mark was removed */
	struct busy_mark *busy;		/* objects changes hold busy */
	struct ovs_layer *layer;	/* NULL: no snapshot, nothing to preserve */
	uint64_t layer_id;
	uint64_t epoch;
	struct ovs_hlmap *hlmap;

	/* the inode table */
	pthread_mutex_t nodes_lock;
	pthread_cond_t moving_cond;	/* a node left NODE_MOVING (nodes_lock) */
	bool handles;			/* SRC's filesystem has usable file handles */
	struct dnode **buckets;
	size_t nbuckets, nnodes;
	size_t node_bytes;		/* malloc'ed for nodes and names, chunk headers included */
	uint16_t known_seq;		/* objects found by handle so far, mod 2^16, never 0 */
	struct dnode *root;
	unsigned long open_handles;
	uint64_t ns_seq;		/* bumped by every name change */
	unsigned relocks;		/* atomic: name changes that met another object than they marked */

	/* the barrier and the worker pool (daemon-loop.c) */
	pthread_mutex_t loop_lock;
	pthread_cond_t loop_cond;	/* barrier down, workers gone, stop */
	pthread_cond_t barrier_cond;	/* inflight reached 0 under a barrier */
	bool barrier;			/* atomic; written under loop_lock */
	unsigned inflight;		/* atomic: modifying requests being processed */
	struct deferred *deferred_head, *deferred_tail;
	unsigned ndeferred;
	unsigned nworkers, nreplayers;	/* under loop_lock */
	unsigned nidle;			/* atomic */
	bool stopping;
	int exit_status;
};

extern struct daemon D;

/* ---- logging ----------------------------------------------------------- */
void dlog(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define dbg(...) do { if (D.debug) dlog(LOG_DEBUG, __VA_ARGS__); } while (0)

/* ovsnapd.c: log that the open file limit caps the cached inodes, if so */
void nofile_warn_if_low(void);

/* ---- daemon-nodes.c ---------------------------------------------------- */
int nodes_init(int rootfd);
struct dnode *node_of(fuse_ino_t ino);
fuse_ino_t node_ino(struct dnode *n);
/* Find or add the node for the object fd (an O_PATH fd, consumed) named
 * parent/name; adds one kernel reference.  seq is nodes_seq() from before
 * the object was opened.  NULL with errno (EAGAIN: look up again). */
struct dnode *node_get(int fd, const struct stat *st, struct dnode *parent,
		       const char *name, uint64_t seq);
/* What a listing saw of a known node before it stat'ed the name: its
 * handle (node_knows_ino). */
struct node_known {
	unsigned char bytes;	/* 0: the node has none (its fd is pinned) */
	int type;
	unsigned char fh[128];	/* MAX_HANDLE_SZ */
};
/*
 * Without opening anything: the node of the object st describes (stat'ed
 * by parent/name in pfd before the call, after node_knows_ino() filled
 * *k) if it is the node k saw, holding an fd of it or finding the name's
 * handle its own, with one more kernel reference; NULL otherwise, with
 * errno 0 (open the name) or an errno (EAGAIN: look up again).
 */
struct dnode *node_get_known(const struct stat *st, struct dnode *parent, const char *name,
			     uint64_t seq, int pfd, const struct node_known *k);
/* Whether the daemon knows the object numbered ino (not when it found it
 * by handle again soon: opened then, it is cached): then *k says what it
 * knows of it. */
bool node_knows_ino(ino_t ino, struct node_known *k);
uint64_t nodes_seq(void);
void node_forget(struct dnode *n, uint64_t nlookup);
/* node_forget(n, 1) of a listing's entry that did not fit in its reply
 * after all: the next one finds it again, not a second time (known_at). */
void node_unlist(struct dnode *n);
/*
 * The node's O_PATH fd, referenced until node_fd_put(n): the fd cache
 * never evicts a referenced fd.  A miss reopens it from the node's file
 * handle.  Negative errno (and errno) on failure, ESTALE for an object
 * that is gone.  The cache's lock is innermost: any lock may be held.
 */
int node_fd_get(struct dnode *n);
void node_fd_put(struct dnode *n);
/* For status: nodes, the bytes they take (names and the hash table
 * included), fds held by the cache (pinned included), the cache's bound. */
void nodes_counts(size_t *nnodes, size_t *bytes, int *nfds, int *bound);
/* The node of an object already known, by identity, or NULL. */
/* The FUSE node id of the object dev/ino if the kernel knows it, else 0. */
fuse_ino_t node_find_ino(dev_t dev, ino_t ino);
/*
 * The chain of names of n (name NULL) or of the entry name of directory
 * n, from SRC's root (n == 0 for the root), with srcdirfd the fd of the
 * directory that holds the last name, lent referenced (node_fd_get) until
 * node_relpath_free().  The names are the nodes' own (and name), freed
 * when a node's name changes, so valid only while the caller holds
 * ns_lock and the busy mark of n (daemon-ops.c): a directory's name
 * changes under ns_lock for writing (a rename of a directory) or under
 * its own mark (rmdir, which no node may hang from, node_has_children);
 * any other node's under ns_lock for reading with its own mark (unlink,
 * rename).  The directories above n cannot be removed while n hangs from
 * them.  -ENOENT when the object has no known name any more, -EIO when a
 * name on the way is out of date (name_lost), -ENOMEM.  Free with
 * node_relpath_free().
 */
int node_relpath(struct dnode *n, const char *name, struct ovs_relpath *rp);
/* The folder that holds a node's name, as node_relpath_dir read it with
 * the node's chain: its covered word (struct dnode's) and its identity;
 * nothing known for the root. */
struct node_dir {
	uint64_t covered;
	dev_t dev;
	ino_t ino;
	bool known;
};
/* node_relpath(n, NULL, rp), and in *dir the folder that holds n's name. */
int node_relpath_dir(struct dnode *n, struct ovs_relpath *rp, struct node_dir *dir);
/* Node n's object, and with names every name in it (a folder), found
 * covered in the layer of epoch (struct dnode's covered; only grows). */
void node_covered_set(struct dnode *n, uint64_t epoch, bool names);
/* Every name in the folder dir covered in the layer of epoch, remembered
 * in the node of the folder that holds n's name if that is still dir: a
 * busy n keeps its name, but nodes_lock was let go in between, and only
 * the folder the walk went through may be marked. */
void node_dir_covered_set(struct dnode *n, const struct node_dir *dir, uint64_t epoch);
void node_relpath_free(struct ovs_relpath *rp);
/* n's chain of names for a message, bounded by len (any caller: copied
 * under nodes_lock). */
const char *node_describe(struct dnode *n, char *buf, size_t len);
/* Name bookkeeping after a change to SRC succeeded (caller holds
 * ns_lock for writing, or for reading with the busy marks of every node
 * whose name changes: see node_relpath).  Nodes are found by identity: a
 * lookup racing the change may have added one meanwhile. */
void node_update_moved(dev_t dev, ino_t ino, struct dnode *oldp, const char *oldn,
		       struct dnode *newp, const char *newn);
/*
 * Once parent/name, the last name under SRC of the object dev/ino, went
 * (an unlink, rmdir, or rename over it): an O_PATH fd of the object opened
 * by its node's handle, for node_update_removed() to keep, or -1: no node
 * of that name, a node with an fd already, or the object is gone.  *k:
 * the node's handle, for node_update_removed() to know the node again
 * (k->bytes 0: no open tried).
 */
int node_removed_fd(dev_t dev, ino_t ino, const struct dnode *parent, const char *name,
		    struct node_known *k);
/* other: another name of a hard-linked file, or NULL when the object
 * left the tree.  keep, k: from node_removed_fd() (keep consumed). */
void node_update_removed(dev_t dev, ino_t ino, struct dnode *parent, const char *name,
			 const struct ovs_relpath *other, int keep, const struct node_known *k);
/* Whether a node hangs from the node of dev/ino (an rmdir under ns_lock
 * for reading must not free a name on such a node's chain). */
bool node_has_children(dev_t dev, ino_t ino);
void node_update_exchanged(const struct stat *a, struct dnode *pa, const char *na,
			   const struct stat *b, struct dnode *pb, const char *nb);
void node_open_count(struct dnode *n, bool writable, int delta);
/* One more open handle of n, counted before it is opened: false (none
 * counted) when n's object left SRC (node_move_claim); while it is
 * leaving, it waits for the move's end. */
bool node_open_begin(struct dnode *n, bool writable);
/* Whether the node of dev/ino has an open handle now. */
bool node_has_handles(dev_t dev, ino_t ino);

enum { NODE_PRESENT, NODE_MOVING, NODE_MOVED };
/*
 * Before an unlink moves the object dev/ino, its only name parent/name,
 * into the upper (ovs_move_to_upper): true when its node is known, and
 * nothing but that node reaches the object (no open handle: a mapping
 * keeps one), and it is now NODE_MOVING; node_move_end()
 * then ends the claim, moved or not.  Caller holds the marks of the
 * object and its directory.
 */
bool node_move_claim(dev_t dev, ino_t ino, const struct dnode *parent, const char *name);
void node_move_end(dev_t dev, ino_t ino, struct dnode *parent, const char *name, bool moved);
/* Inode numbers of nodes with a writable handle (malloc'ed). */
size_t nodes_with_writers(fuse_ino_t **out);

/* open_by_handle_at as the daemon (CAP_DAC_READ_SEARCH), whoever this
 * thread acts for at the moment. */
int identity_open_by_handle(int mount_fd, struct file_handle *fh, int flags);
/* An O_PATH fd of the object of a node's handle (bytes, type, fh) in
 * SRC, opened so (daemon-fdcache.c). */
int open_by_node_handle(unsigned char bytes, int type, const unsigned char *fh);

/* The caller's identity for a change to SRC (per thread: setfsuid,
 * setfsgid, setgroups by raw syscall, umask after unshare(CLONE_FS), and
 * for a caller other than uid 0 no effective capability: rule 19). */
int identity_become(fuse_req_t req, bool with_umask);
/* The same, but a caller other than uid 0 keeps the capabilities of keep
 * (1 << CAP_*) that the daemon holds: for what the kernel has checked or
 * does on its own authority. */
int identity_become_keeping(fuse_req_t req, uint64_t keep);
/* The same for a change of file data: as the caller, or for page
 * writeback (which carries no caller) as the opener of the handle, without
 * supplementary groups; CAP_FSETID kept (see daemon-nodes.c). */
int identity_become_writer(fuse_req_t req, uid_t opener_uid, gid_t opener_gid,
			   bool writeback);
void identity_restore(void);
/* Per-thread setup every thread that runs operations needs. */
int identity_thread_init(void);

/* ---- daemon-fdcache.c (used by daemon-nodes.c) ------------------------- */
void fdcache_init(void);
/* fd (an O_PATH fd of n's object, consumed) as n's cached fd, or its
 * pinned one when n has no handle; closed when n has an fd already. */
void fdcache_offer(struct dnode *n, int fd);
/* n's object left the tree: keep its fd for good (with may_open, opened
 * from the handle if it is not cached and the object is still in memory). */
void fdcache_pin(struct dnode *n, bool may_open);
/* The same with fd, an O_PATH fd of n's object (node_removed_fd()),
 * consumed: closed when n has an fd already. */
void fdcache_pin_fd(struct dnode *n, int fd);
/* n is being freed: close its fd. */
void fdcache_forget(struct dnode *n);
/* n's object moved into a layer (NODE_MOVED): close its cached fd unless
 * in use (node_fd_get hands it out no more). */
void fdcache_drop(struct dnode *n);
/* Whether an fd of n is open now, cached or pinned. */
bool fdcache_holds(struct dnode *n);
/* The cache's bound now. */
int fdcache_bound(void);
/* node_fd_put() by the fd number node_fd_get() returned (pinned: no-op). */
void node_fd_put_fd(int fd);

/* ---- daemon-ops.c ------------------------------------------------------ */
extern const struct fuse_lowlevel_ops daemon_ops;

/* A change for a control request: preserve the object at path, then
 * change(arg) under the daemon's change locking (0 or a positive errno). */
int change_object_by_request(const struct ovs_relpath *path, int (*change)(void *arg),
			     void *arg);

/* ---- daemon-restore.c -------------------------------------------------- */
/* The restore requests of the control socket ("clone-into REL" with a
 * passed fd, "writers"): true when req was one of them (answered). */
bool restore_request(int conn, const char *req, int passed);

/* ---- daemon-loop.c ----------------------------------------------------- */
/* Run the workers and the control thread until the session ends; returns
 * the exit status. */
int daemon_loop(void);
/* Rule 13: a modifying request leaves the count a take waits for while it
 * preserves, and comes back (waiting while a barrier is up) before it
 * changes SRC.  No-ops when already out / in. */
void request_uncount(void);
void request_count(void);
/* A reference to D.layer (caller holds preserve_lock), NULL when there is
 * no snapshot; the layer stays open until put even if a take retires it. */
struct ovs_layer *layer_get(void);
void layer_put(struct ovs_layer *layer);
/* Wait until no preserve runs into a retired layer other than mine. */
void layers_wait_retired(const struct ovs_layer *mine);
/* Test hooks of a preserve held as long as a test wants: wants() tells
 * whether preserving path makes the request one to hold under
 * OVSNAPD_TEST_PRESERVE_GATE_IN; gate() holds it (every request that went
 * through the preserve phase without _IN, only those with in_dir with
 * it). */
bool test_preserve_gate_wants(const struct ovs_relpath *path);
bool test_no_move(void);
void test_preserve_gate(bool in_dir);
/* A write being served: the kernel keeps the pages it covers locked until
 * it is answered, so a take must not wait on them (flush_dirty_pages). */
struct write_in_flight {
	fuse_ino_t ino;
	off_t off;
	size_t len;
	struct write_in_flight *next, **pprev;
};
void write_in_flight_begin(struct write_in_flight *w, fuse_ino_t ino, off_t off, size_t len);
void write_in_flight_end(struct write_in_flight *w);

#endif
