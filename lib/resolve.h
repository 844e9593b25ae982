/*
 * A userspace overlay resolver: what a read-only kernel overlay mount of
 * lowerdir=L0:L1:...:Ln-1:SRC would show, computed from the layer
 * directories themselves.  Used by snapshot views, merge, fsck and diff.
 *
 * Semantics are those of overlayfs for a stack of lower layers only (no
 * upperdir, no index, no metacopy):
 *  - the topmost layer with an entry at a name decides what it is;
 *  - a whiteout (0/0 char device) hides the name and everything below;
 *  - a non-directory hides everything below it at that name;
 *  - a directory merges with the directories below it, stopping at the
 *    first layer that has a non-directory or a whiteout there, and after
 *    a directory carrying trusted.overlay.opaque;
 *  - the root directories always merge (overlayfs ignores opaque roots).
 * Redirects are not followed: an entry carrying trusted.overlay.redirect
 * is reported (OVS_RENT_REDIRECT) so callers can refuse it.
 *
 * Paths are relative to the layer roots ("" is the root, "a/b" a child),
 * without "." or ".." components and without leading or trailing '/'.
 */
#ifndef OVSNAP_RESOLVE_H
#define OVSNAP_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

struct ovs_rstack;

/*
 * A stack of layer directory fds, topmost first, plus the lowest layer
 * (SRC, or -1 for none).  The fds are duplicated: the caller keeps its
 * own.  Layer index i < nlayers is layer_fds[i]; index nlayers is lowerfd.
 */
int ovs_rstack_new(const int *layer_fds, size_t nlayers, int lowerfd,
		   struct ovs_rstack **out);
void ovs_rstack_free(struct ovs_rstack *s);
/* Number of layers including the lower one. */
size_t ovs_rstack_depth(const struct ovs_rstack *s);

enum ovs_rkind {
	OVS_R_ABSENT,	/* no layer has it (or its parent hides it) */
	OVS_R_WHITEOUT,	/* the topmost entry is a whiteout: absent in the view */
	OVS_R_ENTRY,	/* visible */
};

enum ovs_rent_flags {
	OVS_RENT_OPAQUE = 1 << 0,	/* the topmost directory is opaque */
	OVS_RENT_REDIRECT = 1 << 1,	/* some contributing dir has a redirect */
};

struct ovs_rentry {
	enum ovs_rkind kind;
	int layer;		/* index of the topmost layer holding the name, -1 if absent */
	int lowest;		/* directories: lowest layer merged in; else == layer */
	unsigned flags;		/* OVS_RENT_* */
	struct stat st;		/* lstat of the topmost entry (kind != ABSENT) */
};

/*
 * Look path up.  0 with e filled (also for absent and whited-out paths);
 * -ENOTDIR when a parent of path is visible as a non-directory; other
 * -errno with a message on I/O errors.
 */
int ovs_resolve_lookup(struct ovs_rstack *s, const char *path, struct ovs_rentry *e);

struct ovs_rdirent {
	char *name;
	struct ovs_rentry e;	/* as ovs_resolve_lookup(path/name) returns it */
};

/*
 * The visible entries of the merged directory at path, sorted by name
 * (strcmp order), whiteouts and hidden names left out.  -ENOTDIR when path
 * is no directory in the view, -ENOENT when it is absent.
 */
int ovs_resolve_readdir(struct ovs_rstack *s, const char *path,
			struct ovs_rdirent **ents, size_t *n);
void ovs_resolve_dirents_free(struct ovs_rdirent *ents, size_t n);

/*
 * A merged directory resolved once, to look names up in it without
 * walking its path again: ovs_resolve_child(d, name) answers what
 * ovs_resolve_lookup(path/name) answered when d was opened.  Its layer
 * directories are held open (owned by d), so an answer about a layer
 * that changes (the lowest one) is as of now below the directories d
 * found then: callers validate such answers as they would any other.
 * ovs_resolve_opendir: -ENOENT when path is absent, -ENOTDIR when it is
 * no directory in the view.
 */
struct ovs_rdir;
int ovs_resolve_opendir(struct ovs_rstack *s, const char *path, struct ovs_rdir **out);
int ovs_resolve_child(struct ovs_rstack *s, const struct ovs_rdir *d, const char *name,
		      struct ovs_rentry *e);
void ovs_rdir_free(struct ovs_rdir *d);

/*
 * Open the layer directory at path in layer i (O_PATH|O_DIRECTORY, no
 * symlinks followed on the way): for callers that read a file found by
 * lookup (e.layer) or walk one layer.  Returns the fd or -errno.
 */
int ovs_rstack_openat(struct ovs_rstack *s, size_t layer, const char *path, int flags);

#endif
