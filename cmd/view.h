/*
 * ovsnap-viewd: one FUSE process per mounted snapshot view (DESIGN.md
 * section 3).  view-stack.c keeps the layer list of the snapshot current
 * and validates every answer that came from the live tree; view-ops.c
 * serves the FUSE requests; viewd.c mounts and runs the loop.
 *
 * Why a view is coherent without any lock shared with the live daemon
 * ------------------------------------------------------------------
 * Snapshot k's view is the overlay of its layers U_k:U_k+1:...:U_n:SRC,
 * U_k on top.  Only the newest layer U_n ever receives copy-ups, and the
 * snapshot-mount daemon always preserves BEFORE it changes SRC: the copy
 * (or whiteout) is made durable and renamed into U_n, and only then the
 * change reaches SRC.  Every take, merge and drop rewrites the registry by
 * rename BEFORE anything is copied into a new layer, so the registry's
 * identity (inode + mtime) is a generation number of the layer list.
 *
 * An answer that came only from layers is final: a frozen layer never
 * changes, and an entry in U_n never changes once it is there (the first
 * change wins).  An answer that involved SRC (data, attributes, a
 * directory's entries, even "no such name") is validated after the fact,
 * seqlock-style:
 *   (0) note the registry generation,
 *   (1) resolve the path through the current layer list,
 *   (2) read from SRC,
 *   (3) check that the path is still not covered in U_n (for a directory:
 *       that U_n's entries at the path did not change) and that the
 *       generation is the same.
 * If SRC changed between (1) and (3), the daemon covered the path in U_n
 * (or, after a take, in a newer layer, which changed the generation)
 * before the change, so (3) sees it: the view re-reads the registry and
 * answers again from the layers.  An open file backed by SRC switches to
 * the layer copy for good once its path is covered: the copy never changes
 * again, and a merge moves it by rename, so the open fd stays valid.
 *
 * So nothing written to the live tree after snapshot k is ever visible
 * through a view of k: not through a file opened before the change, not
 * in a directory listed while the tree changes, not after later takes.
 * And since the content of a view never changes, the kernel may cache it
 * for as long as it likes (long entry/attr timeouts, keep_cache).
 */
#ifndef OVSNAP_VIEW_H
#define OVSNAP_VIEW_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "libovsnap.h"
#include "ovsnap-private.h"
#include "resolve.h"

/* The identity of the registry file: every rewrite renames a new file
 * into place, which changes the inode (and the mtime). */
struct view_gen {
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
};

/* One generation of the layer list of the viewed snapshot.  Shared by the
 * requests that use it (refcounted); replaced as a whole on refresh. */
struct view_stack {
	int refs;
	size_t nlayers;		/* U_k .. U_n */
	int *layerfd;		/* [0] = U_k (top), [nlayers - 1] = U_n */
	uint64_t *ids;
	int srcfd;		/* SRC's real root (not owned) */
	struct ovs_rstack *rs;	/* the library's resolver over layerfd + SRC */
	struct view_gen gen;
};

/* Where an object of the view lives. */
struct view_obj {
	int layer;		/* index into layerfd, or VIEW_SRC */
	struct stat st;		/* its stat there (ino not yet mapped) */
	bool merges_src;	/* a directory whose entries continue into SRC */
};
#define VIEW_SRC (-1)

struct view {
	struct ovs_volume *vol;
	uint64_t snap_id;
	char *src;		/* SRC path (for messages) */
	int srcfd;		/* SRC's real root, below any snapshot mount */
	int storefd;		/* the volume's store folder (registry lives here) */

	pthread_mutex_t lock;	/* guards stack, vol and stale */
	struct view_stack *stack;
	bool stale;		/* the snapshot was dropped or merged away */
	double timeout;		/* entry/attr cache timeout given to the kernel */
};

/* ---- view-stack.c --------------------------------------------------------- */

int view_open(struct view *vw, const char *src, uint64_t id);
void view_close(struct view *vw);
/* The current stack (a reference; view_stack_put it), refreshed first if
 * the registry changed.  -ESTALE when the snapshot no longer exists. */
