/*
 * Per-volume configuration (ovsnap.conf(5)): one file per volume,
 * CONFDIR/NAME.conf, NAME the volume's SRC escaped as systemd escapes a
 * path for an instance name (`systemd-escape --path`), so that
 * ovsnap-rotate@NAME.timer and ovsnapd@NAME.service name the same volume.
 * An escape too long for a unit name (rule 18: any path must work) is cut
 * short and ends in "~h" and a hash of SRC (ovs_conf_name).
 *
 * The file is shell-like KEY=VALUE lines (VALUE bare, "double quoted" with
 * \" \\ \$ \` escapes, or 'single quoted'), '#' comments and blank lines.
 * Parsing is strict: an unknown key, a key set twice or a bad value is an
 * error naming FILE:LINE.
 */
#ifndef OVSNAP_CONF_H
#define OVSNAP_CONF_H

#include <stdbool.h>
#include <stddef.h>

#include "libovsnap.h"

/* A hook runs at most this long (seconds) unless HOOK_TIMEOUT says. */
#define OVS_CONF_DEFAULT_HOOK_TIMEOUT 600u
#define OVS_CONF_HOOK_TIMEOUT_MAX (7u * 24 * 3600)
/* The longest NAME (without ".conf"): what a unit instance may be. */
#define OVS_CONF_NAME_MAX 239

/* What the timer keeps when the file does not say. */
#define OVS_CONF_DEFAULT_KEEP "last=3,hourly=24,daily=7,weekly=4,monthly=12,yearly=2"

struct ovs_conf {
	char path[4096];	/* the file (whether it exists or not) */
	bool exists;
	/* NULL: not set in the file (the default applies) */
	char *keep;		/* KEEP: a --keep SPEC */
	char *space_limit;	/* SPACE_LIMIT: N% or a size */
	bool has_class;
	enum ovs_snap_class cls;	/* CLASS: manual or timeline */
	char *pre_hook, *post_hook;	/* PRE_HOOK, POST_HOOK: sh -c commands */
	bool has_hook_timeout;
	unsigned hook_timeout;	/* HOOK_TIMEOUT: seconds, 0: no limit */
	char **allow_users, **allow_groups;	/* NULL-terminated, or NULL */
	unsigned line[8];	/* line of each key in the file, 0: unset */
};

/* The directory of the files: $OVSNAP_CONF_DIR, else CONFDIR. */
const char *ovs_conf_dir(void);

/* systemd's path escaping (unit_name_path_escape): "/srv/data" ->
 * "srv-data", "/" -> "-".  -ENAMETOOLONG when it does not fit in len or
 * is longer than a unit instance may be. */
int ovs_unit_escape_path(const char *path, char *buf, size_t len);
/* Whether path's escape fits a unit instance name (no message). */
bool ovs_unit_name_fits(const char *path);
/* NAME of src's settings file into buf (OVS_CONF_NAME_MAX + 1 bytes at
 * least): the escape when it fits a unit name, else the escape cut short
 * plus "~h" and 16 hex digits of a hash of src.  Never fails on length. */
int ovs_conf_name(const char *src, char *buf, size_t len);

/* Parse text as the contents of the file named path (for messages). */
int ovs_conf_parse(const char *path, const char *text, struct ovs_conf *c);
/* Load the file of the volume of src (canonical path): a missing file
 * gives every default (c->exists false).  The file must be a regular
 * file owned by root and writable by nobody else, not a symlink, in a
 * directory held to the store's rule (ovs_safe_dir_open): its hooks run
 * as root.  ALLOW_USERS/ALLOW_GROUPS names are not looked up here. */
int ovs_conf_load(const char *src, struct ovs_conf *c);
void ovs_conf_clear(struct ovs_conf *c);

/* Create the file of src with every default, commented out, unless it
 * exists.  keep: a KEEP to write uncommented (the legacy $OVSNAP_KEEP
 * of the rotation unit), or NULL.  1 when created, 0 when it existed. */
int ovs_conf_create_default(const char *src, const char *keep);

/* Remove the file of src (ovsnap forget); 0 also when there is none. */
int ovs_conf_remove(const char *src);

/* -EINVAL naming FILE:LINE when a name of ALLOW_USERS or ALLOW_GROUPS is
 * no user or group (now); 0 when all are. */
int ovs_conf_check_names(const struct ovs_conf *c);

/* The effective settings. */
unsigned ovs_conf_hook_timeout(const struct ovs_conf *c);
const char *ovs_conf_keep(const struct ovs_conf *c);
enum ovs_snap_class ovs_conf_class(const struct ovs_conf *c);
/* The timer's --keep SPEC: KEEP plus ",space=SPACE_LIMIT"; free() it. */
char *ovs_conf_timer_spec(const struct ovs_conf *c, const char *keep);

#endif
