/*
 * Snapshot views in the mount table (libmount).  A view is recognised by
 * its source, "ovsnap-view:<SRC>:<ID>": fstype fuse.ovsnap-view for the
 * daemon-served views (ovsnap-viewd), overlay for --kernel ones.  Text is
 * not trusted alone, since any user can make a FUSE mount that reads the
 * same: a daemon-served view counts only when root made it (user_id=0)
 * and it is served by the ovsnap-viewd `ovsnap mount` recorded for it.
 */
#ifndef OVSNAP_VIEWS_H
#define OVSNAP_VIEWS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "libovsnap.h"

#define OVS_VIEW_SOURCE_PREFIX	"ovsnap-view:"
#define OVS_VIEW_FSTYPE		"fuse.ovsnap-view"
#define OVS_VIEW_SUBTYPE	"ovsnap-view"

struct ovs_view_mount {
	char *source;		/* SRC of the volume */
	uint64_t id;		/* the snapshot */
	char *target;		/* where it is mounted */
	bool kernel;		/* a --kernel (stock overlayfs) view */
	bool served;		/* its ovsnap-viewd serves it (always for kernel) */
};

/* The views of snapshots of v that are mounted and served now, in mount
 * order. */
int ovs_volume_views(const struct ovs_volume *v, struct ovs_view_mount **views, size_t *n);
/* Every view mounted now (any volume). */
int ovs_views_all(struct ovs_view_mount **views, size_t *n);
void ovs_views_free(struct ovs_view_mount *views, size_t n);
/* 1 and *out filled when the topmost mount at target (canonical path) is
 * a view made by root, served or not (a dead view can be unmounted), 0
 * when it is something else or no mount, -errno on failure. */
int ovs_view_at(const char *target, struct ovs_view_mount *out);
/* The ovsnap-viewd `ovsnap mount` recorded for the view at target (its pid
 * file in the run directory), if it is alive, root's and ovsnap-viewd:
 * its pid, and in *dev (if not NULL) the device of the mount it made; 0
 * when there is none. */
pid_t ovs_view_daemon(const char *target, dev_t *dev);
/* The source string a view of snapshot id of src is mounted with
 * (malloc'ed). */
char *ovs_view_source(const char *src, uint64_t id);
/* <run dir>/view-<escaped target>.<ext>: the pid file ("pid": "PID
 * MAJOR:MINOR", the daemon and the device number of its mount) and log
 * ("log") of the ovsnap-viewd serving the view at target. */
int ovs_view_run_file(const char *target, const char *ext, char *buf, size_t len);

#endif
