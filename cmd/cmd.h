/*
 * The ovsnap CLI: one file and one cmd_NAME() per subcommand, dispatched
 * from the single table in ovsnap.c.  A command returns its exit status.
 */
#ifndef OVSNAP_CMD_H
#define OVSNAP_CMD_H

#include <popt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "libovsnap.h"

enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,
	EXIT_USAGE = 2,
	/* ovsnap status: the worst volume named is deactivated / broken */
	EXIT_DEACTIVATED = 3,
	EXIT_BROKEN = 4,
};

enum cmd_flags {
	CMD_NEEDS_ROOT = 1 << 0,
	CMD_HIDDEN = 1 << 1,
	/* a user named in a volume's settings may run it through
	 * ovsnap-delegate (ovsnap.conf(5) DELEGATION) */
	CMD_DELEGABLE = 1 << 2,
};

struct cmd_struct {
	const char *name;
	int (*fn)(int argc, const char **argv);
	const char *summary;	/* one line, shown by ovsnap --help */
	unsigned flags;
};

extern const struct cmd_struct ovs_commands[];
extern const char *ovs_progname;

/* Options every subcommand takes (POPT_ARG_INCLUDE_TABLE it). */
extern struct poptOption ovs_common_options[];
/* --help and --usage; like POPT_AUTOHELP, but the help ends with the
 * "See ovsnap-CMD(8)" line and goes through the protected stdout. */
extern struct poptOption ovs_help_options[];
#define OVS_POPT_AUTOHELP \
	{ NULL, 0, POPT_ARG_INCLUDE_TABLE, ovs_common_options, 0, "Common options:", NULL }, \
	{ NULL, 0, POPT_ARG_INCLUDE_TABLE, ovs_help_options, 0, "Help options:", NULL },
enum { OVS_OPT_HELP = 0x4000, OVS_OPT_USAGE };
/*
 * A short option kept for one release after its letter got another
 * meaning elsewhere: a hidden table entry with the old letter, the same
 * arg, val OVS_OPT_DEPRECATED + n (n < 16, unique in the table) and the
 * replacement in descrip; ovs_popt_parse prints a one-line note.
 */
#define OVS_OPT_DEPRECATED 0x4100
extern int ovs_opt_quiet;

