/*
 * The preservation engine (DESIGN.md section 2).  Used by the
 * snapshot-mount daemon before every change to SRC.  The overlay layer
 * format it writes (shared with merge and fsck) is in layer-format.h.
 *
 * An object is named by its chain of names from SRC's root (struct
 * ovs_relpath), never by a path string: the engine walks the chain one
 * component at a time with openat and no symlink followed, from SRC's fd
 * and from the upper's fd (making the upper's missing parents as it
 * goes), so no path of any length is ever built in one buffer or handed
 * to the kernel whole (DESIGN.md rule 18).  Copy-up (copyup.c) is the
 * mechanism under this policy: one object from (SRC directory, name) into
 * (upper directory, name).
 *
 * All calls return 0 (or the documented positive value) or -errno with a
 * message in ovs_last_error().  Calls are not thread-safe per layer: the
 * daemon serialises preserve+change pairs (rule 9).
 */
#ifndef OVSNAP_PRESERVE_H
#define OVSNAP_PRESERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "layer-format.h"

/* ---- names ------------------------------------------------------------- */

/*
 * An object below SRC (or below a layer's root, which mirrors SRC) as its
 * chain of names, top first: names[0] is an entry of the root, names[n-1]
 * the object's own name; n == 0 is the root itself.  No name is empty,
 * ".", ".." or holds a '/'.  The caller owns the names and keeps them
 * unchanged during the call (the daemon lends its nodes' names under its
 * lock).  srcdirfd is SRC's directory that holds names[n-1] when the
 * caller has it open (any fd usable as a dirfd, O_PATH too), or -1: the
 * engine then walks from SRC's root.
 */
struct ovs_relpath {
	const char *const *names;
	size_t n;
	int srcdirfd;
	/* The caller's lstat of the last name in srcdirfd, made under the
	 * lock the preserve runs under, or NULL: it saves the preserve its
	 * own. */
	const struct stat *st;
};

/* Split a '/'-separated string (tests, the views' and fsck's path strings,
 * the walker's path) into a chain: *mem holds the names and the vector,
 * freed with free().  "" is the root.  -EINVAL for an empty, "." or ".."
 * component. */
int ovs_relpath_split(const char *path, struct ovs_relpath *rp, void **mem);
/* The names joined by '/' (malloc'ed, NULL without memory): for tests and
 * messages, never to open anything. */
char *ovs_relpath_join(const struct ovs_relpath *rp);
/* A human-readable form for messages, bounded by len (the last names are
 * kept, "..." stands for the rest): never used to open anything. */
const char *ovs_relpath_describe(const struct ovs_relpath *rp, char *buf, size_t len);
#define OVS_RELPATH_DESCRIBE_MAX 512

/* ---- a layer being written ----------------------------------------------- */

struct ovs_layer;

enum ovs_layer_flags {
	OVS_LAYER_NOSYNC = 1 << 0,	/* skip fsyncs (tests of logic only) */
};

/*
 * Open the upper and work directories of the newest snapshot.  srcfd is
 * SRC's real root (a directory fd opened before the shim covered it); it
 * must stay open as long as the layer.
 */
int ovs_layer_open(const char *upper, const char *work, int srcfd, unsigned flags,
		   struct ovs_layer **out);
/* The same with the two directories already open (from the store's fd,
 * DESIGN.md rule 20); the layer takes both fds over, also on failure. */
int ovs_layer_open_fds(int upperfd, int workfd, int srcfd, unsigned flags,
		       struct ovs_layer **out);
void ovs_layer_close(struct ovs_layer *l);
int ovs_layer_upper_fd(const struct ovs_layer *l);
/* Whether FICLONE worked for the last copy-up (for tests and stats). */
bool ovs_layer_cloned(const struct ovs_layer *l);
/*
 * Rule 8 after a write error: once an fsync (or syncfs, or a copy's
 * write-behind) of what a preserve wrote into the layer failed, the kernel
 * has reported that error and will not again, so nothing the layer holds
 * is known durable: every later preserve into it fails with EIO, and SRC
 * must not change, until the next take opens a new layer.  0, or the
 * errno of the first failure; *first (may be NULL) is true for exactly one
 * caller, the one to log it.
 */
int ovs_layer_sync_error(struct ovs_layer *l, bool *first);
/* Give the directory upperfd (a new layer's root) the metadata of SRC's
 * root srcrootfd: owner, mode, xattrs, origin, times (rule 7).  The caller
 * fsyncs. */
int ovs_copy_root_metadata(int srcrootfd, int upperfd);

/* ---- the map of multiply-linked inodes (rule 6) ------------------------ */

