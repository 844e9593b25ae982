/*
 * libovsnap — file-level copy-on-write snapshots of a directory subtree,
 * built on the overlayfs layer format.
 *
 * The library never prints and never exits.  Every call that can fail
 * returns 0 (or a non-negative value) on success and -errno on failure; the
 * failing call also leaves a one-line explanation that ovs_last_error()
 * returns (thread-local, valid until the next failing call of the thread).
 */
#ifndef LIBOVSNAP_H
#define LIBOVSNAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---------------------------------------------------------- */

/* The message of the last failing call in this thread ("" if none). */
const char *ovs_last_error(void);
/* Set the thread's message; returns -err (err > 0) for "return ovs_err(...)". */
int ovs_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Like ovs_err() but adds the message a failing callee set as the cause:
 * "<fmt>: <callee's message>". */
int ovs_err_keep(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- limits ---------------------------------------------------------- */

/* overlayfs stacks at most 500 lower layers; SRC is one of them. */
#define OVS_MAX_SNAPSHOTS 499
#define OVS_NAME_MAX 64
/* What users may say about a snapshot (ovsnap-modify(8)): a description
 * and KEY=VALUE user data, UTF-8 text without control characters, in
 * bytes. */
#define OVS_DESCRIPTION_MAX 256
#define OVS_USERDATA_KEY_MAX 32
#define OVS_USERDATA_VALUE_MAX 128
#define OVS_USERDATA_NMAX 8

/* ---- paths of state outside the store -------------------------------- */

/* Directory of the index of volumes (symlinks to their store folders):
 * $OVSNAP_STATE_DIR or /var/lib/ovsnap (configure --with-statedir). */
const char *ovs_state_dir(void);
/* Directory of control sockets: $OVSNAP_RUN_DIR or /run/ovsnap. */
const char *ovs_run_dir(void);

/* ---- volumes ----------------------------------------------------------- */

struct ovs_volume;

struct ovs_volume_opts {
	const char *store;	/* --store DIR, or NULL for <fsroot>/.ovsnap */
};

/*
 * Set up a new volume for the directory src (absolute path): checks the
 * filesystem, creates the store and the registry, and registers the volume
 * in the index.  Fails with -EEXIST if it is already a volume.
 */
int ovs_volume_create(const char *src, const struct ovs_volume_opts *opts,
		      struct ovs_volume **out);
/* Undo ovs_volume_create of a volume whose setup failed afterwards (no
 * snapshots): index entry, store folder, and the store root if empty. */
int ovs_volume_remove_new(struct ovs_volume *v);
/* Open an existing volume by its source path; -ENOENT if it is none.
 * The index naming it, a volume all the same: -ENOMEDIUM if its store
 * folder cannot be found (its filesystem not mounted, or gone), -EUCLEAN
 * if the folder has no registry, -EBUSY if an interrupted forget removed
 * either. */
int ovs_volume_open(const char *src, struct ovs_volume **out);
struct ovs_volume *ovs_volume_ref(struct ovs_volume *v);
void ovs_volume_unref(struct ovs_volume *v);

/* Every registered volume, in the order of their source paths. */
int ovs_volume_list(struct ovs_volume ***vols, size_t *n);
void ovs_volume_list_free(struct ovs_volume **vols, size_t n);
/* ovs_volume_open, but a volume whose store or registry cannot be used
 * (missing, unsafe, unreadable by this user) is still returned, as
 * ovs_volume_list shows it: ovs_volume_problem() says why.  -ENOENT if
 * src is no volume. */
int ovs_volume_open_listed(const char *src, struct ovs_volume **out);

/* The problem of a listed volume is that its store folder is not there
 * (its filesystem not mounted, or the folder removed). */
bool ovs_volume_store_missing(const struct ovs_volume *v);

const char *ovs_volume_source(const struct ovs_volume *v);	/* /abs/src */
const char *ovs_volume_store(const struct ovs_volume *v);	/* store folder of this volume */
const char *ovs_volume_fstype(const struct ovs_volume *v);
const char *ovs_volume_fsuuid(const struct ovs_volume *v);
bool ovs_volume_can_clone(const struct ovs_volume *v);	/* FICLONE works in the store */
/* Path of the control socket of this volume's daemon. */
const char *ovs_volume_socket(const struct ovs_volume *v);
/* Registry flag: protection is switched on (daemon expected to be running). */
bool ovs_volume_active(const struct ovs_volume *v);

/*
 * Lock the volume for a multi-step command.  With wait false, a held lock
 * fails at once with -EBUSY and a message naming the holder's PID and
 * command.  The lock is released by ovs_volume_unlock() or at exit.
 */
int ovs_volume_lock(struct ovs_volume *v, bool wait, const char *what);
void ovs_volume_unlock(struct ovs_volume *v);
/* Called (if set) when ovs_volume_lock() with wait finds the lock held and
 * starts waiting; holder as "take (pid 123)".  The CLI says so. */
extern void (*ovs_lock_wait_hook)(const struct ovs_volume *v, const char *holder);
/* The fd of the held lock (to hand over to the daemon), or -1. */
int ovs_volume_lock_fd(const struct ovs_volume *v);

/* ---- the registry ------------------------------------------------------ */

enum ovs_snap_state {
	OVS_SNAP_ACTIVE,	/* newest: receives the copy-ups */
	OVS_SNAP_FROZEN,	/* older: never changes except by merge */
};
const char *ovs_snap_state_name(enum ovs_snap_state s);

/*
 * How a snapshot was made, which says which retention rules may remove it
 * (snapper's cleanup algorithms).  Zero is manual: a snapshot whose class
 * was never recorded (a registry of an older ovsnap, a take interrupted
 * before it recorded one) is never pruned by a rule written for the timer.
 */
enum ovs_snap_class {
	OVS_CLASS_MANUAL,	/* a plain take */
	OVS_CLASS_TIMELINE,	/* the rotation timer, take --keep */
	OVS_CLASS_PRE,		/* before a command (take --pre) */
	OVS_CLASS_POST,		/* after it */
	OVS_CLASS_COUNT
};
const char *ovs_snap_class_name(enum ovs_snap_class c);
/* "manual", "timeline", "pre", "post"; -EINVAL with a message. */
int ovs_snap_class_parse(const char *name, enum ovs_snap_class *out);

struct ovs_userdata {
	char key[OVS_USERDATA_KEY_MAX + 1];
	char value[OVS_USERDATA_VALUE_MAX + 1];	/* "" only in a change: remove */
};

struct ovs_snapshot {
	uint64_t id;		/* increasing, never reused */
	char name[OVS_NAME_MAX + 1];	/* "" when unnamed */
	int64_t created_ns;	/* CLOCK_REALTIME, UTC */
	enum ovs_snap_state state;
	bool hold;		/* nothing removes it without --force */
	enum ovs_snap_class cls;
	char description[OVS_DESCRIPTION_MAX + 1];	/* "" when none */
	unsigned nuserdata;
	struct ovs_userdata userdata[OVS_USERDATA_NMAX];	/* sorted by key */
	uint64_t pre;		/* a post snapshot: the id of its pre one, else 0 */
};

/* 0 if text may be a description, else -EINVAL with a message saying
 * why (too long, a control character, not UTF-8). */
int ovs_description_check(const char *text);
/* Parse KEY=VALUE (--userdata): KEY is [A-Za-z0-9_][A-Za-z0-9_.:-]*, at
 * most OVS_USERDATA_KEY_MAX bytes; VALUE text as a description, at most
 * OVS_USERDATA_VALUE_MAX bytes, "" meaning "remove KEY".  -EINVAL with a
 * message. */
int ovs_userdata_parse(const char *arg, struct ovs_userdata *out);

/*
 * (Re)read the registry from disk.  A registry that does not parse fails
 * with -EUCLEAN and says which line is wrong; nothing is changed.
 */
int ovs_registry_load(struct ovs_volume *v);
size_t ovs_snapshot_count(const struct ovs_volume *v);
/* i-th snapshot, oldest first; NULL past the end. */
const struct ovs_snapshot *ovs_snapshot_at(const struct ovs_volume *v, size_t i);
/* Upper and work directories of a snapshot (absolute paths). */
int ovs_snapshot_upper(const struct ovs_volume *v, uint64_t id, char *buf, size_t len);
int ovs_snapshot_work(const struct ovs_volume *v, uint64_t id, char *buf, size_t len);
/* The id the next snapshot will get. */
uint64_t ovs_registry_next_id(const struct ovs_volume *v);

/*
 * Resolve a snapshot reference: an id ("3"), a name, "@latest", "@oldest"
 * or "@-N" (N before the latest).  -ENOENT with a message if none matches.
 */
int ovs_snapshot_resolve(const struct ovs_volume *v, const char *ref,
			 const struct ovs_snapshot **out);
/* A name a user may give a snapshot: [A-Za-z0-9._-], not all digits,
 * not starting with '@', '.' or '-'. */
bool ovs_snapshot_name_valid(const char *name);

/*
 * Registry mutations: each rewrites the registry atomically (write new,
 * fsync, rename, fsync dir).  The caller holds the volume lock.
 */
/* Create the upper/work pair of the next snapshot and register it as the
 * active one (the previous active becomes frozen).  The upper root gets the
 * metadata of the directory rootfd (SRC's root as of the take). */
int ovs_registry_add_snapshot(struct ovs_volume *v, const char *name, int rootfd,
			      uint64_t *id_out);
int ovs_registry_remove_snapshot(struct ovs_volume *v, uint64_t id);
int ovs_registry_set_active(struct ovs_volume *v, bool active);
/* The instant of a switch-off, read from the filesystem's own clock (the
 * ctime of a file written in the store), and set_active(false) recording
 * an instant taken earlier (since_ns > 0; 0 takes one now).  A
 * deactivation stamps before it stops the daemon: a stamp too early only
 * widens the window fsck checks, one too late would hide changes. */
int ovs_registry_deactivation_stamp(struct ovs_volume *v, int64_t *ns);
int ovs_registry_set_inactive_since(struct ovs_volume *v, bool active, int64_t since_ns);
int ovs_registry_set_hold(struct ovs_volume *v, uint64_t id, bool hold);

/* A change of what a registry records about snapshots; the fields left
 * as OVS_SNAP_CHANGE_INIT sets them change nothing. */
struct ovs_snap_change {
	int hold;			/* -1, or 0/1 */
	int cls;			/* -1, or an enum ovs_snap_class */
	const char *description;	/* NULL, or the new one ("" removes it) */
	const struct ovs_userdata *userdata;	/* set these keys ("" removes) */
	size_t nuserdata;
	uint64_t pre;			/* 0, or link a post snapshot to this pre */
};
#define OVS_SNAP_CHANGE_INIT { .hold = -1, .cls = -1 }
/*
 * Apply change to each of the snapshots ids[0..n) in one atomic rewrite of
 * the registry: everything is checked first (text, keys, at most
 * OVS_USERDATA_NMAX keys a snapshot), so a refused change leaves the
 * registry as it was.  The caller holds the volume lock.
 */
int ovs_registry_change(struct ovs_volume *v, const uint64_t *ids, size_t n,
			const struct ovs_snap_change *change);

/* ---- intent records ---------------------------------------------------- */

/*
 * A multi-step operation writes its intent (a short text: the operation and
 * its arguments) durably before its first change and clears it after its
 * last one.  A record found at the next lock is finished or rolled back.
 */
int ovs_intent_write(struct ovs_volume *v, const char *text);
/* Read the pending intent into buf; 0 with buf[0] == 0 when there is none. */
int ovs_intent_read(struct ovs_volume *v, char *buf, size_t len);
int ovs_intent_clear(struct ovs_volume *v);

/* ---- space ------------------------------------------------------------- */

/* Bytes the layer at upper holds on its own (what dropping it frees):
 * allocated extents not shared with another file (reflink clones of live
 * files are shared), each hard-linked inode once. */
int ovs_layer_space(const char *upper, uint64_t *bytes);
/* The same for the layer of snapshot id, opened from the store's fd. */
int ovs_snapshot_space(const struct ovs_volume *v, uint64_t id, uint64_t *bytes);

/* ---- processes ------------------------------------------------------- */

/* PIDs of the processes (other than this one) with an open file, working
 * or root directory, executable or mapping under the directory dir. */
int ovs_path_users(const char *dir, pid_t **pids, size_t *n);
/* The same for every object on the filesystem dev (st_dev): finds the
 * users of a detached mount, whose paths no longer name it. */
int ovs_dev_users(dev_t dev, pid_t **pids, size_t *n);

/* ---- small shared helpers ---------------------------------------------- */

/* Write a whole file atomically and durably: tmp in the same dir, fsync,
 * rename, fsync dir. */
int ovs_write_file_atomic(int dirfd, const char *name, const void *buf, size_t len,
			  mode_t mode);
/* fsync a directory given by dirfd + name ("." for dirfd itself). */
int ovs_fsync_dir(int dirfd, const char *name);
/* Format ns since the epoch as local ISO 8601 (for tables) or UTC "Z" (JSON). */
void ovs_format_time_local(int64_t ns, char *buf, size_t len);
void ovs_format_time_utc(int64_t ns, char *buf, size_t len);
/* Current time in ns; $OVSNAP_TEST_NOW (seconds since the epoch) overrides
 * it, for retention tests only. */
int64_t ovs_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
