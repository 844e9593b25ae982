/*
 * The overlay layer format: what a layer's upper and work directories
 * hold, as the preservation engine (preserve.c, the policy; copyup.c, the
 * mechanism) writes it and merge, fsck and the views read it.
 */
#ifndef OVSNAP_LAYER_FORMAT_H
#define OVSNAP_LAYER_FORMAT_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#define OVL_XATTR_PREFIX	"trusted.overlay."
#define OVL_XATTR_OPAQUE	"trusted.overlay.opaque"
#define OVL_XATTR_REDIRECT	"trusted.overlay.redirect"
/* An xwhiteout (kernel 6.7+): an empty file carrying it, in a folder whose
 * opaque xattr is "x", is a whiteout to the kernel.  ovsnap writes none. */
#define OVL_XATTR_XWHITEOUT	"trusted.overlay.whiteout"
/* An empty origin means "copied up, origin unknown".  Every directory the
 * engine makes carries one: overlayfs filters whiteouts out of a
 * directory's listing only when it may hold any (a merge, or an origin), so
 * an opaque directory without it would list its whiteouts as phantoms. */
#define OVL_XATTR_ORIGIN	"trusted.overlay.origin"
/* Escaped user xattr: trusted.overlay.X of a user file is stored as
 * trusted.overlay.overlay.X (kernel 6.7+ unescapes it). */
#define OVL_XATTR_ESCAPE	"trusted.overlay.overlay."
/* Identity of the original object: "ino=<n> ctime=<s>.<ns> btime=<s>.<ns>"
 * (btime=- when the filesystem has none).  overlayfs hides unknown
 * trusted.overlay.* names, so it never shows in a view. */
#define OVS_XATTR_ORIGIN	"trusted.overlay.ovsnap.origin"

/* A whiteout is a 0/0 character device (or a hard link to one). */
static inline bool ovl_is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == 0;
}
/* 1 if dirfd/name (a directory) carries the opaque xattr, 0 if not. */
int ovl_is_opaque_at(int dirfd, const char *name);
int ovl_set_opaque_at(int dirfd, const char *name);

/* xattr calls on any object, symlinks included, without following it
 * (setxattrat & co. where the kernel has them, else /proc/self/fd).  name
 * "" means dirfd itself.  They return -errno and set no message: ENODATA,
 * ENOTSUP and ERANGE are ordinary answers to their callers. */
ssize_t ovs_lgetxattrat(int dirfd, const char *name, const char *attr, void *buf, size_t len);
ssize_t ovs_llistxattrat(int dirfd, const char *name, char *buf, size_t len);
int ovs_lsetxattrat(int dirfd, const char *name, const char *attr, const void *val,
		    size_t len, int flags);
int ovs_lremovexattrat(int dirfd, const char *name, const char *attr);

/* ---- the work directory ----------------------------------------------------- */

/* The one whiteout every whiteout of a layer is a hard link to. */
#define OVS_WHITEOUT_BASE	"wh-base"
/* A temporary name in the work dir is OVS_TMP_PREFIX "<pid>.<n>", pid the
 * process preserving (fsck tells the running daemon's copies in progress
 * from leftovers by it). */
#define OVS_TMP_PREFIX		"#ovs."
/* Room for a temporary name in the work dir ("#ovs.<pid>.<n>"): short and
 * of bounded length, never derived from a user's name, so no internal
 * name is longer than the user's (DESIGN.md rule 18). */
#define OVS_TMP_NAME_MAX	64

#endif
