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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* A snapshot reference such as -1: an argument, not an option. */
static bool negative_number(const char *arg)
{
	if (arg[0] != '-' || !arg[1])
		return false;
	for (const char *p = arg + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
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

		if (dashdash || argv[i][0] != '-' || negative_number(argv[i]) || !argv[i][1]) {
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
		src = realpath(pos[0], NULL);
		if (!src)
			die("%s %s: %s", cmd->name, pos[0], strerror(errno));
	}
	if (strcmp(cmd->name, "mount") == 0) {
		char fdpath[64];
		struct stat st;
		ssize_t n;
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
		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
		target = malloc(PATH_MAX);
		n = target ? readlink(fdpath, target, PATH_MAX - 1) : -1;
		if (n <= 0 || target[0] != '/')
			die("mount: %s: cannot tell its path", pos[2]);
		target[n] = 0;
		if (fd != TARGET_FD && (dup2(fd, TARGET_FD) < 0 || close(fd) < 0))
			die("mount: %s", strerror(errno));
	} else if (strcmp(cmd->name, "umount") == 0) {
		/* By path: umount checks the view's recorded owner.  A view
		 * whose daemon died answers ENOTCONN: its parent then. */
		target = realpath(pos[0], NULL);
		if (!target && errno == ENOTCONN) {
			char *dup = strdup(pos[0]), *slash = dup ? strrchr(dup, '/') : NULL, *parent;

			if (slash && slash[1]) {
				*slash = 0;
				parent = realpath(slash == dup ? "/" : dup, NULL);
				if (parent && asprintf(&target, "%s/%s", strcmp(parent, "/") ?
						       parent : "", slash + 1) < 0)
					target = NULL;
				free(parent);
			}
			free(dup);
			errno = ENOTCONN;
		}
		if (!target)
			die("umount: %s: %s", pos[0], strerror(errno));
	}
	if (seteuid(0) < 0)
		die("%s: cannot regain privileges: %s", cmd->name, strerror(errno));

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
			die("%s %s: permission denied (%s)", cmd->name, src, ovs_last_error());
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
	if (target && strcmp(cmd->name, "mount") == 0)
		setenv("OVSNAP_DELEGATED_TARGET_FD", "3", 1);
	/* (fails where the caller's capability bounding set was emptied) */
	if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		die("%s: cannot become root: %s", cmd->name, strerror(errno));
	execv(ovsnap, xargv);
	die("%s: cannot run %s: %s", cmd->name, ovsnap, strerror(errno));
}
