/*
 * Internals of libovsnap shared by the library, the daemon, the CLI and the
 * unit tests.  Not a stable interface: the public one is libovsnap.h.
 */
#ifndef OVSNAP_PRIVATE_H
#define OVSNAP_PRIVATE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "libovsnap.h"

/* ---- the registry file ------------------------------------------------- */

/*
 * <store>/<volume>/registry, a versioned text file (ovsnap-store(5)):
 *
 *	ovsnap-registry 2
 *	source /abs/src            (control bytes and '\' as \xNN)
 *	fstype xfs
 *	fsuuid 5c0c...
 *	clone 1
 *	next-id 4
 *	active 0
 *	deactivated-ns 0
 *	activated-ns 0              (optional: absent in older files, read as 0)
 *	snapshot 1 - 1764669600123456789 frozen 0 manual
 *	snapshot-description 1 before apt upgrade   (escaped as source)
 *	snapshot-userdata 1 ticket OPS-12            (KEY VALUE, sorted by KEY)
 *	snapshot-pre 2 1                             (a post snapshot's pre)
 *	snapshot 3 nightly 1764669601000000000 active 1 timeline
 *	end
 *
 * Snapshot fields: id, name ("-" when none), created ns, state, hold,
 * class; the snapshot-* lines that follow a snapshot line belong to it.
 * Version 1 (ovsnap before classes) has no class field and no snapshot-*
 * lines: it still reads, every snapshot as manual, and is written back as
 * version 2.  The "end" line tells a complete file from a truncated one.
 */
#define OVS_REGISTRY_MAGIC	"ovsnap-registry"
#define OVS_REGISTRY_VERSION	2
/* The largest registry read: 499 snapshots with every text at its limit. */
#define OVS_REGISTRY_MAX_BYTES	(8u << 20)
#define OVS_REGISTRY_FILE	"registry"
#define OVS_LOCK_FILE		"lock"
#define OVS_INTENT_FILE		"intent"
#define OVS_LAYERS_DIR		"layers"
/* Touched by each deactivation: its ctime is the recorded instant. */
#define OVS_DEACTIVATED_FILE	"deactivated"
#define OVS_STORE_DEFAULT	".ovsnap"	/* at the root of SRC's filesystem */
#define OVS_FSTYPE_MAX		32
#define OVS_FSUUID_MAX		64

struct ovs_registry {
	char *source;
	char fstype[OVS_FSTYPE_MAX];
	char fsuuid[OVS_FSUUID_MAX];
	bool can_clone;
	uint64_t next_id;
	bool active;
	int64_t deactivated_ns;		/* last deactivation, 0 = never */
	int64_t activated_ns;		/* last activation after being inactive,
					 * 0 = never or not recorded */
	struct ovs_snapshot *snaps;	/* oldest first */
	size_t nsnaps;
};

/*
 * Parse the text of a registry file.  where names the file in messages:
 * "registry <where> line N: <what>" with -EUCLEAN.  On failure *reg is
 * left empty.
 */
int ovs_registry_parse(const char *where, const char *text, size_t len,
		       struct ovs_registry *reg);
/* Format reg; *text is malloc'ed, NUL-terminated, *len without the NUL. */
int ovs_registry_format(const struct ovs_registry *reg, char **text, size_t *len);
void ovs_registry_clear(struct ovs_registry *reg);
/* Deep copy (for a mutation that may fail half way). */
int ovs_registry_copy(struct ovs_registry *dst, const struct ovs_registry *src);
/* Write reg to dirfd/registry atomically and durably. */
int ovs_registry_store(int dirfd, const char *where, const struct ovs_registry *reg);
/* Crash tests of a take: called by ovs_registry_add_snapshot once the new
 * layer's directories exist, before the registry names them (NULL: no
 * hook; only ovsnapd sets it, under OVSNAPD_TEST_HOOKS=1). */
extern void (*ovs_test_hook_layer_made)(void);

/* ---- volumes ------------------------------------------------------------ */

