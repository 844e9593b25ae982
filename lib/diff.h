/*
 * What changed between two snapshots of a volume, or between a snapshot
 * and the live tree (ovsnap-diff(8)).
 *
 * Snapshot k is the overlay U_k:U_k+1:...:U_n:SRC (DESIGN.md section 3),
 * so snapshot A is the layers U_A..U_B-1 laid over snapshot B (or over
 * the live tree, B = live, with every layer U_A..U_n).  A path can differ
 * between A and B only where those layers have an entry, or below an
 * entry of theirs that hides what lies beneath (a whiteout, a
 * non-directory, an opaque directory).  So the work is proportional to
 * the entries of those layers (plus, below a hiding entry, what B holds
 * there: all of it is new), never to the size of SRC.
 */
#ifndef OVSNAP_DIFF_H
#define OVSNAP_DIFF_H

#include <stdint.h>
#include <sys/types.h>

#include "libovsnap.h"

/* "to" of ovs_diff(): the live tree. */
#define OVS_DIFF_LIVE UINT64_MAX

enum ovs_diff_kind {
	OVS_DIFF_ADDED,		/* only in B */
	OVS_DIFF_REMOVED,	/* only in A */
	OVS_DIFF_MODIFIED,	/* same type, other content or metadata */
	OVS_DIFF_TYPE,		/* another type of object (file -> directory...) */
};

/* What differs in a modified object (and, for a type change, nothing). */
enum ovs_diff_field {
	OVS_DIFF_CONTENT = 1 << 0,	/* data, symlink target, device numbers */
	OVS_DIFF_MODE = 1 << 1,		/* permission bits, setuid/setgid/sticky */
	OVS_DIFF_OWNER = 1 << 2,	/* uid or gid */
	OVS_DIFF_MTIME = 1 << 3,	/* modification time (ns) */
	OVS_DIFF_XATTRS = 1 << 4,	/* extended attributes, ACLs included */
};

struct ovs_diff_change {
	const char *path;	/* relative to SRC; "" is SRC itself */
	enum ovs_diff_kind kind;
	mode_t from_mode;	/* st_mode in A, 0 when absent there */
	mode_t to_mode;		/* st_mode in B, 0 when absent there */
	unsigned fields;	/* OVS_DIFF_* of a modified object */
};

/* Called once per change, in path order, as the changes are found (the
 * change and its path last only for the call); a non-zero return stops. */
typedef int (*ovs_diff_fn)(const struct ovs_diff_change *c, void *arg);

/*
 * The changes from snapshot from to snapshot to (a newer one, the same
 * one, or OVS_DIFF_LIVE) of the locked, loaded volume v.  srcfd is SRC's
 * real directory (below the snapshot mount: ovs_open_real_source()).
 * The layers are walked one directory at a time, each change handed to
 * fn as soon as it is found: memory follows the directories on the path
 * being walked, never the number of changes.  So an error may follow
 * calls of fn: a caller that must answer all or nothing keeps what fn
 * got aside (ovsnap diff spools it to a file) until 0 is returned.
 * The order is that of the paths compared component by component
 * ("a", "a/b", "a b", "a.b"): a directory's entries follow it.
 * A directory whose only difference is its
 * mtime is left out (creating or removing a name inside changes it; the
 * name itself is reported).  -EINVAL when from is newer than to.
 */
int ovs_diff(struct ovs_volume *v, uint64_t from, uint64_t to, int srcfd, ovs_diff_fn fn,
	     void *arg);
/* The same, with the directories whose mtime alone differs (restore and
 * rollback set them back). */
int ovs_diff_all(struct ovs_volume *v, uint64_t from, uint64_t to, int srcfd, ovs_diff_fn fn,
		 void *arg);

#endif
