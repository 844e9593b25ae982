/*
 * ovsnap-delegate — the privileged path of delegation (ovsnap-delegate(8),
 * ovsnap.conf(5) ALLOW_USERS/ALLOW_GROUPS; issue 14 item 7).
 *
 * Installed setuid root, like fusermount3.  `ovsnap list|diff|take|mount|
 * umount` run by a user re-executes through it.  It trusts nothing of the
 * caller but the real uid and groups the kernel gave it: the environment
 * is dropped (no OVSNAP_* paths, no LD_*), stray fds are closed, the
 * argument vector is checked against a fixed table of what a user may ask,
 * paths are resolved with the caller's own rights, the volume's settings
 * file is read from the compiled-in directory, and only then does it run
 * the ovsnap CLI as root, with OVSNAP_DELEGATED_UID telling the CLI for
 * whom it acts (mount records the view's owner, umount checks it).  The
 * store stays root's (DESIGN.md rule 20); views grant what the real
 * filesystem grants (rule 19: the view daemon mounts with
 * default_permissions).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf.h"
#include "libovsnap.h"
#include "ovsnap-private.h"

#ifndef SBINDIR
#define SBINDIR "/usr/sbin"
#endif

/* The fd a mount's TARGET is handed to the CLI on. */
#define TARGET_FD 3

struct deleg_opt {
	const char *name;	/* the long name, "--json" */
	char shortname;		/* 'J', or 0 */
	bool value;		/* takes the next word (or =VALUE) */
};

struct deleg_cmd {
	const char *name;
	int min, max;		/* positional arguments */
	bool needs_volume;	/* the first one is SRC, checked against its settings */
	const struct deleg_opt *opts;
};

#define QUIET_OPT { "--quiet", 'q', false }
static const struct deleg_opt list_opts[] = {
	{ "--json", 'J', false }, { "--no-headings", 'H', false }, { "--parsable", 'p', false },
	QUIET_OPT, { NULL, 0, false }
};
static const struct deleg_opt diff_opts[] = {
	{ "--json", 'J', false }, { "--wait", 'w', false }, QUIET_OPT, { NULL, 0, false }
};
/* Not --keep, --class, --hold, --pre/--post, --timer, --store, --force:
 * those prune, pin or set up, which stays root's. */
static const struct deleg_opt take_opts[] = {
	{ "--description", 'd', true }, { "--userdata", 'u', true }, { "--name", 'n', true },
	{ "--json", 'J', false }, { "--wait", 'w', false }, { "--no-wait", 0, false },
	QUIET_OPT, { NULL, 0, false }
};
/* -o is checked on its own: never suid or dev. */
static const struct deleg_opt mount_opts[] = {
	{ "--options", 'o', true }, QUIET_OPT, { NULL, 0, false }
};
static const struct deleg_opt umount_opts[] = {
	{ "--lazy", 'l', false }, QUIET_OPT, { NULL, 0, false }
};

static const struct deleg_cmd deleg_cmds[] = {
	{ "list", 1, 1, true, list_opts },
	{ "diff", 2, 3, true, diff_opts },
	{ "take", 1, 1, true, take_opts },
	{ "mount", 3, 3, true, mount_opts },
	{ "umount", 1, 1, false, umount_opts },
	{ NULL, 0, 0, false, NULL }
};

/* Keys a trusted ovsnap-delegate.env may set (see trusted_env()). */
static const char *const env_keys[] = {
	"OVSNAP_STATE_DIR", "OVSNAP_RUN_DIR", "OVSNAP_CONF_DIR", "OVSNAP_DAEMON_START", NULL
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("ovsnap: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* 0, 1, 2 open (on /dev/null if the caller closed them, so that nothing we
 * open lands there), everything else closed. */
static void sanitize_fds(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) < 0) {
			int n = open("/dev/null", O_RDWR);

			if (n < 0 || (n != fd && (dup2(n, fd) < 0 || close(n) < 0)))
				exit(1);
		}
	}
	close_range(3, ~0U, 0);
}

