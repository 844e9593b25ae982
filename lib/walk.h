/*
 * The one directory walker of the library (DESIGN.md rule 18): depth-first,
 * iterative, with an explicit heap-allocated stack of open directories, so
 * a walk runs in bounded stack for any depth the filesystem allows, and
 * the path of the current entry (relative to the walk's root, for the
 * caller's maps and messages) lives in one growing heap buffer, never in a
 * PATH_MAX buffer per level.  Every entry is reached from its parent's fd.
 */
#ifndef OVSNAP_WALK_H
#define OVSNAP_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* One level of a walk: an open directory and what the caller keeps with
 * it until the walker leaves it. */
struct ovs_walk_dir {
	int fd;			/* the directory, read by the walker */
	int aux;		/* the caller's second fd (e.g. a copy's), or -1;
				 * closed by the walker */
	struct timespec times[2];	/* the caller's (times to restore) */
	unsigned flags;		/* the caller's */
	const char *name;	/* its name in the parent ("" for the root) */
};

/* entry() asks to walk into the directory it opened into child->fd. */
#define OVS_WALK_DESCEND 1
/* entry() removed the entry from d (moved it out), or found it gone. */
#define OVS_WALK_REMOVED 2

struct ovs_walk_ops {
	/* For each entry name of d but "." and "..", path its path: 0 to go
	 * on, OVS_WALK_DESCEND after opening the entry (a directory, for
	 * reading) into child->fd (and child->aux, times, flags as the
	 * caller likes), OVS_WALK_REMOVED if the entry is no longer in d
	 * (entry() may remove the entry it is given, and nothing else of
	 * d), or -errno to stop the walk. */
	int (*entry)(void *arg, struct ovs_walk_dir *d, const char *name, const char *path,
		     struct ovs_walk_dir *child);
	/* d was read to its end (path: its path, parent NULL for the root):
	 * 0, or -errno to stop the walk.  May be NULL. */
	int (*leave)(void *arg, struct ovs_walk_dir *d, struct ovs_walk_dir *parent,
		     const char *path);
	/* A readdir error in d: return it (-errno) to stop, 0 to go on
	 * without the rest of d.  NULL: stop. */
	int (*read_error)(void *arg, struct ovs_walk_dir *d, const char *path, int err);
	/* Each directory's entries in strcmp() order (read in full when the
	 * walk enters it, so memory grows with the largest directory), for
	 * a reproducible order.  Unsorted walks read in readdir() order and
	 * hold one readdir buffer per open level, whatever the directory's
	 * size.  A directory entry() removed entries from is counted again
	 * when read to its end: if more entries are left than entry() kept
	 * (readdir() skipped one, which POSIX does not allow but a
	 * filesystem might), it is read again from its start, so entry()
	 * must be idempotent (an entry seen again: OVS_WALK_REMOVED if
	 * gone). */
	bool sorted;
};

/*
 * Walk the directory root (an fd opened for reading, taken over by the
 * walk; root->aux too), whose path is path ("" for the top).  Returns 0,
 * or the first -errno a callback returned (the walk stops there: the
 * directories still open are closed without leave()).  A failure of the
 * walker itself (memory, fdopendir) is -errno with the error set.
 */
int ovs_walk(struct ovs_walk_dir *root, const char *path, const struct ovs_walk_ops *ops,
	     void *arg);

/*
 * openat2(dirfd, path, flags, resolve) for a path of any length: a path of
 * PATH_MAX bytes or more is opened in pieces shorter than PATH_MAX, each
 * beneath the directory the piece before it opened, with the same resolve
 * flags (RESOLVE_BENEATH: never outside dirfd).  "" opens dirfd itself.
 * Returns the fd or -errno.
 */
int ovs_open_beneath(int dirfd, const char *path, int flags, unsigned long long resolve);

#endif
