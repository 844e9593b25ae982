/*
 * The preservation engine (DESIGN.md section 2).  Used by the
 * snapshot-mount daemon before every change to SRC.  The overlay layer
 * format it writes (shared with merge and fsck) is in layer-format.h.
 *
 * Paths are relative to SRC's root: "" is the root itself, "a/b" a child.
 * They never start or end with '/', never contain "." or ".." components.
 * All calls return 0 (or the documented positive value) or -errno with a
 * message in ovs_last_error().  Calls are not thread-safe per layer: the
 * daemon serialises preserve+change pairs (rule 9).
 */
#ifndef OVSNAP_PRESERVE_H
#define OVSNAP_PRESERVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "layer-format.h"

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
 * ovs_hlmap_link is given the object's path after the link exists. */
int ovs_hlmap_link(struct ovs_hlmap *m, int srcfd, const char *existing, const char *newpath);
int ovs_hlmap_unlink(struct ovs_hlmap *m, int srcfd, const char *path,
		     const struct stat *st_before);
int ovs_hlmap_rename(struct ovs_hlmap *m, const char *from, const char *to);
/* The names of the object at path (itself included); n == 1 if not linked. */
int ovs_hlmap_names(struct ovs_hlmap *m, int srcfd, const char *path,
		    char ***names, size_t *n);
void ovs_hlmap_names_free(char **names, size_t n);

/* ---- the rules ------------------------------------------------------------ */

/*
 * 1 if path is covered in the layer (an entry at path, or an ancestor that
 * is a whiteout, a non-directory or an opaque directory), 0 if not.
 */
int ovs_covered(struct ovs_layer *l, const char *path);
/* The same for any layer's upper directory, no ovs_layer needed (views). */
int ovs_covered_at(int upperfd, const char *path);

/* How path is covered in the upper directory upperfd (read-only). */
enum ovs_coverage {
	OVS_NOT_COVERED,
	OVS_COVERED_BY_ANCESTOR,	/* whiteout, non-dir or opaque dir above */
	OVS_ENTRY_NONDIR,		/* the upper has a non-directory at path */
	OVS_ENTRY_DIR,			/* ... a plain (merging) directory */
	OVS_ENTRY_OPAQUE_DIR,		/* ... an opaque directory */
};
int ovs_coverage_at(int upperfd, const char *path);

/* Rule 1: before data or metadata of the existing object at path changes
 * (also before it is unlinked, renamed, or linked from).  Copies it up with
 * all its metadata (directories as metadata only), every hard-linked name
 * of it, parents as needed with their times restored (rule 7), durably
 * (rule 8).  No-op if covered. */
int ovs_preserve_object(struct ovs_layer *l, struct ovs_hlmap *m, const char *path);
/* Rule 2: before a name is created at path: a whiteout if nothing was
 * there at snapshot time; if SRC has an object at path, it is preserved
 * as by ovs_preserve_object.  No-op if covered. */
int ovs_preserve_name(struct ovs_layer *l, struct ovs_hlmap *m, const char *path);
/* Rule 3: before the (empty) directory at path is removed: its copy in the
 * layer exists and is opaque. */
int ovs_preserve_rmdir(struct ovs_layer *l, const char *path);
/* Rule 4: before the directory at path is renamed: the whole subtree as of
 * the snapshot is in the layer (entries already there win; the rest is
 * cloned from SRC), and every directory of it is opaque. */
int ovs_preserve_subtree(struct ovs_layer *l, struct ovs_hlmap *m, const char *path);

#endif