/* A file root alone can change: root's, not writable by group or others,
 * in a directory of the same kind (the whole chain above is left to the
 * admin, as for any setuid program's siblings). */
static bool root_only(const char *path, bool dir)
{
	struct stat st;

	return lstat(path, &st) == 0 && st.st_uid == 0 && !(st.st_mode & 022) &&
	       (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

/*
 * The directory this program was run from, if it is root's own: then the
 * ovsnap next to it is the one to run (a build or test install keeps its
 * programs together), and an ovsnap-delegate.env there may set where the
 * state, run and settings directories are.  Whoever can write there can
 * replace the programs themselves, so this trusts no one new.
 */
static bool trusted_dir(char *dir, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", dir, len - 1);
	char *slash;

	if (n <= 0)
		return false;
	dir[n] = 0;
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return false;
	*slash = 0;
	return root_only(dir, true);
}

static void trusted_env(const char *dir)
{
	char path[PATH_MAX], line[PATH_MAX + 64];
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/ovsnap-delegate.env", dir) >= (int)sizeof(path) ||
	    !root_only(path, false))
		return;
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *eq = strchr(line, '=');

		line[strcspn(line, "\n")] = 0;
		if (!eq)
			continue;
		*eq = 0;
		for (const char *const *k = env_keys; *k; k++)
			if (strcmp(*k, line) == 0 &&
			    (eq[1] == '/' || strcmp(line, "OVSNAP_DAEMON_START") == 0))
				setenv(line, eq + 1, 1);
	}
	fclose(f);
}

static bool in_list(char **names, const char *name)
{
	for (char **p = names; p && *p; p++)
		if (strcmp(*p, name) == 0)
			return true;
	return false;
}

/* Whether the settings of src name the caller or one of its groups. */
static bool allowed(const struct ovs_conf *c, uid_t uid)
{
	struct passwd *pw = getpwuid(uid);
	gid_t groups[NGROUPS_MAX + 1];
	int n;

	if (pw && in_list(c->allow_users, pw->pw_name))
		return true;
	if (!c->allow_groups)
		return false;
	n = getgroups(NGROUPS_MAX, groups);
	if (n < 0)
		return false;
	groups[n++] = getgid();
	for (int i = 0; i < n; i++) {
		struct group *gr = getgrgid(groups[i]);

		if (gr && in_list(c->allow_groups, gr->gr_name))
			return true;
	}
	return false;
}

/* mount -o: only what takes no right away from the real filesystem. */
static bool safe_mount_options(const char *opts)
{
	static const char *const ok[] = { "ro", "nosuid", "nodev", "noexec", "noatime",
					  "relatime", "strictatime", "nodiratime", NULL };
	char *dup = strdup(opts), *save = NULL;
	bool good = dup != NULL;

	for (char *o = dup ? strtok_r(dup, ",", &save) : NULL; good && o;
	     o = strtok_r(NULL, ",", &save)) {
		const char *const *k;

		for (k = ok; *k && strcmp(*k, o) != 0; k++)
			;
		good = *k != NULL;
	}
	free(dup);
	return good;
}

/* The option arg names ("--name", "--name=VALUE", "-n"), or NULL. */
static const struct deleg_opt *find_opt(const struct deleg_opt *opts, const char *arg,
					const char **inline_value)
{
	size_t n = strcspn(arg, "=");

	*inline_value = NULL;
	for (const struct deleg_opt *o = opts; o->name; o++) {
		if (strcmp(o->name, arg) == 0 ||
		    (o->shortname && arg[1] == o->shortname && !arg[2]))
			return o;
		if (o->value && arg[1] == '-' && strlen(o->name) == n &&
		    strncmp(o->name, arg, n) == 0) {
			*inline_value = arg + n + 1;
			return o;
		}
	}
	return NULL;
}


