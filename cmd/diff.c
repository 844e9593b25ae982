/*
 * ovsnap diff — what changed between two snapshots, or between a snapshot
 * and the live tree, one line per path like zfs diff, or as JSON.  The
 * changes come from the layers themselves (lib/diff.c), read from the
 * store, so no view needs to be mounted and the volume may be active or
 * not.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cmd.h"
#include "diff.h"
#include "ovsnap-private.h"
#include "walk.h"

static int opt_json, opt_wait;

static struct poptOption diff_options[] = {
	{ "json", 'J', POPT_ARG_NONE, &opt_json, 0,
	  "print one JSON object (the keys are documented in ovsnap-diff(8))", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

static const char *type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	case S_IFCHR: return "char";
	case S_IFBLK: return "block";
	}
	return "unknown";
}

static const char *const kind_names[] = {
	[OVS_DIFF_ADDED] = "added",
	[OVS_DIFF_REMOVED] = "removed",
	[OVS_DIFF_MODIFIED] = "modified",
	[OVS_DIFF_TYPE] = "type",
};
static const char kind_marks[] = {
	[OVS_DIFF_ADDED] = '+',
	[OVS_DIFF_REMOVED] = '-',
	[OVS_DIFF_MODIFIED] = 'M',
	[OVS_DIFF_TYPE] = 'T',
};

static const struct {
	unsigned field;
	const char *name;
} field_names[] = {
	{ OVS_DIFF_CONTENT, "content" },
	{ OVS_DIFF_MODE, "mode" },
	{ OVS_DIFF_OWNER, "owner" },
	{ OVS_DIFF_MTIME, "mtime" },
	{ OVS_DIFF_XATTRS, "xattrs" },
};

/* A path on one line: '\' and every byte not shown as it is as \ooo
 * octal (ovs_put_shown()), as zfs diff does, so that every change is
 * exactly one line and no name moves the cursor or hides a line on a
 * terminal. */
static void print_path(const char *p)
{
	if (!*p)
		putchar('.');
	else
		ovs_put_shown(stdout, p, true);
}

struct spool;

struct out {
	bool first;
	const char *src;
	uint64_t from, to;
	struct spool *sp;	/* stdout's fd is its meanwhile */
};

static int spool_check(struct spool *sp);

/* The opening of the JSON object, printed with the first change (or
 * after the last one, when there is none), into the spool (below): a
 * failure prints nothing on stdout. */
static void json_head(struct out *o)
{
	if (!o->first)
		return;
	fputs("{\"source\": ", stdout);
	ovs_json_string(o->src);
	printf(", \"from\": %" PRIu64 ", \"to\": ", o->from);
	if (o->to != OVS_DIFF_LIVE)
		printf("%" PRIu64, o->to);
	else
		fputs("\"live\"", stdout);
	fputs(", \"changes\": [", stdout);
}


/*
 * A delegated diff shows only what its caller could see (DESIGN.md rule
 * 19): nothing below a directory the caller may not read and search, in
 * the live tree or in any layer of the snapshots compared (each copy of
 * a directory a layer holds keeps the owner, mode and ACL it had then).
 * The diff itself runs as root (the store is root's); this decides, as
 * the kernel would, from owner, mode bits and the POSIX ACL.
 */
struct caller {
	uid_t uid;
	gid_t gid;
	gid_t *groups;
	int ngroups;
	int *fds;		/* the layers of from..newest, then SRC */
	size_t nfds;
	char *ok_dir;		/* the last directory found readable */
};

static struct caller caller;

static bool in_groups(gid_t g)
{
	if (g == caller.gid)
		return true;
	for (int i = 0; i < caller.ngroups; i++)
		if (caller.groups[i] == g)
			return true;
	return false;
}

#define ACL_USER_OBJ 0x01
#define ACL_USER 0x02
#define ACL_GROUP_OBJ 0x04
#define ACL_GROUP 0x08
#define ACL_MASK 0x10
#define ACL_OTHER 0x20