int view_stack_get(struct view *vw, struct view_stack **out);
void view_stack_put(struct view_stack *s);
/* Re-read the registry now and replace the stack. */
int view_refresh(struct view *vw);
int view_gen_read(struct view *vw, struct view_gen *g);
/* FUSE passthrough of files in frozen layers (view-ops.c): asked for
 * (ovsnap-viewd without --no-passthrough), and granted by the kernel. */
extern bool view_passthrough_wanted, view_passthrough;
/* FUSE over io_uring where the kernel offers it (--no-io-uring: never) */
extern bool view_uring_wanted;
/* Before the session starts: what backing files are opened through. */
void view_passthrough_setup(struct view *vw);

bool view_gen_equal(const struct view_gen *a, const struct view_gen *b);

/* Resolve path ("" is the root) through s: -ENOENT when the view has no
 * such object. */
int view_resolve(struct view_stack *s, const char *path, struct view_obj *o);
/*
 * Whether an answer about path that involved SRC still holds: 0 when the
 * generation is still g and path is still not covered in U_n, -EAGAIN
 * when it must be redone, another -errno when the coverage cannot be read
 * (an error to pass on, not a reason to retry).
 *
 * Coverage in U_n never goes away while a stack is current (the first
 * change wins; merges and drops rewrite the registry first), and a covered
 * path is resolved by the layers alone: the covering entry, or an ancestor
 * that ends the merge, sits in U_n or above, so SRC is not consulted for
 * it.  So an answer resolved after the path was seen covered, under the
 * same generation, is final whatever it is, also "no such name".
 */
int view_src_answer_check(struct view *vw, struct view_stack *s, const char *path,
			  const struct view_gen *g);
/* Fingerprint of what U_n holds at path (absent, whiteout, entries). */
uint64_t view_newest_signature(struct view_stack *s, const char *path);

/*
 * Paths of any length (DESIGN.md rule 18): the directory that holds the
 * last component of path below dirfd, and that component.  A path of one
 * component is used as it is: *dirfd_out is dirfd, *name_out is path
 * ("." for "") and *owned is -1.  A longer one has its parent opened in
 * pieces, each beneath the last, no symlink followed and no mount crossed
 * (rule 15: a user may swap a folder of SRC for a symlink at any time, and
 * the *at calls given the name would follow it): *owned is that fd, for
 * view_path_done.
 */
int view_path_at(int dirfd, const char *path, int *dirfd_out, const char **name_out,
		 int *owned);
void view_path_done(int owned);

/* Open the object o of path for reading (O_NOFOLLOW, beneath its layer). */
int view_open_obj(struct view_stack *s, const char *path, const struct view_obj *o,
		  int flags);
/* The fd of the layer (or SRC) o lives in. */
int view_obj_dirfd(struct view_stack *s, const struct view_obj *o);
/* name in the directory d resolved on s (ovs_resolve_opendir): what
 * view_resolve(dir/name) would answer, SRC's part as of now below the
 * layer directories d holds; validated like any answer from SRC. */
int view_resolve_child(struct view_stack *s, const struct ovs_rdir *d, const char *name,
		       struct view_obj *o);

/* The st_ino the view shows: the original inode number kept in the
 * origin xattr of a copied-up object, SRC's own number otherwise. */
ino_t view_shown_ino(struct view_stack *s, const char *path, const struct view_obj *o);
/* Fill st for the view from o (ino, ctime from the origin; nlink 1 for a
 * directory merged from several layers, as overlayfs shows it). */
void view_fill_stat(struct view_stack *s, const char *path, const struct view_obj *o,
		    struct stat *st);

/* One entry of a merged directory listing. */
struct view_dirent {
	char *name;
	unsigned char type;	/* DT_* */
	ino_t ino;		/* as the view shows it */
	struct stat st;		/* as the view shows it (view_fill_stat) */
};
/* The merged entries of the directory at path, without "." and "..", with
 * the attributes a lookup of each would give: they are validated together
 * with the listing (view.h), so READDIRPLUS may hand them out. */
int view_list(struct view_stack *s, const char *path, struct view_dirent **ents,
	      size_t *n, bool *from_src);
void view_list_free(struct view_dirent *ents, size_t n);

#endif