/* A mount target's filesystem: ordinary disk filesystems and tmpfs only;
 * never proc, sysfs, cgroup, devpts (mounting over /proc/PID hides a
 * process), FUSE (views, ovsnapd's mount over SRC), overlay, ... */
static bool mountable_fs(int fd)
{
	static const unsigned long ok[] = {
		XFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, BTRFS_SUPER_MAGIC, TMPFS_MAGIC,
		F2FS_SUPER_MAGIC, 0
	};
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return false;
	for (const unsigned long *t = ok; *t; t++)
		if ((unsigned long)sf.f_type == *t)
			return true;
	return false;
}

/* Whether path is dir or lies below it. */
static bool path_within(const char *path, const char *dir)
{
	size_t n = dir ? strlen(dir) : 0;

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (!n)
		return false;
	return strncmp(path, dir, n) == 0 && (path[n] == 0 || path[n] == '/' ||
					      (n == 1 && dir[0] == '/'));
}

/* The registered volume whose SRC or store holds path, or NULL. */
static char *inside_volume(const char *path)
{
	struct ovs_volume **vols = NULL;
	size_t n = 0;
	char *hit = NULL;

	if (ovs_volume_list(&vols, &n) < 0)
		return strdup("?");	/* cannot tell: refuse */
	for (size_t i = 0; i < n && !hit; i++)
		if (path_within(path, ovs_volume_source(vols[i])) ||
		    path_within(path, ovs_volume_store(vols[i])))
			hit = strdup(ovs_volume_source(vols[i]));
	ovs_volume_list_free(vols, n);
	return hit;
}

/* Set a limit; where even root may not raise a hard limit (no
 * CAP_SYS_RESOURCE, as in some containers), the soft one up to it. */
static void raise_limit(int res, const struct rlimit *want)
{
	struct rlimit cur;

	if (setrlimit(res, want) == 0 || getrlimit(res, &cur) < 0)
		return;
	cur.rlim_cur = cur.rlim_max;
	setrlimit(res, &cur);
}

/* The limits root's work runs with, whatever the caller set (a tiny
 * RLIMIT_FSIZE or NOFILE must not make a take or its hooks fail half
 * way); no core dumps of root's memory. */
static void reset_limits(void)
{
	static const int unlimited[] = {
		RLIMIT_FSIZE, RLIMIT_CPU, RLIMIT_AS, RLIMIT_DATA, RLIMIT_RSS, RLIMIT_NPROC,
		RLIMIT_LOCKS, -1
	};
	struct rlimit core = { 0, 0 }, inf = { RLIM_INFINITY, RLIM_INFINITY };
	struct rlimit stack = { 8 << 20, RLIM_INFINITY }, nofile = { 1024, 1 << 20 };
	FILE *f = fopen("/proc/sys/fs/nr_open", "re");
	unsigned long nr;

	if (f) {
		if (fscanf(f, "%lu", &nr) == 1 && nr >= 1024)
			nofile.rlim_max = nr;
		fclose(f);
	}
	for (const int *r = unlimited; *r >= 0; r++)
		raise_limit(*r, &inf);
	setrlimit(RLIMIT_CORE, &core);
	raise_limit(RLIMIT_STACK, &stack);
	raise_limit(RLIMIT_NOFILE, &nofile);
}

/*
 * Root's work runs in a child out of the caller's session (setsid: no
 * Ctrl-C, Ctrl-Z or hangup of the caller's terminal reaches it, nor a
 * hook it runs, so a POST_HOOK is never skipped), in "/", with stdin
 * /dev/null and root's limits; its output comes through pipes that this
 * process, back to the caller's ids, relays.  Like fusermount3, the
 * caller can stop or kill only its own side.
 */
