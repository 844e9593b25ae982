/*
 * Internals of the preservation engine shared by copyup.c, preserve.c and
 * hlmap.c.  Not part of the library's API.
 */
#ifndef OVSNAP_PRESERVE_INT_H
#define OVSNAP_PRESERVE_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

#include "libovsnap.h"
#include "preserve.h"

/* Locks by upper directory, per layer: parallel preserves rarely share one. */
#define OVS_UPPER_DIR_LOCKS 64
/* Upper directories one group of preserves defers the fsync of. */
#define OVS_GROUP_MAX 8

struct ovs_layer {
	int srcfd;		/* SRC's real root (not ours: never closed) */
	int upperfd;
	ino_t upper_ino;	/* upperfd's inode number: its lock's key */
	pid_t pid;		/* in temp names: the process that opened the layer */
	int workfd;
	unsigned flags;
	dev_t src_dev;		/* mount points inside SRC are not crossed */
	bool last_cloned;	/* __atomic: preserves run in parallel */
	/* Subtree clone: parent fsyncs become one syncfs.  Set only by
	 * ovs_preserve_subtree, which the daemon runs with no other
	 * preserve in parallel (a rename excludes every other change). */
	bool batch;
	/* XFS, and SRC's root on the same filesystem as the upper: every
	 * metadata change of both reaches the disk in the order it was made
	 * (one log, replayed as a prefix, forced up to a point by any fsync),
	 * so a copy made of clones and metadata only needs no fsync of its
	 * own before the fsync of the upper directory it is moved into, and
	 * a preserve that copied no bytes needs no fsync at all before a
	 * change to an object of that filesystem (ovs_log_orders, rule 8). */
	bool log_ordered;
	/* Where log_ordered: the upper's root opened by its handle on the
	 * mount srcfd is on (the daemon's clone of SRC's mount), so that a
	 * file can be renamed from SRC into the upper (ovs_move_to_upper;
	 * rename works within one mount); -1 where it cannot be. */
	int upper_on_src_mount;
	/* __atomic: the errno of the first failed sync of the upper, for
	 * good (ovs_layer_sync_error); told: someone asked to log it. */
	int sync_err;
	bool sync_err_told;
	unsigned long seq;	/* temp names in work (__atomic) */
	/* Preserves of different objects run in parallel (the daemon locks
	 * by object).  What they share in the upper is serialised here:
	 * an entry added to an upper directory (its times saved, the entry
	 * made, the times restored, the directory fsynced) under the lock
	 * its inode hashes to, and ovs_upper_parent opens a directory under
	 * its parent's lock, so it never finds one whose entry is not yet
	 * durable (or, where ovs_log_orders, not yet in the log ahead of
	 * whatever it does next) nor one whose times are not yet set (rules
	 * 7 and 8). */
	pthread_mutex_t dir_locks[OVS_UPPER_DIR_LOCKS];
	pthread_mutex_t whiteout_lock;	/* the shared whiteout inode */
};

/* Open the first depth names of path beneath SRC's root srcfd, one
 * component at a time, following no symlink and crossing no mount (a
 * racing rename can never lead the daemon outside SRC): the last one with
 * flags, those above it O_PATH.  depth 0 opens srcfd itself; with
 * path->srcdirfd, a depth of n - 1 or n starts from it instead of srcfd.
 * fd or -errno, no message; -EINVAL for a depth beyond path->n. */
int ovs_src_walk(int srcfd, const struct ovs_relpath *path, size_t depth, int flags);
int ovs_src_open(const struct ovs_layer *l, const struct ovs_relpath *path, size_t depth,
		 int flags);
/* SRC's directory that holds path's last name (O_PATH; path->srcdirfd
 * when the caller gave it), with a message on failure. */
int ovs_src_open_parent(const struct ovs_layer *l, const struct ovs_relpath *path);
/* The first depth names of path beneath the upper's root, as
 * ovs_src_open does beneath SRC's. */
int ovs_upper_open(const struct ovs_layer *l, const struct ovs_relpath *path, size_t depth,
		   int flags);
/* The last name of path; "" for the root (n == 0), which callers refuse
 * before asking. */
static inline const char *ovs_relpath_base(const struct ovs_relpath *path)
{
	return path->n ? path->names[path->n - 1] : "";
}

/* The upper directory that holds path's last name; with create,
 * directories missing in the upper are first made as metadata copies of
 * SRC's (rule 7 for each parent they are added to), walking down both
 * trees together. */
int ovs_upper_parent(struct ovs_layer *l, const struct ovs_relpath *path, bool create);
/* The same from rootfd, the upper's root as another mount shows it. */
int ovs_upper_parent_from(struct ovs_layer *l, int rootfd, const struct ovs_relpath *path,
			  bool create);