struct ovs_volume {
	int refcount;
	char *source;		/* realpath of SRC */
	char *store;		/* this volume's folder in the store */
	char *socket;		/* control socket path */
	int dirfd;		/* O_DIRECTORY fd of store, -1 when missing */
	int lockfd;		/* held lock, -1 when not locked */
	/* Set by ovs_volume_list for an index entry it could not open
	 * ("store missing", the registry's error...); NULL when fine. */
	char *problem;
	bool store_missing;	/* ... and that problem is "store missing" */
	/* Set by ovs_volume_create when it made the store root itself: a
	 * failed setup removes only what it made. */
	bool created_storeroot;
	struct ovs_registry reg;
};

/* 1 when the index names v's store folder, 0 when it has no entry for
 * v (a setup that failed or crashed half way: found through the default
 * store only), -errno.  ovs_volume_reindex writes the entry. */
int ovs_volume_indexed(const struct ovs_volume *v);
int ovs_volume_reindex(const struct ovs_volume *v);
/*
 * Forgetting a volume (ovsnap forget), in steps a re-run after a crash
 * finishes.  ovs_volume_open_remains: src's volume as far as it is left
 * (the store folder may be gone, its registry unreadable: problem set;
 * dirfd -1 when the folder is gone), -ENOENT when nothing is.  Then, the
 * lock held and the daemon stopped: forget_layers records the intent
 * "forget" and removes the layers and all but registry, intent and lock
 * (step, if not NULL, runs after each durable step: a test hook);
 * forget_store removes the emptied folder (and an empty default store
 * root); unindex removes the index entry naming v's store.
 */
int ovs_volume_open_remains(const char *src, struct ovs_volume **out);
int ovs_volume_forget_layers(struct ovs_volume *v, void (*step)(void));
int ovs_volume_forget_store(struct ovs_volume *v);
int ovs_volume_unindex(struct ovs_volume *v);
/* The marker of a forget under way (lib/volume.c): forget_layers writes
 * it with the intent, and again once only registry, intent and lock are
 * left; unmark after the unindex.  marked: OVS_FORGET_BEGUN or OVS_FORGET_REMOVED for a
 * marker of v's store folder, 0 when there is none (or it names another),
 * -errno. */
enum { OVS_FORGET_BEGUN = 1, OVS_FORGET_REMOVED = 2 };
int ovs_volume_forget_marked(const struct ovs_volume *v);
int ovs_volume_forget_unmark(const struct ovs_volume *v);
/*
 * Syslog (LOG_DAEMON) what changed volume v, as "volume=SRC " + fmt
 * (lib/log.c).  The ident is "ovsnap" unless ovs_log_open() named
 * another first (ovsnapd: its own lines and these then share it).
 */
void ovs_log_open(const char *ident);
/* The mount id of what fd is on (fdinfo's mnt_id), or -1 (lib/util.c). */
long ovs_fd_mnt_id(int fd);
/* The absolute path of what fd is open on, as the kernel names it (no
 * lookup again), malloc'ed; NULL when there is none (lib/util.c). */
char *ovs_fd_path(int fd);
/* "-N" with digits only: a snapshot reference such as -1, an argument
 * rather than an option (lib/util.c). */
bool ovs_negative_number(const char *arg);

/* A new file no name leads to, read-write, in dir's filesystem (O_TMPFILE;
 * where that is not supported, tmpfile() in /tmp): spools that must not
 * live in memory, gone with the last fd even after a crash.  fd or -errno. */
int ovs_unlinked_tmpfile(const char *dir);

/* A share of the open file limit for fds a walk or a cache keeps open:
 * a quarter of the soft RLIMIT_NOFILE, at most max (max too when there
 * is no limit), so the rest is left to what the process opens besides. */
size_t ovs_nofile_quarter(size_t max);

/* A scratch file: an unlinked one in /tmp, or a memory file (memfd
 * named name) where /tmp cannot take one; *in_memory says which, and
 * once true goes straight to memory.  fd or -errno. */
int ovs_scratch_file(const char *name, bool *in_memory);

/* pwrite() all of buf at off (a short write is continued), or write() it
 * at the file's offset if off < 0: 0 or -errno. */