static void run_as_root(const char *prog, char **argv, uid_t uid, gid_t gid, bool target_fd)
{
	int outp[2], errp[2], status;
	struct pollfd pfd[2];
	pid_t pid;

	if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0)
		die("%s: %s", argv[1], strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("%s: fork: %s", argv[1], strerror(errno));
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (setsid() < 0 || chdir("/") < 0 || null < 0 || dup2(null, 0) < 0 ||
		    dup2(outp[1], 1) < 0 || dup2(errp[1], 2) < 0)
			_exit(127);
		if (null > 2)
			close(null);
		reset_limits();
		/* the caller's side may go away: EPIPE, not death half way */
		signal(SIGPIPE, SIG_IGN);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
			fprintf(stderr, "ovsnap: %s: cannot become root: %s\n", argv[1],
				strerror(errno));
			_exit(1);
		}
		execv(prog, argv);
		fprintf(stderr, "ovsnap: %s: cannot run %s: %s\n", argv[1], prog, strerror(errno));
		_exit(1);
	}
	close(outp[1]);
	close(errp[1]);
	if (target_fd)
		close(TARGET_FD);
	if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		_exit(1);
	pfd[0] = (struct pollfd){ .fd = outp[0], .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = errp[0], .events = POLLIN };
	while (pfd[0].fd >= 0 || pfd[1].fd >= 0) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			char buf[65536];
			ssize_t n;

			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			n = read(pfd[i].fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
				continue;
			}
			for (ssize_t off = 0; off < n;) {
				ssize_t w = write(i + 1, buf + off, n - off);

				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					break;
				off += w;
			}
		}
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			_exit(1);
	if (WIFEXITED(status))
		_exit(WEXITSTATUS(status));
	_exit(128 + WTERMSIG(status));
}