struct ovs_hlmap;

/* Scan SRC once and record every non-directory with st_nlink > 1, keyed by
 * file handle, with all its names under SRC.  Names whose count is lower
 * than st_nlink have links outside SRC: *outside gets their number. */
int ovs_hlmap_build(int srcfd, struct ovs_hlmap **out, size_t *outside);
void ovs_hlmap_free(struct ovs_hlmap *m);
/* Keep it current: after link(), unlink() and rename() succeeded in SRC.
 * ovs_hlmap_link is given the object's names after the link exists.  Any
 * failure of these (no memory part-way, a handle that cannot be read)
 * marks the map invalid for good, even if the caller ignores the error:
 * names it holds may be lost or misplaced, so from then on
 * ovs_hlmap_names fails with -EIO for every linked file (rule 6 cannot be
 * kept silently wrong) until the map is built again. */
int ovs_hlmap_link(struct ovs_hlmap *m, int srcfd, const struct ovs_relpath *existing,
		   const struct ovs_relpath *newpath);
int ovs_hlmap_unlink(struct ovs_hlmap *m, const struct ovs_relpath *path,
		     const struct stat *st_before);
int ovs_hlmap_rename(struct ovs_hlmap *m, const struct ovs_relpath *from,
		     const struct ovs_relpath *to);
/* RENAME_EXCHANGE of a and b. */
int ovs_hlmap_exchange(struct ovs_hlmap *m, const struct ovs_relpath *a,
		       const struct ovs_relpath *b);
/* The names of the object at path (a copy of path first); n == 1 if not
 * linked.  Each chain is the caller's (srcdirfd -1 but for the first).
 * -EIO for a linked file (non-directory, st_nlink > 1) once the map is
 * invalid (above). */
int ovs_hlmap_names(struct ovs_hlmap *m, int srcfd, const struct ovs_relpath *path,
		    struct ovs_relpath **names, size_t *n);
/* The same, at most max of them (max >= 1): path and max - 1 others.
 * Costs what it returns, not the inode's links: a change that needs one
 * other name of a file with 60,000 copies no more than one. */
int ovs_hlmap_names_max(struct ovs_hlmap *m, int srcfd, const struct ovs_relpath *path,
			size_t max, struct ovs_relpath **names, size_t *n);
void ovs_hlmap_names_free(struct ovs_relpath *names, size_t n);

/* ---- the rules ------------------------------------------------------------ */

/*
 * 1 if path is covered in the layer (an entry at path, or an ancestor that
 * is a whiteout, a non-directory or an opaque directory), 0 if not.
 */
int ovs_covered(struct ovs_layer *l, const struct ovs_relpath *path);
/* The same for any layer's upper directory, no ovs_layer needed, with a
 * '/'-separated path (views), still walked one component at a time. */
int ovs_covered_at(int upperfd, const char *path);

/* How path is covered in the upper directory upperfd (read-only). */
enum ovs_coverage {
	OVS_NOT_COVERED,
	OVS_COVERED_BY_ANCESTOR,	/* whiteout, non-dir or opaque dir above */
	OVS_ENTRY_NONDIR,		/* the upper has a non-directory at path */
	OVS_ENTRY_DIR,			/* ... a plain (merging) directory */
	OVS_ENTRY_OPAQUE_DIR,		/* ... an opaque directory */
};
int ovs_coverage_rel(int upperfd, const struct ovs_relpath *path);
/* The same with a '/'-separated path (fsck). */
int ovs_coverage_at(int upperfd, const char *path);

/* Rule 1: before data or metadata of the existing object at path changes
 * (also before it is unlinked, renamed, or linked from).  Copies it up with
 * all its metadata (directories as metadata only), every hard-linked name
 * of it, parents as needed with their times restored (rule 7), durably
 * (rule 8).  No-op if covered. */
int ovs_preserve_object(struct ovs_layer *l, struct ovs_hlmap *m,
			const struct ovs_relpath *path);
/* The same, and in *cov OVS_COV_SIBLINGS when the layer covers every name
 * in path's parent folder (ovs_preserve_name_cov), else 0, for a caller
 * that remembers it until the layer changes. */
int ovs_preserve_object_cov(struct ovs_layer *l, struct ovs_hlmap *m,
			    const struct ovs_relpath *path, unsigned *cov);
/* The upper directory an unlink's file moves into, as the preserve's walk
 * found it on SRC's mount (ovs_preserve_unlink, ovs_move_to_upper): the
 * layer's that found it, used by no other layer's move.  Initialised with
 * OVS_UPPER_DIR_INIT; ovs_upper_dir_release drops it where no move
 * follows (and may be called on an empty one). */