int ovs_pwrite_all(int fd, const void *buf, size_t len, off_t off);
void ovs_log(const struct ovs_volume *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Why a listed volume cannot be used (NULL when it can). */
const char *ovs_volume_problem(const struct ovs_volume *v);
/* The directory fd of the volume's store folder. */
int ovs_volume_dirfd(const struct ovs_volume *v);
/* Last time protection was switched off (ns), 0 if never. */
int64_t ovs_volume_deactivated_ns(const struct ovs_volume *v);
/*
 * Remove layers/<id> (upper and work) of a snapshot that is no longer in
 * the registry.  ovs_registry_remove_snapshot calls it after the registry
 * no longer names the layer; merge may call it for its own leftovers.
 */
int ovs_layer_remove(struct ovs_volume *v, uint64_t id);

/* Record "<pid> <what>\n" in a held lock file (the daemon does this when
 * it receives the lock fd from the CLI). */
int ovs_lock_note(int lockfd, const char *what);

/* ---- trust: the store and the state directory (DESIGN.md rule 20) ------ */

/*
 * Open the directory path (O_RDONLY) after checking it and every directory
 * above it, by fd from "/" down: each must be owned by root and not
 * writable by group or others, unless it is a parent and sticky (/tmp);
 * symlinks are followed only from directories that passed.  -EPERM with
 * "<what> is unsafe: <dir> is <why>" otherwise (what: "store /x").  With
 * OVS_SAFE_PARENT, path itself is held to the parents' rule (it is where
 * a store will be made).  Returns the fd.
 */
#define OVS_SAFE_PARENT	1u
int ovs_safe_dir_open(const char *path, const char *what, unsigned flags);
/* The same for the directory name below the checked directory dirfd (no
 * symlink followed).  Returns the fd. */
int ovs_safe_dir_at(int dirfd, const char *name, const char *what);
/*
 * The run directory held to the store's rule: its control sockets tell
 * the CLI which daemon serves a volume, its pid files which daemon serves a
 * view, and root's daemons write their logs there; a user who could plant
 * them there would answer for ovsnap.  0, or -errno with the error set
 * (-EPERM: unsafe, -ENOENT: missing).
 */
int ovs_run_dir_check(unsigned flags);
/* openat2 of rel below dirfd without following symlinks, leaving dirfd's
 * tree or crossing a mount (O_CLOEXEC added), by ovs_open_beneath (lib/walk.c:
 * a rel of any length).  Opens only: O_CREAT and O_TMPFILE are -EINVAL
 * (mode is for them).  The fd, or -errno (-ELOOP, -EXDEV for what it
 * refuses); sets no message. */
int ovs_store_open_beneath(int dirfd, const char *rel, int flags, mode_t mode);
/* layers/<id>/upper and layers/<id>/work of the volume's store, opened
 * from its fd through ovs_store_open_beneath (flags: O_RDONLY, O_PATH,
 * O_NOATIME...; O_DIRECTORY added).  The fd, or -errno with a message. */
int ovs_snapshot_open_upper(const struct ovs_volume *v, uint64_t id, int flags);
int ovs_snapshot_open_work(const struct ovs_volume *v, uint64_t id, int flags);
struct ovs_layer;
/* ovs_layer_open() on the layer of snapshot id, opened as above. */
int ovs_snapshot_layer_open(const struct ovs_volume *v, uint64_t id, int srcfd,
			    unsigned flags, struct ovs_layer **out);

/* ---- mounts (libmount) and filesystem identity (libblkid) -------------- */

struct ovs_mountinfo {
	char *target;		/* mount point */
	char *source;		/* device (or "none") */
	char *fstype;
	char *fsroot;		/* root of the mount inside its fs (bind mounts) */
	dev_t devno;
	bool nosuid, nodev, noexec, readonly;
};

#define OVS_FUSE_FSTYPE "fuse.ovsnap"

struct libmnt_table;
/* The current mount table (libmount); mnt_unref_table() it. */
int ovs_mount_table_load(struct libmnt_table **out);
/* 1 if a mount of the filesystem devno is in this namespace's table, 0 if
 * none is (any more), -errno (with the error set) if the table cannot be
 * read. */
int ovs_mount_devno_mounted(dev_t devno);
struct libmnt_iter;
/* The same with an iterator over it (MNT_ITER_FORWARD or _BACKWARD);
 * mnt_free_iter() and mnt_unref_table() them. */
int ovs_mount_table_iter(struct libmnt_table **tb, struct libmnt_iter **itr, int direction);
/* SRC's real directory (O_RDONLY), also while ovsnap's snapshot mount,
 * alive or dead, covers it: the mount SRC lives on is cloned without its
 * submounts (open_tree) and SRC opened inside the clone, no symlink
 * followed.  The fd, or -errno with a message. */
int ovs_open_real_source(const char *src);
/* Detach the top mount at target (umount -l), through libmount. */
int ovs_umount_lazy(const char *target);

/*
 * The mount holding path.  When path itself is covered by ovsnap's own
 * FUSE mount, the filesystem underneath it is returned: that is where SRC
 * really lives.  -ENOENT if no mount holds it (no /proc?).
 */
int ovs_mount_find(const char *path, struct ovs_mountinfo *mi);
void ovs_mountinfo_clear(struct ovs_mountinfo *mi);
/* Mount points strictly below path (mounts over path itself excluded). */
int ovs_mounts_below(const char *path, char ***targets, size_t *n);
void ovs_strv_free(char **v, size_t n);
/* 1 if path is a mount point (fstype of the top mount copied), 0 if not. */
int ovs_is_mountpoint(const char *path, char *fstype, size_t len);
/* nosuid/nodev/noexec of the mount holding path (MS_* bits). */
int ovs_mount_flags(const char *path, unsigned long *flags);
/* UUID of the filesystem of mi (libblkid), else "fsid-<statfs f_fsid>". */
int ovs_fs_uuid(const struct ovs_mountinfo *mi, const char *path, char *buf, size_t len);
/* xfs, ext4, btrfs (and ext2/ext3): filesystems that can hold upper layers. */
bool ovs_fstype_supported(const char *fstype);
#define OVS_SUPPORTED_FS "xfs, ext4, btrfs"

/* ---- setup checks (lib/setup-checks.c) ------------------------------------ */

/*
 * -EBUSY naming the other volume when src (or store, a store folder, may
 * be NULL) lies inside, or holds, the source or store of another
 * registered volume, active or not (DESIGN.md rule 17).  The volume whose
 * store folder is self_store (NULL: none) is the one being checked.
 */
int ovs_check_nesting(const char *src, const char *store, const char *self_store);
/* 1 and *where (malloc'ed, relative) when a directory below dirfd lies
 * on another device (a btrfs subvolume, or a mount point), 0 if none. */
int ovs_find_other_fs(int dirfd, char **where);
/* <run dir>/detached-PID.sock: where a daemon stopped with "stop lazy"
 * answers while its detached snapshot mount still has users. */
int ovs_detached_socket(pid_t pid, char *buf, size_t len);

/* ---- helpers ------------------------------------------------------------- */

/*
 * The name of an absolute path as one folder name: leading '/' dropped,
 * '/' -> '-', bytes other than [A-Za-z0-9_.] (and a leading '.') -> %XX;
 * "/" itself is "-".  No '\\', ':' or ',', which overlayfs would read
 * as escapes or separators in lowerdir=.  -ENAMETOOLONG if it does not fit.
 */
int ovs_path_escape(const char *path, char *buf, size_t len);
int ovs_path_unescape(const char *name, char *buf, size_t len);
/* 1 if path equals dir or lies below it (both canonical), else 0. */
int ovs_path_inside(const char *path, const char *dir);
/* Read a whole (small) file at dirfd/name; *buf is NUL-terminated. */
int ovs_read_file_at(int dirfd, const char *name, char **buf, size_t *len, size_t max);
/* rm -rf dirfd/name, without following symlinks or crossing mounts. */
int ovs_remove_tree_at(int dirfd, const char *name);
/* Strict unsigned decimal: digits only, no sign, no overflow. */
int ovs_parse_u64(const char *s, uint64_t *out);
/* Milliseconds of the monotonic clock, for timeouts. */
int64_t ovs_mono_ms(void);

#endif