/* "ovsnap: take /srv/x: not a directory" on stderr. */
void ovs_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, ending with ": " + ovs_last_error() (or strerror(-err)). */
void ovs_error_lib(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Parse argv with the command's popt table.  Returns a context positioned
 * after the options, or NULL with *status set (usage error, or --help
 * printed with status 0).  The caller poptFreeContext()s it.
 */
poptContext ovs_popt_parse(const char *cmd, int argc, const char **argv,
			   const struct poptOption *table, const char *args_help,
			   int *status);
/* The remaining arguments; exactly min..max of them or a usage error. */
const char **ovs_popt_args(poptContext pc, const char *cmd, int min, int max,
			   int *nargs, int *status);

/* Conflicting options, declared as data (util-linux optutils.h style):
 * each row lists option names that may not be given together. */
struct ovs_excl {
	const char *opts[4];
};
/* given[i] != 0 when opts i of a row was given; returns 0 or EXIT_USAGE
 * after printing the conflict. */
int ovs_check_exclusive(const char *cmd, const struct ovs_excl *rows,
			const char *const *names, const int *given, size_t n);

/* Turn a SRC argument into an absolute, canonical directory path (also
 * when a dead daemon's mount covers it).  Prints the error and returns
 * NULL on failure. */
char *ovs_resolve_source(const char *cmd, const char *arg);

/* Run by ovsnap-delegate for a user: that user's uid, else -1.  Only
 * root's own process (the helper scrubs the caller's environment) sees
 * OVSNAP_DELEGATED_UID at all. */
long ovs_delegated_uid(void);

/* s on f, every byte that is not printable ASCII nor part of valid UTF-8
 * shown as it is as \ooo octal: control characters (C0, DEL, C1), the
 * bidirectional marks and overrides, bytes of no valid UTF-8, and with
 * backslash set '\' too. */
void ovs_put_shown(FILE *f, const char *s, bool backslash);
/* A JSON string on stdout, with the escapes RFC 8259 requires. */
void ovs_json_string(const char *s);
/* {"id": N, "name": "NAME"} (name null when none), for drop and merge
 * --json (ovsnap(8) JSON OUTPUT). */
void ovs_json_snapshot_ref(uint64_t id, const char *name);

/* "not implemented yet" for commands whose issue has not landed. */
int ovs_not_built(const char *cmd);

/*
 * Start prog (argv[0] its name) detached: setsid, stdin/stdout on
 * /dev/null, stderr appended to log, fd 3 a pipe on which it answers "ok"
 * once ready or "err MESSAGE".  Returns its pid, or -errno with a message.
 */
/* >= 0: ovs_spawn_ready() hands this fd to the child as its fd 4 */
extern int ovs_spawn_pass_fd;
pid_t ovs_spawn_ready(const char *prog, char *const argv[], const char *log, int timeout_ms);
/* The program name: $envvar if set, else the one next to this binary (a
 * build tree), else the installed one in SBINDIR. */
const char *ovs_helper_path(const char *name, const char *envvar);
/* Create ovs_run_dir() (0700) and its parents. */
int ovs_mkdir_run_dir(void);

/* The volume's snapshot-mount daemon (cmd/daemon-client.c). */
int ovs_daemon_status(struct ovs_volume *v, char *reply, size_t len);
/* A daemon's answer to "status" ("ok pid=P layer=L ... open=N ...
 * fusedev=MAJ:MIN src=SRC"; ovsnapd(8)), parsed: the one reader of it. */
struct ovs_daemon_state {
	pid_t pid;
	bool has_layer, has_open, has_fusedev;
	uint64_t layer;
	uint64_t open;		/* files open through the snapshot mount */
	dev_t fusedev;		/* its FUSE connection's device; 0:0 unknown */
	const char *src;	/* in the reply (last: may hold blanks), or NULL */
};
/* 0, or -EPROTO (with the error set) for an answer without a pid. */
int ovs_daemon_state_parse(const char *reply, struct ovs_daemon_state *st);
bool ovs_daemon_running(struct ovs_volume *v);
/* Start ovsnapd for v and wait until it has mounted over SRC. */
int ovs_daemon_start(struct ovs_volume *v);
/* Stop the daemon; unless lazy, return only once it has exited (closed
 * every fd on the filesystem), within a bound.  -errno when it did not
 * stop; 1 (the reason in ovs_last_error()) when it stopped serving SRC
 * but had not exited within the bound. */
int ovs_daemon_stop(struct ovs_volume *v, bool lazy);
/* The running daemon's pid, from its status answer, or -errno. */
pid_t ovs_daemon_pid(struct ovs_volume *v);
/* Ask the daemon for a snapshot; the held volume lock goes along. */
int ovs_daemon_take(struct ovs_volume *v, const char *name, uint64_t *id);
/* Fold the active (newest) snapshot while the volume stays online: merge
 * snapshots (older, newer] into older, or drop the newest (into the one
 * before it; the only one: the daemon then preserves nothing until the
 * next take).  The daemon does it under its barrier; the held volume lock
 * goes along.  Reload the registry afterwards. */
int ovs_daemon_merge_active(struct ovs_volume *v, uint64_t older, uint64_t newer);
int ovs_daemon_drop_active(struct ovs_volume *v, uint64_t id);
/* Whether src is the mount of a dead daemon (ENOTCONN). */
bool ovs_mount_dead(const char *src);
/* Lazily unmount the mount of a dead daemon at src: 1 if there was one,
 * 0 if not. */
int ovs_umount_dead(const char *src);
/* Start the daemon of a locked, loaded volume and mark it active. */
int ovs_activate_locked(const char *cmd, struct ovs_volume *v, bool force);
/* Stop the daemon of a locked, loaded volume and record it inactive
 * (ovsnap deactivate; forget).  EXIT_OK, or EXIT_FAIL after one line. */
int ovs_deactivate_locked(struct ovs_volume *v);
/* "PID (COMM), ..." for the processes that use the filesystem mounted at
 * path (cmd/busy.c); "" when none are found. */
void ovs_mount_users_text(const char *path, char *buf, size_t len);
/* EXIT_OK, or EXIT_FAIL after naming the processes that use src. */
int ovs_check_no_users(const char *cmd, const char *src);
/* cmd/setup-guard.c, each EXIT_OK or EXIT_FAIL after one line: users of
 * a snapshot mount of v that deactivate --lazy detached (take: refused
 * always; activation: unless force); a --kernel view of v; and all an
 * activation refuses (nested volumes, mounts in SRC, those two). */
int ovs_check_detached(const char *cmd, struct ovs_volume *v, bool take, bool force);
int ovs_check_kernel_views(const char *cmd, struct ovs_volume *v);
int ovs_check_activation(const char *cmd, struct ovs_volume *v, bool force);

/* Lock an open volume, load its registry and finish an interrupted merge
 * or drop (cmd/common.c).  EXIT_OK, or EXIT_FAIL after printing the error
 * (the lock is not held then). */
int ovs_lock_loaded(const char *cmd, struct ovs_volume *v, bool wait);
/* The same for the SRC argument of a command: resolve, open, lock. */
int ovs_open_locked(const char *cmd, const char *arg, bool wait, struct ovs_volume **v);
/* Progress of a long merge on stderr (a terminal, not --quiet). */
struct ovs_progress {
	const char *what;
	int64_t start_ns;
	bool shown;
};
void ovs_progress_show(void *arg, uint64_t done, uint64_t total);
void ovs_progress_end(struct ovs_progress *p);

/* Drop what the retention policy spec does not keep (cmd/drop.c); the
 * volume is locked and loaded.  explain/dry_run print the verdicts. */
int ovs_drop_by_policy(struct ovs_volume *v, const char *spec, enum ovs_snap_class cls,
		       bool explain, bool dry_run);

/*
 * An unlinked file to spool a long list of changes in, not memory (issue
 * 13: a million changes must not be held): in /tmp, or with *in_memory
 * set (or where /tmp cannot have one) a memory file named name (memfd).
 * An O_RDWR fd, or -errno with the error set (cmd/common.c).
 */
int ovs_spool_file(const char *name, bool *in_memory);
/* A write to a spool in /tmp failed with err because /tmp cannot hold
 * it (read only, full, over quota): memory can. */
bool ovs_spool_tmp_full(int err);

/* Free what a POPT_ARG_ARGV option collected. */
void ovs_free_argv(const char **argv);

/* "snapshot 3" or "snapshot 3 (before-upgrade)", for messages. */
void ovs_snapshot_label(const struct ovs_snapshot *s, char *buf, size_t len);

/* Options that set what a snapshot records (take, modify): --description,
 * --userdata (repeatable), checked and turned into a change.  EXIT_OK, or
 * EXIT_USAGE after one line. */
int ovs_snap_change_from_options(const char *cmd, const char *description,
				 const char **userdata, struct ovs_snap_change *change,
				 struct ovs_userdata **ud_out);

/* Whether a volume is protected right now (cmd/status.c); list shows it
 * too. */
enum ovs_health_state {
	OVS_HEALTH_PROTECTED,	/* active, its daemon serves SRC */
	OVS_HEALTH_DEACTIVATED,	/* switched off on purpose */
	OVS_HEALTH_BROKEN,	/* active, but changes may escape the snapshots */
	OVS_HEALTH_UNKNOWN,	/* the daemon cannot be asked (not root) */
};
struct ovs_health {
	enum ovs_health_state state;
	bool daemon;		/* it answered: pid, layer, open are set */
	long pid;
	uint64_t layer;
	bool has_open;
	uint64_t open;		/* handles open through the snapshot mount */
	const struct ovs_snapshot *last_take;	/* NULL: none */
	char problem[512];	/* why not protected, "" when it is */
	char action[1024];	/* what to do about it, "" when nothing */
};
void ovs_volume_health(struct ovs_volume *v, struct ovs_health *h);
const char *ovs_health_name(enum ovs_health_state s);

/* Subcommands. */
int cmd_take(int argc, const char **argv);
int cmd_list(int argc, const char **argv);
int cmd_mount(int argc, const char **argv);
int cmd_umount(int argc, const char **argv);
int cmd_merge(int argc, const char **argv);
int cmd_drop(int argc, const char **argv);
int cmd_fsck(int argc, const char **argv);
int cmd_activate(int argc, const char **argv);
int cmd_deactivate(int argc, const char **argv);
int cmd_status(int argc, const char **argv);
int cmd_diff(int argc, const char **argv);
int cmd_restore(int argc, const char **argv);
int cmd_rollback(int argc, const char **argv);
int cmd_hold(int argc, const char **argv);
int cmd_release(int argc, const char **argv);
int cmd_modify(int argc, const char **argv);
int cmd_run(int argc, const char **argv);
int cmd_config(int argc, const char **argv);
int cmd_forget(int argc, const char **argv);
int cmd_help(int argc, const char **argv);

#endif