/* Whether the caller may read and search the directory fd (O_PATH). */
static bool may_list(int fd)
{
	struct {
		uint16_t tag, perm;
		uint32_t id;
	} __attribute__((packed)) e[64];
	unsigned char buf[4 + sizeof(e)];
	char path[64];
	struct stat st;
	ssize_t n;
	unsigned want = 5, mask = 7;	/* r-x */
	bool group_matched = false;

	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = getxattr(path, "system.posix_acl_access", buf, sizeof(buf));
	if (n < 0 && errno != ENODATA && errno != EOPNOTSUPP)
		return false;
	if (n <= 4) {
		unsigned m = st.st_mode;

		if (st.st_uid == caller.uid)
			return ((m >> 6) & want) == want;
		if (in_groups(st.st_gid))
			return ((m >> 3) & want) == want;
		return (m & want) == want;
	}
	n = (n - 4) / 8;
	memcpy(e, buf + 4, n * 8);
	if (st.st_uid == caller.uid)
		return ((st.st_mode >> 6) & want) == want;
	for (ssize_t i = 0; i < n; i++)
		if (e[i].tag == ACL_MASK)
			mask = e[i].perm;
	for (ssize_t i = 0; i < n; i++)
		if (e[i].tag == ACL_USER && e[i].id == caller.uid)
			return (e[i].perm & mask & want) == want;
	for (ssize_t i = 0; i < n; i++) {
		bool match = (e[i].tag == ACL_GROUP_OBJ && in_groups(st.st_gid)) ||
			     (e[i].tag == ACL_GROUP && in_groups(e[i].id));

		if (!match)
			continue;
		group_matched = true;
		if ((e[i].perm & (e[i].tag == ACL_GROUP_OBJ ? mask : mask) & want) == want)
			return true;
	}
	if (group_matched)
		return false;
	for (ssize_t i = 0; i < n; i++)
		if (e[i].tag == ACL_OTHER)
			return (e[i].perm & want) == want;
	return false;
}

/* Whether the caller may list dir (relative to SRC) wherever it is. */
static bool dir_visible(const char *dir)
{
	for (size_t i = 0; i < caller.nfds; i++) {
		int fd = ovs_open_beneath(caller.fds[i], dir, O_PATH | O_DIRECTORY | O_NOFOLLOW |
					  O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_XDEV);
		bool ok;

		if (fd == -ENOENT || fd == -ENOTDIR)
			continue;	/* not there: nothing of it to show */
		if (fd < 0)
			return false;
		ok = may_list(fd);
		close(fd);
		if (!ok)
			return false;
	}
	return true;
}

/* Whether every directory above path is visible to the caller. */
static bool path_visible(const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t plen = slash ? (size_t)(slash - path) : 0;
	char *dir;

	if (!*path)
		return true;	/* SRC itself: the caller named it */
	if (caller.ok_dir && strlen(caller.ok_dir) == plen &&
	    strncmp(caller.ok_dir, path, plen) == 0)
		return true;
	dir = strndup(path, plen);
	if (!dir)
		return false;
	/* every prefix, from SRC down: "", "a", "a/b", ... */
	for (size_t i = 0;; i++) {
		if (i == plen || dir[i] == '/') {
			char c = dir[i];
			bool ok;

			dir[i] = 0;
			ok = dir_visible(dir);
			dir[i] = c;
			if (!ok) {
				free(dir);
				return false;
			}
			if (i == plen)
				break;
		}
	}
	free(caller.ok_dir);
	caller.ok_dir = dir;
	return true;
}