int main(int argc, char **argv)
{
	const struct deleg_cmd *cmd;
	char dir[PATH_MAX], ovsnap[PATH_MAX], uidstr[32], *src = NULL, *target = NULL;
	const char *pos[3];
	char **xargv;
	int npos = 0, xargc = 0;
	bool dashdash = false, trusted;
	uid_t uid = getuid();
	struct ovs_conf conf;
	int rc;

	sanitize_fds();
	/* Nothing of the caller's environment steers what runs as root. */
	clearenv();
	setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
	umask(022);
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("Usage: ovsnap-delegate list|diff|take|mount|umount ARGS...\n\n"
		       "Runs these ovsnap commands as root for the users a volume's\n"
		       "ALLOW_USERS and ALLOW_GROUPS name; ovsnap calls it for them.\n\n"
		       "See ovsnap-delegate(8).\n");
		return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
	}
	if (argc < 2)
		die("usage: ovsnap-delegate list|diff|take|mount|umount ARGS...");
	if (geteuid() != 0)
		die("ovsnap-delegate is not installed setuid root: users cannot be delegated to "
		    "(see ovsnap-delegate(8))");
	trusted = trusted_dir(dir, sizeof(dir));
	if (trusted)
		trusted_env(dir);
	for (cmd = deleg_cmds; cmd->name && strcmp(cmd->name, argv[1]) != 0; cmd++)
		;
	if (!cmd->name)
		die("%s: permission denied (only root may)", argv[1]);

	/* The fixed argument vector: known options only, then the arguments. */
	xargv = calloc(argc + 4, sizeof(*xargv));
	if (!xargv)
		die("%s: out of memory", cmd->name);
	xargv[xargc++] = "ovsnap";
	xargv[xargc++] = (char *)cmd->name;
	for (int i = 2; i < argc; i++) {
		const struct deleg_opt *o;
		const char *value;

		if (dashdash || argv[i][0] != '-' || ovs_negative_number(argv[i]) || !argv[i][1]) {
			if (npos == cmd->max)
				die("%s: too many arguments", cmd->name);
			pos[npos++] = argv[i];
			continue;
		}
		if (strcmp(argv[i], "--") == 0) {
			dashdash = true;
			continue;
		}
		o = find_opt(cmd->opts, argv[i], &value);
		/* (what follows it cannot be told apart any more) */
		if (!o)
			die("%s: %s: permission denied (only root may give this option)",
			    cmd->name, argv[i]);
		if (o->value && !value) {
			if (i + 1 >= argc)
				die("%s: %s: missing argument", cmd->name, argv[i]);
			value = argv[++i];
		}
		if (o->value && strcmp(o->name, "--options") == 0 && !safe_mount_options(value))
			die("mount: -o %s: permission denied (users may give ro, nosuid, nodev, "
			    "noexec and atime options only)", value);
		/* Passed on as --name=VALUE: a VALUE that looks like an option
		 * stays a value. */
		if (o->value) {
			if (asprintf(&xargv[xargc++], "%s=%s", o->name, value) < 0)
				die("%s: out of memory", cmd->name);
		} else {
			xargv[xargc++] = (char *)o->name;
		}
	}
	if (npos < cmd->min)
		die("%s: missing argument (Try 'ovsnap %s --help')", cmd->name, cmd->name);

	/* Paths as the caller sees them: resolved with the caller's rights. */
	if (seteuid(uid) < 0)
		die("%s: cannot drop privileges: %s", cmd->name, strerror(errno));
	if (cmd->needs_volume) {
		struct stat sst;
		char id[64];
		int fd;

		/*
		 * The directory checked is the one the command acts on: its
		 * path and its identity come from one lookup (an fd), and the
		 * CLI, as root, resolves the path again and refuses anything
		 * but that directory.  A user who owns a folder above it could
		 * otherwise swap that folder for a symlink in between, and
		 * have root take, mount or diff a volume they were never
		 * given.
		 */
		fd = open(pos[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			die("%s %s: %s", cmd->name, pos[0], strerror(errno));
		src = ovs_fd_path(fd);
		if (!src)
			die("%s %s: cannot tell its path", cmd->name, pos[0]);
		if (fstat(fd, &sst) < 0)
			die("%s %s: %s", cmd->name, pos[0], strerror(errno));
		close(fd);
		snprintf(id, sizeof(id), "%ju:%ju", (uintmax_t)sst.st_dev, (uintmax_t)sst.st_ino);
		setenv("OVSNAP_DELEGATED_SRC_ID", id, 1);
	}
	if (strcmp(cmd->name, "mount") == 0) {
		struct stat st;
		int fd;

		/*
		 * The very directory checked is the one mounted on, by fd (the
		 * CLI hands /proc/self/fd/N to the view daemon), so no rename
		 * or symlink swapped in after this check moves the view
		 * elsewhere.  It must be the caller's and no symlink.
		 */
		fd = open(pos[2], O_PATH | O_NOFOLLOW | O_DIRECTORY);
		if (fd < 0)
			die("mount: %s: %s", pos[2], errno == ENOTDIR || errno == ELOOP ?
			    "permission denied (not a directory, or a symlink)" : strerror(errno));
		if (fstat(fd, &st) < 0)
			die("mount: %s: %s", pos[2], strerror(errno));
		if (st.st_uid != uid)
			die("mount: %s: permission denied (not a directory of yours)", pos[2]);
		if (!mountable_fs(fd))
			die("mount: %s: permission denied (users may mount views on disk "
			    "filesystems and tmpfs only; not on proc, sysfs, FUSE, views, ...)",
			    pos[2]);
		target = ovs_fd_path(fd);
		if (!target)
			die("mount: %s: cannot tell its path", pos[2]);
		if (fd != TARGET_FD && (dup2(fd, TARGET_FD) < 0 || close(fd) < 0))
			die("mount: %s", strerror(errno));
	} else if (strcmp(cmd->name, "umount") == 0) {
		struct stat st;
		long id, pid_;
		int fd, up;

		/*
		 * Opened once, here, as the caller: the CLI unmounts the very
		 * mount this fd is the root of (by its mount id), whatever a
		 * rename or symlink swap does to the path afterwards.
		 */
		fd = open(pos[0], O_PATH | O_NOFOLLOW);
		if (fd < 0)
			die("umount: %s: %s", pos[0], errno == ELOOP ?
			    "permission denied (a symlink)" : strerror(errno));
		if (fstat(fd, &st) == 0 && S_ISLNK(st.st_mode))
			die("umount: %s: permission denied (a symlink)", pos[0]);
		up = openat(fd, "..", O_PATH | O_DIRECTORY);
		id = ovs_fd_mnt_id(fd);
		pid_ = up >= 0 ? ovs_fd_mnt_id(up) : -1;
		if (up < 0 || id < 0 || id == pid_)
			die("umount: %s: not an ovsnap snapshot view", pos[0]);
		close(up);
		target = ovs_fd_path(fd);
		if (!target)
			die("umount: %s: cannot tell its path", pos[0]);
		if (fd != TARGET_FD && (dup2(fd, TARGET_FD) < 0 || close(fd) < 0))
			die("umount: %s", strerror(errno));
	}
	if (seteuid(0) < 0)
		die("%s: cannot regain privileges: %s", cmd->name, strerror(errno));

	if (target && strcmp(cmd->name, "mount") == 0) {
		char *vol = inside_volume(target);

		if (vol)
			die("mount: %s: permission denied (inside volume %s's source or store)",
			    pos[2], vol);
	}
	if (src) {
		struct ovs_volume *v = NULL;

		struct stat cst;

		/* Rule 20: settings that grant root's rights must be root's
		 * alone, the directory too (no file renamed in by a user). */
		if (stat(ovs_conf_dir(), &cst) == 0 && (cst.st_uid != 0 || (cst.st_mode & 022)))
			die("%s %s: permission denied (%s is not root's alone)", cmd->name, src,
			    ovs_conf_dir());
		rc = ovs_conf_load(src, &conf);
		if (rc < 0)
			/* (the settings' text is root's: a parse error quotes
			 * it, so it is shown to no user, named or not) */
			die("%s %s: permission denied (its settings do not load: "
			    "root sees why with ovsnap config)", cmd->name, src);
		if (!allowed(&conf, uid))
			die("%s %s: permission denied", cmd->name, src);
		ovs_conf_clear(&conf);
		/* Setting a volume up stays root's. */
		rc = ovs_volume_open(src, &v);
		if (rc < 0)
			die("%s %s: %s", cmd->name, src, rc == -ENOENT ? "not an ovsnap volume" :
			    ovs_last_error());
		ovs_volume_unref(v);
	}

	/* The arguments, resolved. */
	xargv[xargc++] = "--";
	for (int i = 0; i < npos; i++) {
		if (i == 0 && src)
			xargv[xargc++] = src;
		else if (target && i == npos - 1)
			xargv[xargc++] = target;
		else
			xargv[xargc++] = (char *)pos[i];
	}
	xargv[xargc] = NULL;

	if (!(trusted && snprintf(ovsnap, sizeof(ovsnap), "%s/ovsnap", dir) < (int)sizeof(ovsnap) &&
	      root_only(ovsnap, false)))
		snprintf(ovsnap, sizeof(ovsnap), "%s/ovsnap", SBINDIR);
	snprintf(uidstr, sizeof(uidstr), "%u", (unsigned)uid);
	setenv("OVSNAP_DELEGATED_UID", uidstr, 1);
	{
		/* the caller's own groups, as the kernel gave them (diff
		 * shows what these may list) */
		gid_t groups[NGROUPS_MAX];
		int ng = getgroups(NGROUPS_MAX, groups);
		char *list = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&list, &len);

		if (!f)
			die("%s: out of memory", cmd->name);
		fprintf(f, "%u", (unsigned)getgid());
		for (int i = 0; i < ng; i++)
			fprintf(f, ",%u", (unsigned)groups[i]);
		if (fclose(f) != 0 || ng < 0)
			die("%s: cannot tell your groups", cmd->name);
		setenv("OVSNAP_DELEGATED_GROUPS", list, 1);
		free(list);
	}
	if (target)
		setenv("OVSNAP_DELEGATED_TARGET_FD", "3", 1);
	run_as_root(ovsnap, xargv, uid, getgid(), target != NULL);
}
