/*
 * ovs-workload — a seeded, repeatable random workload over a directory,
 * for the consistency oracle (DESIGN.md section 6).
 *
 * Usage: ovs-workload [--seed N] [--ops N] [--takes K] [--take-cmd CMD]
 *                     [--manifest-dir D] [--no-dir-mtime] [--verbose] DIR
 *
 * It runs N operations on DIR (create, write at an offset, append,
 * truncate up and down, open with O_TRUNC, chmod, chown, utimes, set and
 * remove user.* xattrs, symlink, hard link, mkfifo, rename of files and
 * directories within and across directories and over existing targets,
 * RENAME_EXCHANGE, RENAME_NOREPLACE, unlink, rmdir, mkdir).  It knows
 * nothing about snapshots: at K points spread over the run it writes the
 * manifest of DIR, runs CMD with bash -c (like system(3)), reads
 * the snapshot id CMD prints on stdout and renames the manifest to
 * D/<id>.manifest.  The manifest is written before CMD runs, and nothing
 * changes DIR in between, so it is DIR's state at the take.
 *
 * --extended adds operations the plain run lacks (and changes the
 * sequence of a seed): writes and truncates through descriptors kept open
 * across other operations and takes (the file may be renamed, unlinked or
 * linked meanwhile), fallocate (punch hole, zero range, keep size),
 * copy_file_range between files, sparse writes far past the end, and
 * trusted.overlay.* xattrs on user files and directories (rule 14: they
 * must reach the snapshot escaped, never steering the overlay).
 *
 * --jail chroots into DIR first (root only).  Several workloads on one
 * tree change it under each other's feet: a directory of a path may have
 * become a symlink to "/a0" meanwhile, which must not lead outside DIR.
 * Whether a rename's EINVAL is excused depends on where its paths lead at
 * the moment of the call, so under --jail a rename or exchange holds an
 * exclusive flock on DIR's parent (the same lock for every worker of the
 * tree) from the call to that check, and the operations that can change
 * where a path leads (mkdir, rmdir, unlink, symlink) hold it shared.
 * Writes, truncates, attributes and xattrs take no lock: they still race
 * with renames and with each other in the daemon.
 *
 * An operation that fails is excused (counted as skipped) only with an
 * errno the real filesystem gives for that call on the picked paths, which
 * may be out of date in the model: ENOENT, EEXIST, ENOTEMPTY, EISDIR,
 * ENOTDIR, EMLINK, ENAMETOOLONG, ELOOP; EINVAL only for a rename into its
 * own subtree, for the kernel's own EPERM on xattrs (see eperm_excused),
 * for copy_file_range within one inode or on what is not a regular file by
 * now, and for fallocate on what is not a regular file by now;
 * ENODATA only for removing an xattr; ENXIO only for a path that turned out
 * to be a fifo.  EXDEV, EBUSY and ETXTBSY are never excused: one
 * filesystem, no mount points inside, nothing executed.  Any other failure
 * (EIO, ENOSPC, EPERM, ENOTCONN, EXDEV, ...) is reported and makes the
 * exit status 1; so does more than --max-excused N excused operations.
 * The summary line counts the excused ones per errno.  Exit 3 when a take hook fails.  The tree stays
 * bounded: at most 300 entries, files of at most 256 KiB.
 *
 * The choice of operations depends only on the seed and on the outcome
 * of earlier operations, so one seed replays the same run on the same
 * starting tree.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/falloc.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "manifest.h"

#define MAX_ENTRIES	300
#define MAX_FILE_SIZE	(256 * 1024)
#define MAX_DEPTH	6
#define NAME_POOL	24
#define RESCAN_EVERY	100

static const char *opt_dir, *opt_take_cmd, *opt_manifest_dir;
static uint64_t opt_seed = 1;
static long opt_ops = 1000, opt_takes;
static bool opt_no_dir_mtime, opt_verbose, opt_extended, opt_jail;

static int rootfd;
static uint64_t rng_state;
static long unexpected_errors, ops_done, ops_skipped;

/* ---- random numbers: splitmix64, the same on every machine ---- */

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static bool chance(int percent)
{
	return rnd_below(100) < (uint64_t)percent;
}

/* ---- the model: what DIR holds, as far as this process knows ---- */

struct node {
	char *path;	/* relative to DIR, never "." */
	char type;	/* f d l p */
};

static struct node *nodes;
static size_t nnodes, cap_nodes;

static void die(const char *what)
{
	fprintf(stderr, "ovs-workload: %s: %s\n", what, strerror(errno));
	exit(99);
}

static void model_add(const char *path, char type)
{
	if (nnodes == cap_nodes) {
		cap_nodes = cap_nodes ? cap_nodes * 2 : 512;
		nodes = realloc(nodes, cap_nodes * sizeof(*nodes));
		if (!nodes)
			die("realloc");
	}
	nodes[nnodes].path = strdup(path);
	if (!nodes[nnodes].path)
		die("strdup");
	nodes[nnodes].type = type;
	nnodes++;
}

static void model_clear(void)
{
	for (size_t i = 0; i < nnodes; i++)
		free(nodes[i].path);
	nnodes = 0;
}

/* Is path equal to prefix or below it? */
static bool under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(path, prefix, n) == 0 && (path[n] == 0 || path[n] == '/');
}

static void model_remove_tree(const char *path)
{
	char *victim = strdup(path);
	size_t i = 0;

	while (i < nnodes) {
		if (under(nodes[i].path, victim)) {
			free(nodes[i].path);
			nodes[i] = nodes[--nnodes];
		} else {
			i++;
		}
	}
	free(victim);
}

static char *replace_prefix(const char *path, const char *from, const char *to)
{
	char *p;

	if (asprintf(&p, "%s%s", to, path + strlen(from)) < 0)
		die("asprintf");
	return p;
}