static int caller_setup(struct ovs_volume *v, uint64_t from, int srcfd, long uid)
{
	struct passwd *pw = getpwuid((uid_t)uid);
	size_t n = ovs_snapshot_count(v), a = n;
	int ng = 64;

	caller.uid = (uid_t)uid;
	/* the groups the helper saw the caller have (OVSNAP_DELEGATED_GROUPS:
	 * its real gid first), else those of its passwd and group entries */
	if (getenv("OVSNAP_DELEGATED_GROUPS")) {
		const char *p = getenv("OVSNAP_DELEGATED_GROUPS");

		caller.groups = calloc(NGROUPS_MAX + 1, sizeof(gid_t));
		if (!caller.groups)
			return -ENOMEM;
		while (*p && caller.ngroups <= NGROUPS_MAX) {
			char *end;
			unsigned long g = strtoul(p, &end, 10);

			if (end == p || (*end && *end != ','))
				return -EINVAL;
			caller.groups[caller.ngroups++] = (gid_t)g;
			p = *end ? end + 1 : end;
		}
		if (!caller.ngroups)
			return -EINVAL;
		caller.gid = caller.groups[0];
	} else {
		if (!pw)
			return -ENOENT;
		caller.gid = pw->pw_gid;
		for (;;) {
			gid_t *g = realloc(caller.groups, ng * sizeof(gid_t));
			int want = ng;

			if (!g)
				return -ENOMEM;
			caller.groups = g;
			if (getgrouplist(pw->pw_name, pw->pw_gid, g, &want) >= 0) {
				caller.ngroups = want;
				break;
			}
			if (want <= ng)
				return -EINVAL;
			ng = want;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (ovs_snapshot_at(v, i)->id == from)
			a = i;
	caller.fds = calloc(n - a + 1, sizeof(int));
	if (!caller.fds)
		return -ENOMEM;
	for (size_t i = a; i < n; i++) {
		int fd = ovs_snapshot_open_upper(v, ovs_snapshot_at(v, i)->id, O_RDONLY);

		if (fd < 0)
			return fd;
		caller.fds[caller.nfds++] = fd;
	}
	caller.fds[caller.nfds++] = srcfd;
	return 0;
}

static void caller_clear(void)
{
	for (size_t i = 0; i + 1 < caller.nfds; i++)
		close(caller.fds[i]);
	free(caller.fds);
	free(caller.groups);
	free(caller.ok_dir);
	memset(&caller, 0, sizeof(caller));
}

static int print_change(const struct ovs_diff_change *c, void *arg)
{
	struct out *o = arg;

	if (caller.fds && !path_visible(c->path))
		return 0;

	if (!opt_json) {
		printf("%c\t", kind_marks[c->kind]);
		print_path(c->path);
		putchar('\n');
		return spool_check(o->sp);
	}
	json_head(o);
	fputs(o->first ? "{\"path\": " : ", {\"path\": ", stdout);
	o->first = false;
	ovs_json_string(*c->path ? c->path : ".");
	printf(", \"change\": \"%s\"", kind_names[c->kind]);
	switch (c->kind) {
	case OVS_DIFF_ADDED:
		printf(", \"type\": \"%s\"", type_name(c->to_mode));
		break;
	case OVS_DIFF_REMOVED:
		printf(", \"type\": \"%s\"", type_name(c->from_mode));
		break;
	case OVS_DIFF_TYPE:
		printf(", \"from_type\": \"%s\", \"to_type\": \"%s\"", type_name(c->from_mode),
		       type_name(c->to_mode));
		break;
	case OVS_DIFF_MODIFIED: {
		bool first = true;

		printf(", \"type\": \"%s\", \"fields\": [", type_name(c->to_mode));
		for (size_t i = 0; i < sizeof(field_names) / sizeof(field_names[0]); i++) {
			if (!(c->fields & field_names[i].field))
				continue;
			printf("%s\"%s\"", first ? "" : ", ", field_names[i].name);
			first = false;
		}
		putchar(']');
		break;
	}
	}
	putchar('}');
	return spool_check(o->sp);
}

/*
 * The changes are printed as the library finds them, into a spool (an
 * unlinked file, not memory: a diff of a million changes must not hold
 * them), and copied to stdout once the diff has succeeded: a failure
 * prints nothing on stdout (ovsnap-diff(8) EXIT STATUS).  The printing
 * code writes to stdout as always; stdout's fd is the spool meanwhile.
 *
 * The spool is an unlinked file in /tmp; where /tmp cannot hold it (read
 * only, full, over quota) it is a memory file (memfd), and a diff whose
 * /tmp spool filled up is run again into one.
 *
 * A delegated diff runs as root for a user (ovsnap-delegate(8)) with no
 * RLIMIT_FSIZE, and its output can grow with the square of what the user
 * made (a deep chain of long names below a whiteout prints every name's
 * full path): root's spool is capped at DELEGATED_SPOOL_MAX_MIB, by
 * RLIMIT_FSIZE while the diff runs (SIGXFSZ ignored: a write past it
 * fails with EFBIG), and the diff fails with one line beyond it.
 */
#define DELEGATED_SPOOL_MAX_MIB	256

struct spool {
	int fd;			/* the spool */
	int stdout_fd;		/* the real stdout while the spool stands in */
	bool in_memory;		/* a memfd, not a file in /tmp */
	int write_err;		/* a write to the spool failed with it */
	bool capped;		/* RLIMIT_FSIZE set to the cap, SIGXFSZ ignored */
	off_t cap;		/* bytes; 0: none */
	struct rlimit fsize;	/* RLIMIT_FSIZE before */
	struct sigaction xfsz;	/* SIGXFSZ's action before */
};

/* The cap in bytes: DELEGATED_SPOOL_MAX_MIB, or with OVSNAPD_TEST_HOOKS=1
 * OVSNAP_TEST_DIFF_SPOOL_MAX bytes (the tests' hook: the delegate clears
 * the environment, so only a direct run with OVSNAP_DELEGATED_UID has it). */
static off_t spool_cap(void)
{
	const char *h = getenv("OVSNAPD_TEST_HOOKS"), *t = getenv("OVSNAP_TEST_DIFF_SPOOL_MAX");

	if (ovs_delegated_uid() < 0)
		return 0;
	if (h && strcmp(h, "1") == 0 && t && strtoll(t, NULL, 10) > 0)
		return strtoll(t, NULL, 10);
	return (off_t)DELEGATED_SPOOL_MAX_MIB << 20;
}

static int spool_open(struct spool *sp)
{
	sp->fd = ovs_spool_file("ovsnap-diff", &sp->in_memory);
	return sp->fd < 0 ? sp->fd : 0;
}

static int spool_begin(struct spool *sp)
{
	int rc = spool_open(sp);

	if (rc < 0)
		return rc;
	sp->write_err = 0;
	if (fflush(stdout) != 0)
		return ovs_err(errno, "write error: %m");
	sp->stdout_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
	if (sp->stdout_fd < 0 || dup2(sp->fd, STDOUT_FILENO) < 0) {
		int err = errno;

		if (sp->stdout_fd >= 0)
			close(sp->stdout_fd);
		sp->stdout_fd = -1;
		return ovs_err(err, "spool for the changes: %m");
	}
	sp->cap = spool_cap();
	if (sp->cap && getrlimit(RLIMIT_FSIZE, &sp->fsize) == 0) {
		struct rlimit lim = sp->fsize;
		struct sigaction ign = { .sa_handler = SIG_IGN };

		if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > (rlim_t)sp->cap)
			lim.rlim_cur = sp->cap;
		sigemptyset(&ign.sa_mask);
		if (sigaction(SIGXFSZ, &ign, &sp->xfsz) == 0) {
			sp->capped = true;
			setrlimit(RLIMIT_FSIZE, &lim);
		}
	}
	return 0;
}

/* Called after each change printed: a failed write stops the diff. */
static int spool_check(struct spool *sp)
{
	if (!ferror(stdout))
		return 0;
	sp->write_err = errno ? errno : EIO;
	return -sp->write_err;
}

/* Put the real stdout back; a failure to write the spool into *rc. */
static void spool_end(struct spool *sp, int *rc)
{
	int err = fflush(stdout) != 0 || ferror(stdout) ? errno ? errno : EIO : 0;

	clearerr(stdout);
	if (dup2(sp->stdout_fd, STDOUT_FILENO) < 0 && !err)
		err = errno;
	close(sp->stdout_fd);
	sp->stdout_fd = -1;
	if (sp->capped) {
		setrlimit(RLIMIT_FSIZE, &sp->fsize);
		sigaction(SIGXFSZ, &sp->xfsz, NULL);
		sp->capped = false;
	}
	if (*rc != 0 && !(sp->write_err && *rc == -sp->write_err))
		return;		/* the diff's own failure */
	if (sp->write_err)
		err = sp->write_err;
	if (!err)
		return;
	sp->write_err = err;
	if (err == EFBIG && sp->cap)
		*rc = ovs_err(err, "diff output larger than %lld MiB; ask an administrator to "
			      "run it", (long long)((sp->cap + (1 << 20) - 1) >> 20));
	else if (ovs_spool_tmp_full(err) && !sp->in_memory)
		*rc = -err;	/* run again into memory */
	else
		*rc = ovs_err(err, "spool for the changes: %s", strerror(err));
}

/* The spool onto stdout (write errors: the protected stdout's at exit). */
static int spool_copy(struct spool *sp)
{
	char buf[1 << 16];
	off_t off = 0;
	ssize_t n;

	while ((n = pread(sp->fd, buf, sizeof(buf), off)) > 0) {
		if (fwrite(buf, 1, n, stdout) != (size_t)n)
			return 0;
		off += n;
	}
	if (n < 0)
		return ovs_err(errno, "read the spool of the changes: %m");
	return 0;
}

static int run_diff(struct ovs_volume *v, const char *arg_a, const char *arg_b)
{
	const char *src = ovs_volume_source(v);
	const struct ovs_snapshot *a, *b = NULL;
	struct out o = { .first = true };
	struct spool sp = { .fd = -1, .stdout_fd = -1 };
	uint64_t ida, idb;
	int srcfd, rc;

	rc = ovs_snapshot_resolve(v, arg_a, &a);
	if (rc < 0) {
		ovs_error_lib(rc, "diff %s %s", src, arg_a);
		return EXIT_FAIL;
	}
	ida = a->id;
	if (arg_b) {
		rc = ovs_snapshot_resolve(v, arg_b, &b);
		if (rc < 0) {
			ovs_error_lib(rc, "diff %s %s", src, arg_b);
			return EXIT_FAIL;
		}
	}
	idb = b ? b->id : OVS_DIFF_LIVE;
	if (b && b->id < a->id) {
		ovs_error("diff %s %s %s: snapshot %" PRIu64 " is newer than snapshot %" PRIu64
			  " (give the older one first)", src, arg_a, arg_b, a->id, b->id);
		return EXIT_FAIL;
	}
	srcfd = ovs_open_real_source(src);
	if (srcfd < 0) {
		ovs_error_lib(srcfd, "diff %s", src);
		return EXIT_FAIL;
	}
	o.src = src;
	o.from = ida;
	o.to = idb;
	if (ovs_delegated_uid() >= 0) {
		rc = caller_setup(v, ida, srcfd, ovs_delegated_uid());
		if (rc < 0) {
			caller_clear();
			close(srcfd);
			ovs_error("diff %s: cannot tell what you may see: %s", src, strerror(-rc));
			return EXIT_FAIL;
		}
	}
	o.sp = &sp;
	for (;;) {
		rc = spool_begin(&sp);
		if (rc == 0) {
			rc = ovs_diff(v, ida, idb, srcfd, print_change, &o);
			if (rc == 0 && opt_json) {
				json_head(&o);
				fputs("]}\n", stdout);
			}
			spool_end(&sp, &rc);
		}
		if (rc == 0 || sp.in_memory || !ovs_spool_tmp_full(-rc) || sp.write_err != -rc)
			break;
		/* /tmp filled up: again, into memory */
		close(sp.fd);
		sp.fd = -1;
		sp.in_memory = true;
		o.first = true;
	}
	caller_clear();
	close(srcfd);
	/* the changes are all in the spool: a reader slow to take them (a
	 * pager) holds up no take */
	ovs_volume_unlock(v);
	if (rc == 0)
		rc = spool_copy(&sp);
	if (sp.fd >= 0)
		close(sp.fd);
	if (rc < 0) {
		ovs_error_lib(rc, "diff %s", src);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* Three fds per layer are open at once (one's own and the two stacks'),
 * up to 499 layers: more than the usual soft limit of 1024; the walk
 * adds those of the few directories on its path it keeps open (at most
 * about 256 in all, lib/diff.c FD_BUDGET). */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int cmd_diff(int argc, const char **argv)
{
	struct ovs_volume *v = NULL;
	const char **args;
	poptContext pc;
	int status, nargs;

	pc = ovs_popt_parse("diff", argc, argv, diff_options, "SRC A [B]", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "diff", 2, 3, &nargs, &status);
	if (!args)
		goto out;
	raise_fd_limit();
	/* The lock keeps takes, merges and drops from changing the layers
	 * while they are read; a pending merge or drop is finished first. */
	status = ovs_open_locked("diff", args[0], opt_wait, &v);
	if (status != EXIT_OK)
		goto out;
	status = run_diff(v, args[1], nargs == 3 ? args[2] : NULL);
	ovs_volume_unlock(v);
	ovs_volume_unref(v);
out:
	poptFreeContext(pc);
	return status;
}