/* Build a copy of sdirfd/name in the work dir under a temp name (written
 * to tmp): content, owner, mode, xattrs (trusted.overlay.* escaped), the
 * origin xattr and times, fsynced unless NOSYNC.  known: the caller's
 * lstat of sdirfd/name, or NULL to make one.  *st gets the source's stat.  opaque marks a directory copy opaque before anyone can see it. */
int ovs_copy_to_work(struct ovs_layer *l, int sdirfd, const char *name, bool opaque,
		     const struct stat *known, struct stat *st, char *tmp);
/* Move a work temp into the upper as udirfd/name (no-op if something is
 * already there: the first preserve wins), restoring udirfd's times and
 * making the entry durable.  uino: udirfd's inode number, 0 if unknown. */
int ovs_install(struct ovs_layer *l, const char *tmp, const struct stat *st, int udirfd,
		ino_t uino, const char *name);
/* Lock the upper directory of inode number ino (see struct ovs_layer). */
pthread_mutex_t *ovs_upper_dir_lock_ino(struct ovs_layer *l, ino_t ino);
/* Remove a work temp that was not installed. */
void ovs_discard(struct ovs_layer *l, const char *tmp);
/* Hard-link fromdir/from as udirfd/name, restoring udirfd's times. */
int ovs_link_into(struct ovs_layer *l, int fromdirfd, const char *from, int udirfd,
		  const char *name);
/* The regular file sdirfd/name itself, with its only name, into the
 * upper as udirfd/name in place of a copy (ovs_move_to_upper): 0 with
 * *moved false when the object there is not the one known (dev and ino
 * of known) or a move would not keep it as it was (not a regular file
 * with one link on SRC's filesystem, trusted.overlay.* xattrs) or the
 * filesystem refuses the rename (EXDEV, EPERM) or the upper already has
 * the name; *moved true once it is out of SRC, also when an error
 * follows (restoring the upper directory's times).  uino: udirfd's inode
 * number, 0 if unknown. */
int ovs_move_into(struct ovs_layer *l, int sdirfd, const char *name, const struct stat *known,
		  int udirfd, ino_t uino, bool *moved);
/* Put a whiteout at udirfd/name (a link to the layer's shared one). */
int ovs_whiteout_at(struct ovs_layer *l, int udirfd, const char *name);
/* An entry was added to or changed in udirfd: restore its times (saved
 * before) and make its entries durable. */
/* may_defer: the entry added is no directory, so the fsync may wait for
 * the end of the calling thread's group (ovs_group_defer). */
int ovs_upper_dir_done(struct ovs_layer *l, int udirfd, const struct timespec times[2],
		       bool may_defer);
int ovs_upper_dir_times(int udirfd, struct timespec times[2]);
/* The data ranges of in (size bytes) into out, holes kept (lib/clone.c
 * too), with write-behind: at most a few MiB of out dirty at a time.
 * drop_cache: out is a copy no one reads soon, keep it out of the page
 * cache.  *writeback_err (may be NULL): the errno of a failed writeback
 * of out the copy stopped at (its fsync would not report it again). */
int ovs_copy_data_ranges(int in, int out, off_t size, bool drop_cache, int *writeback_err);
/* An entry point of the engine starts and ends: a first change, which a
 * bulk copy of this process gives way to (copyup.c).  They nest. */
void ovs_first_change_begin(void);
void ovs_first_change_end(void);

/* A sync of what a preserve wrote into l failed with err: l refuses every
 * later preserve (ovs_layer_sync_error).  Returns err, errno kept. */
int ovs_layer_sync_failed(struct ovs_layer *l, int err);
/* Before a preserve into l: 0, or -EIO with a message once a sync of l
 * failed. */
int ovs_layer_check(struct ovs_layer *l);
/* fsync(fd) of something in l's upper or work: 0, or -errno with a
 * message naming what, l refusing every later preserve. */
int ovs_layer_fsync(struct ovs_layer *l, int fd, const char *what, const char *path);

/* hlmap.c: the handle key of an object (for tests of sameness). */
/* In the calling thread's group of preserves into l: remember udirfd for
 * the group's end instead of fsyncing it now (0), or -1: not grouped, or
 * the list is full. */
int ovs_group_defer(struct ovs_layer *l, int udirfd);

/* Does the log order what the calling thread's preserve into l wrote
 * so far before the change it guards (no fsync needed)?  True only on a
 * log_ordered layer, inside an entry point, while the preserve wrote no
 * bytes outside the log and the object lies on the upper's filesystem. */
bool ovs_log_orders(const struct ovs_layer *l);
/* The preserve wrote data outside the log (copied bytes), or its object
 * lies on another filesystem: every fsync of rule 8 is needed again. */
void ovs_log_order_lost(const struct ovs_layer *l);

#endif