/* rename(from, to) succeeded: to's old tree is gone, from's moved. */
static void model_rename(const char *from, const char *to)
{
	char *f = strdup(from), *t = strdup(to);

	model_remove_tree(t);
	for (size_t i = 0; i < nnodes; i++)
		if (under(nodes[i].path, f)) {
			char *p = replace_prefix(nodes[i].path, f, t);

			free(nodes[i].path);
			nodes[i].path = p;
		}
	free(f);
	free(t);
}

static void model_exchange(const char *a, const char *b)
{
	char *x = strdup(a), *y = strdup(b);

	for (size_t i = 0; i < nnodes; i++) {
		char *p = NULL;

		if (under(nodes[i].path, x))
			p = replace_prefix(nodes[i].path, x, y);
		else if (under(nodes[i].path, y))
			p = replace_prefix(nodes[i].path, y, x);
		if (p) {
			free(nodes[i].path);
			nodes[i].path = p;
		}
	}
	free(x);
	free(y);
}

static int cmp_node(const void *a, const void *b)
{
	return strcmp(((const struct node *)a)->path, ((const struct node *)b)->path);
}

static void scan_dir(int dirfd, const char *rel)
{
	struct dirent *d;
	DIR *dir;
	int fd = dup(dirfd);

	if (fd < 0 || !(dir = fdopendir(fd)))
		die("opendir");
	/* The dup shares the file offset with dirfd, left at the end by the
	 * last scan. */
	rewinddir(dir);
	while ((d = readdir(dir))) {
		struct stat st;
		char *path;
		char type;

		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (*rel) {
			if (asprintf(&path, "%s/%s", rel, d->d_name) < 0)
				die("asprintf");
		} else {
			path = strdup(d->d_name);
		}
		switch (st.st_mode & S_IFMT) {
		case S_IFREG: type = 'f'; break;
		case S_IFDIR: type = 'd'; break;
		case S_IFLNK: type = 'l'; break;
		case S_IFIFO: type = 'p'; break;
		default: type = '?'; break;
		}
		model_add(path, type);
		if (type == 'd') {
			int sub = openat(dirfd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

			if (sub >= 0) {
				scan_dir(sub, path);
				close(sub);
			}
		}
		free(path);
	}
	closedir(dir);
}

/* Rebuild the model from DIR, in a deterministic order: hard links
 * renamed onto each other and other surprises leave it stale otherwise. */
static void model_rescan(void)
{
	model_clear();
	scan_dir(rootfd, "");
	qsort(nodes, nnodes, sizeof(*nodes), cmp_node);
}

static int depth(const char *path)
{
	int d = 1;

	for (; *path; path++)
		d += *path == '/';
	return d;
}

/* A random entry of one of the types in types ("fdlp"), or NULL. */
static const char *pick(const char *types)
{
	size_t n = 0, k;

	for (size_t i = 0; i < nnodes; i++)
		n += strchr(types, nodes[i].type) != NULL;
	if (!n)
		return NULL;
	k = rnd_below(n);
	for (size_t i = 0; i < nnodes; i++)
		if (strchr(types, nodes[i].type) && k-- == 0)
			return nodes[i].path;
	return NULL;
}

/* A random directory (or the root, ""), shallow enough to create in. */
static const char *pick_parent(void)
{
	const char *d;

	if (chance(25))
		return "";
	d = pick("d");
	if (!d || depth(d) >= MAX_DEPTH)
		return "";
	return d;
}

/* A random name in a random directory: the pool is small, so the name
 * often exists already, with a type of its own. */
static char *pick_new_path(void)
{
	const char *parent = pick_parent();
	static const char *const stems[] = { "a", "b", "dir", "file", "x", "Z" };
	char *p;

	if (asprintf(&p, "%s%s%s%u", parent, *parent ? "/" : "",
		     stems[rnd_below(6)], (unsigned)rnd_below(NAME_POOL / 6)) < 0)
		die("asprintf");
	return p;
}

/* How many levels the tree at path spans below it. */
static int subtree_height(const char *path)
{
	int base = depth(path), h = 0;

	for (size_t i = 0; i < nnodes; i++)
		if (under(nodes[i].path, path) && depth(nodes[i].path) - base > h)
			h = depth(nodes[i].path) - base;
	return h;
}

static bool is_empty_dir(const char *path)
{
	for (size_t i = 0; i < nnodes; i++)
		if (under(nodes[i].path, path) && strcmp(nodes[i].path, path) != 0)
			return false;
	return true;
}

/* ---- the operations ---- */

/* Set by stale_fifo(): the fd of this operation turned out to be a fifo. */
static bool fifo_seen;
static long excused_by_errno[256];
static long opt_max_excused = -1;

static bool is_type(const char *path, mode_t type)
{
	struct stat st;

	return path && fstatat(rootfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       (st.st_mode & S_IFMT) == type;
}

/* Two names of one inode (hard links, or the same path)? */
static bool same_inode(const char *a, const char *b)
{
	struct stat sa, sb;

	return a && b && fstatat(rootfd, a, &sa, AT_SYMLINK_NOFOLLOW) == 0 &&
	       fstatat(rootfd, b, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/*
 * Is the directory b's parent resolves to (following symlinks, as the
 * rename itself does) the directory a or one below it?  Then renaming a
 * to b is EINVAL on the real filesystem, whatever the path text says: b's
 * parent may be a symlink, or another worker may have moved it there.
 */
static bool parent_inside(const char *a, const char *b)
{
	struct stat sa, st, root;
	char *parent, *slash;
	int fd, up;

	if (!a || !b || fstatat(rootfd, a, &sa, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(sa.st_mode) || fstat(rootfd, &root) < 0)
		return false;
	parent = strdup(b);
	if (!parent)
		return false;
	slash = strrchr(parent, '/');
	if (slash)
		*slash = '\0';
	fd = openat(rootfd, slash ? parent : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	free(parent);
	/* Up through ".." to the root, at most as deep as a path can be. */
	for (int depth = 0; fd >= 0 && depth < PATH_MAX / 2; depth++) {
		if (fstat(fd, &st) < 0)
			break;
		if (st.st_dev == sa.st_dev && st.st_ino == sa.st_ino) {
			close(fd);
			return true;
		}
		if (st.st_dev == root.st_dev && st.st_ino == root.st_ino)
			break;
		up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = up;
	}
	if (fd >= 0)
		close(fd);
	return false;
}

/* Would the real filesystem give errno e for this call?  Decided by
 * looking at the paths where the errno depends on them. */
static bool excusable(const char *op, const char *a, const char *b, int e)
{
	switch (e) {
	case ENOENT: case EEXIST: case ENOTEMPTY: case EISDIR: case ENOTDIR:
	case EMLINK: case ENAMETOOLONG: case ELOOP:
		return true;
	case EINVAL:
		if (strncmp(op, "rename", 6) == 0)
			return b && ((under(b, a) && strcmp(a, b) != 0) || parent_inside(a, b));
		if (strcmp(op, "exchange") == 0)
			return b && strcmp(a, b) != 0 && (under(b, a) || under(a, b) ||
							  parent_inside(a, b) || parent_inside(b, a));
		if (strcmp(op, "setxattr") == 0 || strcmp(op, "removexattr") == 0)
			return true;	/* eperm_excused(): the kernel's own EPERM */
		if (strcmp(op, "copy-range") == 0)	/* overlapping ranges of one file */
			return same_inode(a, b) || !is_type(a, S_IFREG) || !is_type(b, S_IFREG);
		if (strcmp(op, "fallocate") == 0)
			return !is_type(a, S_IFREG);
		return false;
	case ENODATA:
		return strcmp(op, "removexattr") == 0 || strcmp(op, "trusted-xattr") == 0;
	case ENXIO:
		return fifo_seen || is_type(a, S_IFIFO) || (b && is_type(b, S_IFIFO)) ||
		       (opt_jail && !is_type(a, S_IFREG));
	}
	return false;
}

/* Account for the result of one operation; returns ok. */
static bool done(const char *op, const char *a, const char *b, int rc)
{
	int e = errno;

	if (opt_verbose)
		fprintf(stderr, "%ld %s %s%s%s: %s\n", ops_done, op, a, b ? " " : "", b ? b : "",
			rc < 0 ? strerror(e) : "ok");
	if (rc >= 0) {
		fifo_seen = false;
		return true;
	}
	if (excusable(op, a, b, e)) {
		fifo_seen = false;
		ops_skipped++;
		excused_by_errno[e & 255]++;
		return false;
	}
	fifo_seen = false;
	unexpected_errors++;
	if (unexpected_errors <= 20)
		fprintf(stderr, "ovs-workload: op %ld: %s %s%s%s: %s\n", ops_done, op, a,
			b ? " -> " : "", b ? b : "", strerror(e));
	return false;
}

static void fill_random(char *buf, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t r = rnd();

		memcpy(buf + i, &r, n - i < 8 ? n - i : 8);
	}
}

/*
 * With workloads at once, a path picked as a file may hold a fifo that
 * another worker has open for reading (copy-range opens its source), so
 * the open for writing succeeds and the write fails (ESPIPE for pwrite
 * and fallocate, EAGAIN or a short write when the pipe is full).  Like
 * the ENXIO of such an open without a reader, that is this worker's
 * model being out of date, not a finding: ENXIO.  fstat of the very fd
 * tells, whatever the path holds by now.
 */
static bool stale_fifo(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
		errno = ENXIO;
		fifo_seen = true;
		return true;
	}
	return false;
}

static int write_random(int fd, off_t off, size_t len, bool append)
{
	char *buf = malloc(len + 8);
	ssize_t n;
	int e;

	if (!buf)
		die("malloc");
	fill_random(buf, len);
	n = append ? write(fd, buf, len) : pwrite(fd, buf, len, off);
	e = errno;
	free(buf);
	if (n >= 0 && (size_t)n == len)
		return 0;
	if (!stale_fifo(fd))
		errno = n < 0 ? e : EIO;
	return -1;
}

static off_t size_of(const char *path)
{
	struct stat st;

	return fstatat(rootfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_size : 0;
}

/* O_NONBLOCK: with workloads at once, path may have become a fifo, whose
 * open for writing would wait for a reader forever (ENXIO instead). */
static int open_file(const char *path, int flags)
{
	return openat(rootfd, path, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
}

static void op_create(void)
{
	char *p = pick_new_path();
	static const mode_t modes[] = { 0644, 0600, 0755, 0640 };
	int fd = openat(rootfd, p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, modes[rnd_below(4)]);
	int rc = fd;

	if (fd >= 0) {
		size_t len = chance(20) ? 0 : rnd_below(8192) + 1;

		rc = len ? write_random(fd, 0, len, false) : 0;
		close(fd);
		model_add(p, 'f');
	}
	done("create", p, NULL, rc);
	free(p);
}

static void op_write(int how)
{
	const char *p = pick("f");
	off_t size, off = 0;
	size_t len;
	int fd, rc;

	if (!p)
		return;
	size = size_of(p);
	len = rnd_below(how == 0 ? 16384 : 8192) + 1;
	if (how == 0) {		/* at an offset, inside or a little past the end */
		off = rnd_below(size + 4096);
		if (off + (off_t)len > MAX_FILE_SIZE)
			off = rnd_below(MAX_FILE_SIZE - len);
		fd = open_file(p, O_WRONLY);
	} else {		/* append */
		if (size + (off_t)len > MAX_FILE_SIZE)
			len = size < MAX_FILE_SIZE ? MAX_FILE_SIZE - size : 0;
		fd = open_file(p, O_WRONLY | O_APPEND);
	}
	rc = fd;
	if (fd >= 0) {
		rc = len ? write_random(fd, off, len, how == 1) : 0;
		close(fd);
	}
	done(how == 0 ? "pwrite" : "append", p, NULL, rc);
}

static void op_truncate(void)
{
	const char *p = pick("f");
	off_t size, to;
	int fd, rc;

	if (!p)
		return;
	size = size_of(p);
	to = chance(50) ? (off_t)rnd_below(size + 1) : (off_t)rnd_below(size * 2 + 4096);
	if (to > MAX_FILE_SIZE)
		to = MAX_FILE_SIZE;
	fd = open_file(p, O_WRONLY);
	rc = fd;
	if (fd >= 0) {
		rc = ftruncate(fd, to);
		close(fd);
	}
	done("truncate", p, NULL, rc);
}

static void op_open_trunc(void)
{
	const char *p = pick("f");
	int fd, rc;

	if (!p)
		return;
	fd = open_file(p, O_WRONLY | O_TRUNC);
	rc = fd;
	if (fd >= 0) {
		rc = chance(50) ? write_random(fd, 0, rnd_below(4096) + 1, false) : 0;
		close(fd);
	}
	done("open-trunc", p, NULL, rc);
}

static void op_chmod(void)
{
	static const mode_t modes[] = { 0644, 0600, 0755, 0700, 0444, 04755, 02755, 01777, 0751 };
	const char *p = pick(chance(10) ? "" : "fdp");
	mode_t m = modes[rnd_below(9)];

	if (!p)
		p = ".";
	done("chmod", p, NULL, fchmodat(rootfd, p, m, 0));
}

static void op_chown(void)
{
	static const uid_t uids[] = { 0, 1000, 1001 };
	static const gid_t gids[] = { 0, 100, 1000 };
	const char *p = pick("fdlp");

	if (!p)
		return;
	done("chown", p, NULL, fchownat(rootfd, p, uids[rnd_below(3)], gids[rnd_below(3)],
					 AT_SYMLINK_NOFOLLOW));
}

static void op_utimes(void)
{
	const char *p = pick("fdlp");
	struct timespec ts[2];

	if (!p)
		return;
	for (int i = 0; i < 2; i++) {
		ts[i].tv_sec = 946684800 + rnd_below(30 * 365 * 86400ULL);
		ts[i].tv_nsec = rnd_below(1000000000);
	}
	if (chance(10))
		ts[0].tv_nsec = UTIME_OMIT;
	done("utimes", p, NULL, utimensat(rootfd, p, ts, AT_SYMLINK_NOFOLLOW));
}

static char *full_path(const char *rel)
{
	char *p;

	if (asprintf(&p, "%s/%s", opt_dir, rel) < 0)
		die("asprintf");
	return p;
}

/* /proc/self/fd of this process, opened before --jail's chroot (which
 * leaves no /proc): the way to name an O_PATH descriptor in a syscall
 * that takes a path. */
static int proc_fd_dir = -1;
static int cwd_fd = -1;

static const char *type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "dir";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	}
	return "other";
}

/* "ino N <type>" of st, or "gone" when the stat failed (ok false). */
static const char *describe(bool ok, const struct stat *st, char *buf, size_t len)
{
	if (!ok)
		return "gone";
	snprintf(buf, len, "ino %llu %s", (unsigned long long)st->st_ino, type_name(st->st_mode));
	return buf;
}

/*
 * setxattr (value) or removexattr (!value) on exactly the object fd (an
 * O_PATH fd) holds, through its /proc/self/fd magic link, which lands on
 * a symlink itself too.  Unlike lsetxattr on the path, what the call
 * works on cannot change under it while other workloads rename.
 */
static int xattr_on_fd(int fd, const char *name, const void *value, size_t len)
{
	char num[16];
	int rc, e;

	snprintf(num, sizeof(num), "%d", fd);
	if (fchdir(proc_fd_dir) < 0)
		die("fchdir /proc/self/fd");
	rc = value ? setxattr(num, name, value, len, 0) : removexattr(num, name);
	e = errno;
	if (fchdir(cwd_fd) < 0)
		die("fchdir back");
	errno = e;
	return rc;
}

/*
 * An EPERM on the object held by fd, which fstat showed as *before.
 * The kernel itself answers EPERM for user.* xattrs on fifos and
 * symlinks and for hard links to directories, before FUSE is asked
 * (kernel_refuses); for any other object only the daemon can have
 * answered it, and that is a finding.  Prints the evidence for one: the
 * object before and after the call, and what the path holds now.
 */
static bool eperm_excused(const char *op, const char *path, int fd, const struct stat *before,
			  bool kernel_refuses)
{
	struct stat after, now;
	bool after_ok, now_ok;
	char b1[64], b2[64], b3[64];

	now_ok = fstatat(rootfd, path, &now, AT_SYMLINK_NOFOLLOW) == 0;
	if (kernel_refuses) {
		/* A look at the path alone after the call would have
		 * blamed the daemon here: say how often that happens. */
		if (opt_verbose && now_ok && (S_ISREG(now.st_mode) || S_ISDIR(now.st_mode)))
			fprintf(stderr, "%ld note: %s %s: EPERM from the kernel for the %s, "
				"but the path now holds %s\n", ops_done, op, path,
				describe(true, before, b1, sizeof(b1)),
				describe(true, &now, b3, sizeof(b3)));
		return true;
	}
	after_ok = fstat(fd, &after) == 0;
	fprintf(stderr, "ovs-workload: op %ld: %s %s: EPERM from the daemon: the object "
		"was %s before the call, %s after it; the path now holds %s\n", ops_done, op,
		path, describe(true, before, b1, sizeof(b1)),
		describe(after_ok, &after, b2, sizeof(b2)), describe(now_ok, &now, b3, sizeof(b3)));
	return false;
}

static void op_xattr(bool set)
{
	static const char *const names[] = { "user.a", "user.b", "user.color", "user.long.name" };
	const char *p = pick("fd");
	const char *name = names[rnd_below(4)];
	char value[128];
	struct stat before;
	size_t len = 0;
	int fd, rc;

	if (!p)
		return;
	if (set) {
		len = rnd_below(sizeof(value));
		fill_random(value, len);
	}
	/* The object first, then the call on it: another worker (--jail
	 * runs) may have put a fifo or a symlink at p, which take no user.*
	 * xattrs, but then fstat shows it. */
	fd = openat(rootfd, p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	rc = fd;
	if (fd >= 0) {
		rc = fstat(fd, &before);
		if (rc == 0)
			rc = xattr_on_fd(fd, name, set ? value : NULL, len);
		if (rc < 0 && errno == EPERM) {
			if (eperm_excused(set ? "setxattr" : "removexattr", p, fd, &before,
					  !S_ISREG(before.st_mode) && !S_ISDIR(before.st_mode)))
				errno = EINVAL;
			else
				errno = EPERM;
		}
		close(fd);
	}
	done(set ? "setxattr" : "removexattr", p, name, rc);
}

static void op_symlink(void)
{
	char *p = pick_new_path();
	const char *to = pick("fdlp");
	char target[PATH_MAX];

	if (!to || chance(30))
		snprintf(target, sizeof(target), "dangling/%u", (unsigned)rnd_below(1000));
	else
		snprintf(target, sizeof(target), "%s%s", chance(50) ? "/" : "", to);
	if (done("symlink", p, target, symlinkat(target, rootfd, p)))
		model_add(p, 'l');
	free(p);
}

static void op_link(void)
{
	const char *from = pick("f");
	struct stat before;
	char *p;
	int fd, rc;

	if (!from)
		return;
	p = pick_new_path();
	/* As in op_xattr: the object first, so that an EPERM can be told
	 * apart (the kernel refuses to link a directory another worker
	 * put there, before FUSE is asked). */
	fd = openat(rootfd, from, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	rc = fd;
	if (fd >= 0) {
		rc = fstat(fd, &before);
		if (rc == 0)
			rc = linkat(fd, "", rootfd, p, AT_EMPTY_PATH);
		if (rc < 0 && errno == EPERM) {
			if (eperm_excused("link", from, fd, &before, S_ISDIR(before.st_mode)))
				errno = EISDIR;
			else
				errno = EPERM;
		}
		close(fd);
	}
	if (done("link", from, p, rc))
		model_add(p, 'f');
	free(p);
}

static void op_mkfifo(void)
{
	char *p = pick_new_path();

	if (done("mkfifo", p, NULL, mkfifoat(rootfd, p, 0644)))
		model_add(p, 'p');
	free(p);
}

static void op_mkdir(void)
{
	char *p = pick_new_path();

	if (done("mkdir", p, NULL, mkdirat(rootfd, p, chance(80) ? 0755 : 0700)))
		model_add(p, 'd');
	free(p);
}

static void op_unlink(void)
{
	const char *p = pick("flp");
	char *dup;

	if (!p)
		return;
	dup = strdup(p);
	if (done("unlink", dup, NULL, unlinkat(rootfd, dup, 0)))
		model_remove_tree(dup);
	free(dup);
}

static void op_rmdir(void)
{
	const char *p = NULL;
	char *dup;

	/* Mostly an empty one; now and then any, for ENOTEMPTY. */
	for (int tries = 0; tries < 8; tries++) {
		p = pick("d");
		if (!p || chance(15) || is_empty_dir(p))
			break;
	}
	if (!p)
		return;
	dup = strdup(p);
	if (done("rmdir", dup, NULL, unlinkat(rootfd, dup, AT_REMOVEDIR)))
		model_remove_tree(dup);
	free(dup);
}

/* rename of a file or a directory to a random name, which often exists:
 * files replace files, directories replace empty directories, and the
 * other combinations fail with an expected errno. */
static void op_rename(bool dir, unsigned flags)
{
	const char *src = pick(dir ? "d" : "flp");
	char *from, *to;
	int rc;

	if (!src)
		return;
	from = strdup(src);
	/* Now and then straight onto an existing entry of the same kind. */
	if (chance(30) && (src = pick(dir ? "d" : "flp")))
		to = strdup(src);
	else
		to = pick_new_path();
	if (dir && depth(to) + subtree_height(from) > 2 * MAX_DEPTH) {
		free(from);
		free(to);
		return;
	}
	rc = flags ? renameat2(rootfd, from, rootfd, to, flags) : renameat(rootfd, from, rootfd, to);
	if (done(flags ? "rename-noreplace" : dir ? "rename-dir" : "rename", from, to, rc) &&
	    strcmp(from, to) != 0)
		model_rename(from, to);
	free(from);
	free(to);
}

static void op_exchange(void)
{
	const char *a = pick("fdlp"), *b = pick("fdlp");
	char *x, *y;

	if (!a || !b)
		return;
	x = strdup(a);
	y = strdup(b);
	if (done("exchange", x, y, renameat2(rootfd, x, rootfd, y, RENAME_EXCHANGE)) &&
	    strcmp(x, y) != 0)
		model_exchange(x, y);
	free(x);
	free(y);
}


/* ---- operations of --extended ---- */

#define HELD_FDS	4

/* Descriptors kept open across operations and takes: the daemon must
 * still preserve on their next change after a take (rule 10). */
static int held_fd[HELD_FDS] = { -1, -1, -1, -1 };
static char *held_path[HELD_FDS];

static void op_held_open(void)
{
	unsigned slot = rnd_below(HELD_FDS);
	const char *p = pick("f");
	int fd;

	if (!p)
		return;
	if (held_fd[slot] >= 0)
		close(held_fd[slot]);
	free(held_path[slot]);
	held_path[slot] = strdup(p);
	fd = open_file(p, O_RDWR);
	if (fd >= 0) {
		struct stat st;

		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			fd = -1;
			errno = EISDIR;
		}
	}
	held_fd[slot] = fd;
	done("held-open", held_path[slot], NULL, fd);
}

static void op_held_write(void)
{
	unsigned slot = rnd_below(HELD_FDS);
	int fd = held_fd[slot], rc;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		return;
	if (chance(20)) {
		off_t to = rnd_below(st.st_size + 4096);

		done("held-truncate", held_path[slot], NULL, ftruncate(fd, to));
		return;
	}
	{
		size_t len = rnd_below(8192) + 1;
		off_t off = rnd_below(st.st_size + 4096);

		if (off + (off_t)len > MAX_FILE_SIZE)
			off = rnd_below(MAX_FILE_SIZE - len);
		rc = write_random(fd, off, len, false);
	}
	done("held-write", held_path[slot], NULL, rc);
}

static void op_fallocate(void)
{
	static const int modes[] = {
		FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE,
		FALLOC_FL_KEEP_SIZE, 0,
	};
	const char *p = pick("f");
	int mode = modes[rnd_below(4)], fd, rc;
	off_t size, off, len;

	if (!p)
		return;
	size = size_of(p);
	off = rnd_below(size + 8192);
	len = rnd_below(65536) + 1;
	if (off + len > MAX_FILE_SIZE)
		return;
	fd = open_file(p, O_WRONLY);
	rc = fd;
	if (fd >= 0) {
		rc = fallocate(fd, mode, off, len);
		/* A mode the filesystem or FUSE lacks is not a finding. */
		if (rc < 0 && errno == EOPNOTSUPP)
			rc = 0;
		else if (rc < 0 && errno == ESPIPE)
			stale_fifo(fd);
		close(fd);
	}
	done("fallocate", p, NULL, rc);
}

static void op_copy_range(void)
{
	const char *a = pick("f"), *b = pick("f");
	int in, out, rc;
	off_t size, off_in, off_out;
	size_t len;
	char *from;

	if (!a || !b)
		return;
	from = strdup(a);
	size = size_of(from);
	off_in = rnd_below(size + 1);
	len = rnd_below(32768) + 1;
	off_out = rnd_below(size_of(b) + 4096);
	if (off_out + (off_t)len > MAX_FILE_SIZE) {
		free(from);
		return;
	}
	in = open_file(from, O_RDONLY);
	out = in < 0 ? -1 : open_file(b, O_WRONLY);
	rc = out;
	if (out >= 0) {
		loff_t oi = off_in, oo = off_out;

		rc = copy_file_range(in, &oi, out, &oo, len, 0) < 0 ? -1 : 0;
	}
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	done("copy-range", from, b, rc);
	free(from);
}

/* A write far past the end leaves a hole: copies keep it sparse. */
static void op_sparse_write(void)
{
	const char *p = pick("f");
	off_t off = MAX_FILE_SIZE / 2 + rnd_below(MAX_FILE_SIZE / 2 - 8192);
	int fd, rc;

	if (!p)
		return;
	fd = open_file(p, O_WRONLY);
	rc = fd;
	if (fd >= 0) {
		rc = write_random(fd, off, rnd_below(4096) + 1, false);
		close(fd);
	}
	done("sparse-write", p, NULL, rc);
}

/* User data that looks like overlay metadata (rule 14).  Only names that
 * mean nothing on the lowest layer (SRC itself in the oracle's overlay):
 * an opaque mark there hides nothing, but an unescaped copy in a layer
 * above would hide SRC's entries. */
static void op_trusted_xattr(void)
{
	static const char *const names[] = {
		"trusted.overlay.opaque", "trusted.overlay.origin", "trusted.overlay.nlink",
		"trusted.overlay.ovsnap.origin",
	};
	const char *p = pick(chance(50) ? "d" : "f");
	const char *name = names[rnd_below(4)];
	char *full;
	int rc;

	if (!p)
		return;
	full = full_path(p);
	if (chance(80))
		rc = lsetxattr(full, name, "y", 1, 0);
	else
		rc = lremovexattr(full, name);
	done("trusted-xattr", p, name, rc);
	free(full);
}

enum op {
	OP_CREATE, OP_PWRITE, OP_APPEND, OP_TRUNCATE, OP_OPEN_TRUNC, OP_CHMOD, OP_CHOWN,
	OP_UTIMES, OP_SETXATTR, OP_RMXATTR, OP_SYMLINK, OP_LINK, OP_MKFIFO, OP_MKDIR,
	OP_UNLINK, OP_RMDIR, OP_RENAME, OP_RENAME_DIR, OP_NOREPLACE, OP_EXCHANGE,
	/* --extended only */
	OP_HELD_OPEN, OP_HELD_WRITE, OP_FALLOCATE, OP_COPY_RANGE, OP_SPARSE_WRITE,
	OP_TRUSTED_XATTR, OP_COUNT
};
#define OP_FIRST_EXTENDED OP_HELD_OPEN

/* Relative frequencies. */
static const int weight[OP_COUNT] = {
	[OP_CREATE] = 10, [OP_PWRITE] = 10, [OP_APPEND] = 6, [OP_TRUNCATE] = 5,
	[OP_OPEN_TRUNC] = 3, [OP_CHMOD] = 4, [OP_CHOWN] = 3, [OP_UTIMES] = 4,
	[OP_SETXATTR] = 4, [OP_RMXATTR] = 2, [OP_SYMLINK] = 3, [OP_LINK] = 4,
	[OP_MKFIFO] = 2, [OP_MKDIR] = 5, [OP_UNLINK] = 8, [OP_RMDIR] = 4,
	[OP_RENAME] = 8, [OP_RENAME_DIR] = 4, [OP_NOREPLACE] = 2, [OP_EXCHANGE] = 4,
	[OP_HELD_OPEN] = 3, [OP_HELD_WRITE] = 8, [OP_FALLOCATE] = 3, [OP_COPY_RANGE] = 3,
	[OP_SPARSE_WRITE] = 2, [OP_TRUSTED_XATTR] = 3,
};

static bool creates(enum op op)
{
	return op == OP_CREATE || op == OP_SYMLINK || op == OP_LINK || op == OP_MKFIFO ||
	       op == OP_MKDIR;
}

/* Under --jail: the lock of the operations of all workers of one tree
 * that change or depend on where paths lead (see the top comment). */
static int jail_lock_fd = -1;

static int path_lock_mode(enum op op)
{
	switch (op) {
	case OP_RENAME: case OP_RENAME_DIR: case OP_NOREPLACE: case OP_EXCHANGE:
		return LOCK_EX;
	case OP_MKDIR: case OP_RMDIR: case OP_UNLINK: case OP_SYMLINK:
		return LOCK_SH;
	default:
		return 0;
	}
}

static void one_op_locked(enum op op);

static void one_op(void)
{
	enum op op, end = opt_extended ? OP_COUNT : OP_FIRST_EXTENDED;
	int total = 0, r, mode;

	for (op = 0; op < end; op++)
		total += weight[op];
	r = rnd_below(total);
	for (op = 0; op < end && r >= weight[op]; op++)
		r -= weight[op];
	/* A full tree shrinks instead of growing. */
	if (creates(op) && nnodes >= MAX_ENTRIES)
		op = chance(70) ? OP_UNLINK : OP_RMDIR;
	mode = jail_lock_fd >= 0 ? path_lock_mode(op) : 0;
	while (mode && flock(jail_lock_fd, mode) < 0)
		if (errno != EINTR)
			die("flock");
	one_op_locked(op);
	if (mode && flock(jail_lock_fd, LOCK_UN) < 0)
		die("flock");
}

static void one_op_locked(enum op op)
{
	switch (op) {
	case OP_CREATE: op_create(); break;
	case OP_PWRITE: op_write(0); break;
	case OP_APPEND: op_write(1); break;
	case OP_TRUNCATE: op_truncate(); break;
	case OP_OPEN_TRUNC: op_open_trunc(); break;
	case OP_CHMOD: op_chmod(); break;
	case OP_CHOWN: op_chown(); break;
	case OP_UTIMES: op_utimes(); break;
	case OP_SETXATTR: op_xattr(true); break;
	case OP_RMXATTR: op_xattr(false); break;
	case OP_SYMLINK: op_symlink(); break;
	case OP_LINK: op_link(); break;
	case OP_MKFIFO: op_mkfifo(); break;
	case OP_MKDIR: op_mkdir(); break;
	case OP_UNLINK: op_unlink(); break;
	case OP_RMDIR: op_rmdir(); break;
	case OP_RENAME: op_rename(false, 0); break;
	case OP_RENAME_DIR: op_rename(true, 0); break;
	case OP_NOREPLACE: op_rename(chance(30), RENAME_NOREPLACE); break;
	case OP_EXCHANGE: op_exchange(); break;
	case OP_HELD_OPEN: op_held_open(); break;
	case OP_HELD_WRITE: op_held_write(); break;
	case OP_FALLOCATE: op_fallocate(); break;
	case OP_COPY_RANGE: op_copy_range(); break;
	case OP_SPARSE_WRITE: op_sparse_write(); break;
	case OP_TRUSTED_XATTR: op_trusted_xattr(); break;
	case OP_COUNT: break;
	}
}

/* ---- takes ---- */

static bool valid_id(const char *id)
{
	if (!*id || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
		return false;
	for (; *id; id++)
		if (!isalnum((unsigned char)*id) && !strchr("._-@", *id))
			return false;
	return true;
}

/* Run cmd with bash -c (sh -c without bash), its stdout on a pipe: tests
 * write hooks like 'echo $RANDOM', which /bin/sh on Debian lacks. */
static FILE *run_hook(const char *cmd, pid_t *pid)
{
	int fds[2];
	FILE *f;

	if (pipe2(fds, O_CLOEXEC) < 0)
		die("pipe");
	*pid = fork();
	if (*pid < 0)
		die("fork");
	if (*pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execlp("bash", "bash", "-c", cmd, (char *)NULL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (!f)
		die("fdopen");
	return f;
}

/* Manifest first, then the hook, then the manifest gets the id's name:
 * nothing touches DIR in between, so it shows DIR as the take found it. */
static void take(int n)
{
	struct manifest_opts mopts = { .no_dir_mtime = opt_no_dir_mtime };
	char pending[PATH_MAX], final[PATH_MAX], id[256] = "";
	FILE *f, *hook;
	pid_t pid;
	int status;

	snprintf(pending, sizeof(pending), "%s/.pending.manifest", opt_manifest_dir ?: ".");
	if (opt_manifest_dir) {
		f = fopen(pending, "w");
		if (!f)
			die(pending);
		if (manifest_write(opt_dir, &mopts, f) < 0) {
			fprintf(stderr, "ovs-workload: manifest of %s failed at take %d\n", opt_dir, n);
			exit(3);
		}
		if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0)
			die(pending);
	}
	fflush(stdout);
	hook = run_hook(opt_take_cmd, &pid);
	if (!fgets(id, sizeof(id), hook))
		id[0] = 0;
	while (fgetc(hook) != EOF)
		;
	fclose(hook);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	id[strcspn(id, " \t\r\n")] = 0;
	if (status != 0 || !valid_id(id)) {
		fprintf(stderr, "ovs-workload: take %d after op %ld: '%s' %s (id '%s')\n", n, ops_done,
			opt_take_cmd, status == 0 ? "printed no valid snapshot id" :
			WIFEXITED(status) ? "failed" : "was killed", id);
		exit(3);
	}
	if (opt_manifest_dir) {
		snprintf(final, sizeof(final), "%s/%s.manifest", opt_manifest_dir, id);
		if (rename(pending, final) < 0)
			die(final);
	}
	printf("take %d after op %ld: snapshot %s\n", n, ops_done, id);
}

static void usage(FILE *out, int status)
{
	fputs("Usage: ovs-workload [options] DIR\n"
	      "Run a seeded random workload on DIR, taking snapshots at random points.\n"
	      "  --seed N           seed of the run (default 1)\n"
	      "  --ops N            number of operations (default 1000)\n"
	      "  --takes K          number of takes spread over the run (default 0)\n"
	      "  --take-cmd CMD     bash command taking a snapshot; prints its id\n"
	      "  --manifest-dir D   write D/<id>.manifest of DIR at each take\n"
	      "  --no-dir-mtime     leave directory mtimes out of the manifests\n"
	      "  --extended         add held descriptors, fallocate, copy_file_range,\n"
	      "                     sparse writes and trusted.overlay.* xattrs\n"
	      "  --jail             chroot into DIR (for workloads running at once)\n"
	      "  --max-excused N    fail when more than N operations were excused\n"
	      "  --verbose          log every operation on stderr\n", out);
	exit(status);
}

static long parse_num(const char *s, const char *what)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno || *end || v < 0) {
		fprintf(stderr, "ovs-workload: bad %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seed", required_argument, NULL, 's' },
		{ "ops", required_argument, NULL, 'n' },
		{ "takes", required_argument, NULL, 'k' },
		{ "take-cmd", required_argument, NULL, 'c' },
		{ "manifest-dir", required_argument, NULL, 'm' },
		{ "no-dir-mtime", no_argument, NULL, 'D' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "extended", no_argument, NULL, 'E' },
		{ "jail", no_argument, NULL, 'J' },
		{ "max-excused", required_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	long *take_at = NULL, next_take = 0;
	char *lock_path;
	int c;

	while ((c = getopt_long(argc, argv, "s:n:k:c:m:DvEJX:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's': opt_seed = parse_num(optarg, "seed"); break;
		case 'n': opt_ops = parse_num(optarg, "number of operations"); break;
		case 'k': opt_takes = parse_num(optarg, "number of takes"); break;
		case 'c': opt_take_cmd = optarg; break;
		case 'm': opt_manifest_dir = optarg; break;
		case 'D': opt_no_dir_mtime = true; break;
		case 'v': opt_verbose = true; break;
		case 'E': opt_extended = true; break;
		case 'J': opt_jail = true; break;
		case 'X': opt_max_excused = parse_num(optarg, "number of excused operations"); break;
		case 'h': usage(stdout, 0); break;
		default: usage(stderr, 2);
		}
	}
	if (optind != argc - 1)
		usage(stderr, 2);
	if (opt_takes && !opt_take_cmd) {
		fputs("ovs-workload: --takes needs --take-cmd\n", stderr);
		return 2;
	}
	opt_dir = argv[optind];
	proc_fd_dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd_dir < 0)
		die("/proc/self/fd");
	if (opt_jail) {
		if (opt_manifest_dir || opt_takes) {
			fputs("ovs-workload: --jail takes no snapshots\n", stderr);
			return 2;
		}
		if (asprintf(&lock_path, "%s/..", opt_dir) < 0)
			die("asprintf");
		jail_lock_fd = open(lock_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (jail_lock_fd < 0)
			die(lock_path);
		free(lock_path);
		if (chroot(opt_dir) < 0 || chdir("/") < 0)
			die(opt_dir);
		opt_dir = "/";
	}
	rootfd = open(opt_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		die(opt_dir);
	cwd_fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cwd_fd < 0)
		die("the working directory");
	/* One take at a random point of each of K equal stretches, drawn
	 * from a stream of their own so that the operations of a seed are
	 * the same with and without takes (until the first take rescans). */
	rng_state = opt_seed * 0x9e3779b97f4a7c15ULL + 0x7a6b;
	if (opt_takes) {
		take_at = calloc(opt_takes, sizeof(*take_at));
		if (!take_at)
			die("calloc");
		for (long i = 0; i < opt_takes; i++) {
			long from = opt_ops * i / opt_takes, to = opt_ops * (i + 1) / opt_takes;

			take_at[i] = from + rnd_below(to - from > 0 ? to - from : 1);
		}
	}
	rng_state = opt_seed * 0x2545f4914f6cdd1dULL + 1;
	model_rescan();
	for (ops_done = 0; ops_done < opt_ops; ops_done++) {
		while (next_take < opt_takes && take_at[next_take] == ops_done) {
			model_rescan();
			take(++next_take);
		}
		if (ops_done % RESCAN_EVERY == 0)
			model_rescan();
		one_op();
	}
	while (next_take < opt_takes)
		take(++next_take);
	model_rescan();
	fputs("excused:", stderr);
	for (int e = 0; e < 256; e++)
		if (excused_by_errno[e])
			fprintf(stderr, " %s=%ld", strerrorname_np(e) ?: "?", excused_by_errno[e]);
	fputc('\n', stderr);
	if (opt_max_excused >= 0 && ops_skipped > opt_max_excused) {
		fprintf(stderr, "ovs-workload: %ld operations excused, more than --max-excused %ld\n",
			ops_skipped, opt_max_excused);
		unexpected_errors++;
	}
	printf("seed %" PRIu64 ": %ld ops done (%ld skipped), %ld takes, %zu entries, "
	       "%ld unexpected errors\n", opt_seed, ops_done, ops_skipped, next_take, nnodes,
	       unexpected_errors);
	free(take_at);
	close(rootfd);
	return unexpected_errors ? 1 : 0;
}