struct ovs_upper_dir {
	const struct ovs_layer *layer;
	int fd;			/* -1: none */
	ino_t ino;
	bool owned;		/* fd is to close (not the layer's own) */
};
#define OVS_UPPER_DIR_INIT { .fd = -1 }
void ovs_upper_dir_release(struct ovs_upper_dir *ud);
/* Rule 1 before the unlink of path, in two steps.  ovs_preserve_unlink:
 * as ovs_preserve_object, except that for the only name of a regular
 * file it may answer 1 instead of copying, when may_move (nothing but the
 * caller's unlink still reaches the file: no open file, no mapping) and
 * the layer's log orders a rename of it into the upper with the unlink
 * (XFS, upper on SRC's filesystem: rule 8); 0 once preserved or covered.
 * After 1, ovs_move_to_upper at the unlink itself (with the same layer,
 * the object's stat and its change locks still held): the file leaves
 * SRC for the upper, *moved true, and the unlink is done; with *moved
 * false and 0, nothing changed and the caller preserves it by
 * ovs_preserve_object before unlinking; *moved true with an error: SRC
 * changed, and the error is the preserve's.  With 1, *to may also hold
 * the upper directory the move goes to (any it held before is released
 * first), which ovs_move_to_upper takes (or it finds the directory again:
 * to NULL or empty); with any other answer *to is empty.  *cov as
 * ovs_preserve_object_cov's. */
int ovs_preserve_unlink(struct ovs_layer *l, struct ovs_hlmap *m,
			const struct ovs_relpath *path, bool may_move,
			struct ovs_upper_dir *to, unsigned *cov);
int ovs_move_to_upper(struct ovs_layer *l, const struct ovs_relpath *path,
		      const struct stat *st, struct ovs_upper_dir *to, bool *moved);
/* Rule 2: before a name is created at path: a whiteout if nothing was
 * there at snapshot time; if SRC has an object at path, it is preserved
 * as by ovs_preserve_object.  No-op if covered. */
int ovs_preserve_name(struct ovs_layer *l, struct ovs_hlmap *m,
		      const struct ovs_relpath *path);
/* The same, and what the layer now covers around path, for a caller that
 * remembers it until the layer changes (ovsnapd, per folder and epoch):
 * OVS_COV_SIBLINGS, every name in path's parent folder (an ancestor of
 * path is a whiteout, a non-directory or an opaque directory);
 * OVS_COV_BELOW, every name below path (the upper has a whiteout, a
 * non-directory or an opaque directory at path, or SIBLINGS).  An upper
 * layer only grows, so both stay true in it; 0 after an error.  (The one
 * entry that leaves it again is a file that ovs_move_to_upper moved in
 * and takes back when it cannot mark its origin: a file, under its
 * folder's mark, so it covers no other name.) */
enum { OVS_COV_SIBLINGS = 1, OVS_COV_BELOW = 2 };
int ovs_preserve_name_cov(struct ovs_layer *l, struct ovs_hlmap *m,
			  const struct ovs_relpath *path, unsigned *cov);
/* Rule 8 for several preserves guarding one change (both names of a
 * rename): between begin and end, the calling thread's preserves into l
 * fsync each upper directory they added entries to once, at the end,
 * instead of after every entry.  end is due before the change reaches
 * SRC, also after a failed preserve (it closes what it kept); it answers
 * the first fsync error.  The group is the calling thread's; entries
 * that are directories are still fsynced at once, so a parallel preserve
 * never builds below a directory whose entry is not yet durable.  For
 * changes whose objects and names no other preserve may touch meanwhile
 * (the daemon holds their busy marks). */
void ovs_preserve_group_begin(struct ovs_layer *l);
int ovs_preserve_group_end(struct ovs_layer *l);
/* Rule 3: before the (empty) directory at path is removed: its copy in the
 * layer exists and is opaque. */
int ovs_preserve_rmdir(struct ovs_layer *l, const struct ovs_relpath *path);
/* Rule 4: before the directory at path is renamed: the whole subtree as of
 * the snapshot is in the layer (entries already there win; the rest is
 * cloned from SRC), and every directory of it is opaque. */
int ovs_preserve_subtree(struct ovs_layer *l, struct ovs_hlmap *m,
			 const struct ovs_relpath *path);
/* How many times a bulk copy (a preserve that copies more than 64 MiB)
 * waited between two of its chunks for other first changes of this
 * process, since it started: ovsnapd's status. */
unsigned long ovs_copy_yields(void);

#endif
