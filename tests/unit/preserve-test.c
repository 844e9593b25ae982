/*
 * preserve-test: drive the preservation engine from shell tests, and print
 * manifests of trees to compare a kernel overlay view with the state
 * before a change.
 *
 *   preserve-test init SRC UPPER WORK           new layer, root metadata
 *   preserve-test OP SRC UPPER WORK PATH...     OP: object name rmdir subtree
 *                                               covered cloned objectcov
 *   preserve-test objectat SRC UPPER WORK DIR PATH...
 *                                               object, each PATH given the
 *                                               open SRC/DIR as its srcdirfd
 *   preserve-test parallel SRC UPPER WORK OP:PATH...
 *                                               one thread per OP:PATH (OP:
 *                                               object or name), all started
 *                                               at once on one layer, as the
 *                                               daemon's parallel first
 *                                               changes (issue 13)
 *   preserve-test unlink SRC UPPER WORK PATH... rule 1 and the unlink, as the
 *                                               daemon makes them: "moved" or
 *                                               "unlinked" per path
 *   preserve-test manifest DIR                  one line per object
 *   preserve-test hlmap SRC                     self-test of the link map
 *   preserve-test hlbench DIR NDIRS NFILES      time the link map on DIR/a and
 *                                               its cp -al copy DIR/b, NDIRS
 *                                               directories of NFILES files
 *
 * OP builds the hard link map of SRC first, as the daemon does at setup.
 * "covered" prints 1 or 0 per path; "cloned" preserves like "object" and
 * prints "clone" or "copy"; "objectcov" and "unlinkcov" preserve like
 * "object" and "unlink" and print "siblings" when the engine found every
 * name in the path's folder covered (OVS_COV_SIBLINGS), "-" when not.  Exit 0 on success, 1 with a message on error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "libovsnap.h"
#include "preserve.h"

static int fail(const char *what, int rc)
{
	fprintf(stderr, "preserve-test: %s: %s\n", what,
		*ovs_last_error() ? ovs_last_error() : strerror(-rc));
	return 1;
}

/* ---- manifest -------------------------------------------------------------- */

struct obj {
	char *path;
	struct stat st;
};

static struct obj *objs;
static size_t nobjs, capobjs;

static void walk(int dirfd, const char *path)
{
	DIR *dir;
	struct dirent *de;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_NOATIME);

	if (fd < 0 || !(dir = fdopendir(fd))) {
		perror(path);
		exit(1);
	}
	while ((de = readdir(dir))) {
		char child[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(child, sizeof(child), "%s/%s", path, de->d_name);
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			perror(child);
			exit(1);
		}
		if (nobjs == capobjs) {
			capobjs = capobjs ? capobjs * 2 : 256;
			objs = realloc(objs, capobjs * sizeof(*objs));
		}
		objs[nobjs].path = strdup(child);
		objs[nobjs++].st = st;
		if (S_ISDIR(st.st_mode)) {
			int cfd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY |
					 O_NOFOLLOW | O_NOATIME);

			if (cfd < 0) {
				perror(child);
				exit(1);
			}
			walk(cfd, child);
			close(cfd);
		}
	}
	closedir(dir);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct obj *)a)->path, ((const struct obj *)b)->path);
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void print_content(int dirfd, const char *rel)
{
	uint64_t h = 1469598103934665603ULL;
	char buf[65536];
	ssize_t n;
	int fd = openat(dirfd, rel, O_RDONLY | O_NOFOLLOW | O_NOATIME);

	if (fd < 0) {
		perror(rel);
		exit(1);
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
	close(fd);
	printf(" data=%016llx", (unsigned long long)h);
}

static void print_xattrs(const char *abs)
{
	char list[65536], *names[1024], val[65536];
	ssize_t len = llistxattr(abs, list, sizeof(list));
	size_t n = 0, i;

	if (len <= 0)
		return;
	for (char *p = list; p < list + len && n < 1024; p += strlen(p) + 1)
		names[n++] = p;
	qsort(names, n, sizeof(*names), by_str);
	for (i = 0; i < n; i++) {
		ssize_t vl = lgetxattr(abs, names[i], val, sizeof(val));

		printf(" x:%s=", names[i]);
		for (ssize_t j = 0; j < vl; j++)
			printf("%02x", (unsigned char)val[j]);
	}
}

static void print_time(const char *tag, const struct timespec *t)
{
	printf(" %s=%lld.%09ld", tag, (long long)t->tv_sec, t->tv_nsec);
}

/*
 * Stat everything first (reads come later and use O_NOATIME anyway), then
 * print sorted.  Hard links show as "link=<first name of the inode>".
 * Directory sizes and link counts differ between a layer and the original
 * by nature, so they are left out; so are inode numbers and ctimes.
 */
static int manifest(const char *root)
{
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_NOATIME);
	struct stat rst;
	size_t i, j;

	if (rootfd < 0 || fstat(rootfd, &rst) < 0) {
		perror(root);
		return 1;
	}
	objs = NULL;
	nobjs = capobjs = 0;
	walk(rootfd, "");
	qsort(objs, nobjs, sizeof(*objs), by_path);
	printf("/ mode=%o owner=%u:%u", rst.st_mode, rst.st_uid, rst.st_gid);
	print_time("mtime", &rst.st_mtim);
	print_time("atime", &rst.st_atim);
	print_xattrs(root);
	printf("\n");
	for (i = 0; i < nobjs; i++) {
		struct stat *st = &objs[i].st;
		char abs[PATH_MAX];

		snprintf(abs, sizeof(abs), "%s%s", root, objs[i].path);
		printf("%s mode=%o owner=%u:%u", objs[i].path, st->st_mode, st->st_uid,
		       st->st_gid);
		print_time("mtime", &st->st_mtim);
		/* readlink itself touches a symlink's atime */
		if (!S_ISLNK(st->st_mode))
			print_time("atime", &st->st_atim);
		if (!S_ISDIR(st->st_mode))
			printf(" nlink=%lu", (unsigned long)st->st_nlink);
		if (S_ISREG(st->st_mode)) {
			printf(" size=%lld", (long long)st->st_size);
			print_content(rootfd, objs[i].path + 1);
		}
		if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
			printf(" rdev=%u:%u", major(st->st_rdev), minor(st->st_rdev));
		if (S_ISLNK(st->st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlink(abs, target, sizeof(target) - 1);

			target[n < 0 ? 0 : n] = '\0';
			printf(" target=%s", target);
		}
		if (!S_ISDIR(st->st_mode) && st->st_nlink > 1) {
			for (j = 0; j < nobjs; j++)
				if (objs[j].st.st_ino == st->st_ino &&
				    objs[j].st.st_dev == st->st_dev)
					break;
			printf(" link=%s", objs[j].path);
		}
		print_xattrs(abs);
		printf("\n");
	}
	close(rootfd);
	return 0;
}

/* ---- the link map ------------------------------------------------------------ */

/* The engine names objects by their chain of names: split the command
 * line's strings (a static pool: the test is short-lived). */
static struct ovs_relpath *rel(const char *path)
{
	static struct ovs_relpath pool[64];
	static size_t next;
	struct ovs_relpath *rp = &pool[next++ % 64];
	void *mem;

	if (ovs_relpath_split(path, rp, &mem) < 0) {
		fprintf(stderr, "preserve-test: %s: %s\n", path, ovs_last_error());
		exit(2);
	}
	return rp;
}

static int expect_names(struct ovs_hlmap *m, int srcfd, const char *path, size_t want)
{
	struct ovs_relpath *names;
	size_t n;
	int rc = ovs_hlmap_names(m, srcfd, rel(path), &names, &n);
	char *first;

	if (rc < 0)
		return fail(path, rc);
	first = ovs_relpath_join(&names[0]);
	if (n != want || !first || strcmp(first, path)) {
		fprintf(stderr, "preserve-test: %s: %zu names, want %zu:", path, n, want);
		for (size_t i = 0; i < n; i++) {
			char *s = ovs_relpath_join(&names[i]);

			fprintf(stderr, " %s", s ? s : "?");
			free(s);
		}
		fprintf(stderr, "\n");
		free(first);
		ovs_hlmap_names_free(names, n);
		return 1;
	}
	free(first);
	ovs_hlmap_names_free(names, n);
	return 0;
}

/* names[0..n) from the map for path: each a name in SRC of path's inode
 * (st), no two alike, and with path_first names[0] is path itself; says
 * what is wrong, and 1, or 0. */
static int names_check(int srcfd, const char *path, const struct stat *st,
		       const struct ovs_relpath *names, size_t n, bool path_first)
{
	struct stat nst;
	size_t i, j;
	char **s = calloc(n ? n : 1, sizeof(*s));
	int bad = 0;

	if (!s)
		return fail(path, -ENOMEM);
	for (i = 0; i < n; i++) {
		s[i] = ovs_relpath_join(&names[i]);
		if (!s[i] || (path_first && (i == 0) != !strcmp(s[i], path)) ||
		    fstatat(srcfd, s[i], &nst, AT_SYMLINK_NOFOLLOW) < 0 ||
		    nst.st_ino != st->st_ino) {
			fprintf(stderr, "preserve-test: %s: name %zu, %s, is not one of its names%s\n",
				path, i, s[i] ? s[i] : "?", path_first ? " (path first)" : "");
			bad = 1;
		}
		for (j = 0; s[i] && j < i; j++) {
			if (s[j] && !strcmp(s[i], s[j])) {
				fprintf(stderr, "preserve-test: %s: name %s twice\n", path, s[i]);
				bad = 1;
			}
		}
	}
	for (i = 0; i < n; i++)
		free(s[i]);
	free(s);
	return bad;
}

/* SRC's object at path has exactly want names in the map, as
 * ovs_hlmap_names (max SIZE_MAX) or ovs_hlmap_names_max gives them, each
 * a name in SRC of that same inode, no two alike; path_first: path is
 * the first. */
static int names_expect(struct ovs_hlmap *m, int srcfd, const char *path, size_t max,
			size_t want, bool path_first)
{
	struct ovs_relpath *names;
	struct stat st;
	size_t n;
	int rc = max == SIZE_MAX ? ovs_hlmap_names(m, srcfd, rel(path), &names, &n)
				 : ovs_hlmap_names_max(m, srcfd, rel(path), max, &names, &n);
	int bad;

	if (rc < 0)
		return fail(path, rc);
	if (fstatat(srcfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		ovs_hlmap_names_free(names, n);
		return fail(path, -errno);
	}
	bad = names_check(srcfd, path, &st, names, n, path_first);
	if (n != want) {
		fprintf(stderr, "preserve-test: %s: %zu names, want %zu\n", path, n, want);
		bad = 1;
	}
	ovs_hlmap_names_free(names, n);
	return bad;
}

/* SRC's object at path has exactly want names in the map. */
static int expect_name_set(struct ovs_hlmap *m, int srcfd, const char *path, size_t want)
{
	return names_expect(m, srcfd, path, SIZE_MAX, want, false);
}

/* link(existing, name) in SRC and in the map. */
static int link_name(struct ovs_hlmap *m, int srcfd, const char *existing, const char *name)
{
	if (linkat(srcfd, existing, srcfd, name, 0) < 0)
		return fail(name, -errno);
	return ovs_hlmap_link(m, srcfd, rel(existing), rel(name)) < 0 ? fail(name, -EIO) : 0;
}

/* link(existing, P) for P = prefix followed by from .. to - 1 in 3 digits. */
static int link_names(struct ovs_hlmap *m, int srcfd, const char *existing, const char *prefix,
		      int from, int to)
{
	char name[64];

	for (int i = from; i < to; i++) {
		snprintf(name, sizeof(name), "%s%03d", prefix, i);
		if (link_name(m, srcfd, existing, name))
			return 1;
	}
	return 0;
}

/* unlink(name) in SRC and in the map. */
static int unlink_name(struct ovs_hlmap *m, int srcfd, const char *name)
{
	struct stat st;

	if (fstatat(srcfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || unlinkat(srcfd, name, 0) < 0)
		return fail(name, -errno);
	return ovs_hlmap_unlink(m, rel(name), &st) < 0 ? fail(name, -EIO) : 0;
}

/* ovs_hlmap_names_max(path, max) of an inode with at least max names:
 * path first, then max - 1 other names of it, no two alike (the daemon
 * asks for one other name at each unlink and rename, which must not cost
 * all of them). */
static int expect_names_max(struct ovs_hlmap *m, int srcfd, const char *path, size_t max)
{
	return names_expect(m, srcfd, path, max, max, true);
}

/* One inode with hundreds of names in two folders: they share buckets of
 * the map's index of names, which grows under them (64 buckets first),
 * and each name lives in its own index ref, so every rename and unlink
 * must drop the very ref of its name, not another of the same inode. */
static int hlmap_many_names(struct ovs_hlmap *m, int srcfd)
{
	char name[64], to[64];
	int fd, i;

	if (mkdirat(srcfd, "many", 0755) < 0 ||
	    (fd = openat(srcfd, "many/n000", O_WRONLY | O_CREAT | O_EXCL, 0644)) < 0 ||
	    close(fd) < 0)
		return fail("many/n000", -errno);
	if (link_names(m, srcfd, "many/n000", "many/n", 1, 200) ||
	    expect_name_set(m, srcfd, "many/n000", 200))
		return 1;
	/* Half of them renamed in the folder, a few to another one. */
	for (i = 0; i < 200; i += 2) {
		snprintf(name, sizeof(name), "many/n%03d", i);
		snprintf(to, sizeof(to), i % 20 ? "many/r%03d" : "D/r%03d", i);
		if (renameat(srcfd, name, srcfd, to) < 0 ||
		    ovs_hlmap_rename(m, rel(name), rel(to)) < 0)
			return fail(to, -errno);
	}
	if (expect_name_set(m, srcfd, "many/n001", 200))
		return 1;
	/* The odd ones unlinked, then new names in their place: new refs
	 * take the memory of the ones freed, and the index grows again (past
	 * 256 names) while they are in two folders. */
	for (i = 1; i < 200; i += 2) {
		snprintf(name, sizeof(name), "many/n%03d", i);
		if (unlink_name(m, srcfd, name))
			return 1;
	}
	if (expect_name_set(m, srcfd, "many/r002", 100))
		return 1;
	if (link_names(m, srcfd, "many/r002", "many/z", 0, 200) ||
	    expect_name_set(m, srcfd, "D/r000", 300) ||
	    expect_names_max(m, srcfd, "many/z123", 1) ||
	    expect_names_max(m, srcfd, "many/z123", 2) ||
	    expect_names_max(m, srcfd, "D/r000", 7))
		return 1;
	{
		struct ovs_relpath *none;
		size_t nnone;

		if (ovs_hlmap_names_max(m, srcfd, rel("D/r000"), 0, &none, &nnone) >= 0) {
			ovs_hlmap_names_free(none, nnone);
			return fail("names_max of no names succeeded", -EINVAL);
		}
	}
	/* The ones in the other folder and ten in this one unlinked,
	 * through the grown index. */
	for (i = 0; i < 210; i += i < 200 ? 20 : 1) {
		snprintf(name, sizeof(name), i < 200 ? "D/r%03d" : "many/z%03d",
			 i < 200 ? i : i - 200);
		if (unlink_name(m, srcfd, name))
			return 1;
	}
	if (expect_name_set(m, srcfd, "many/z010", 280))
		return 1;
	/* The folder renamed: every name in it follows. */
	if (renameat(srcfd, "many", srcfd, "lots") < 0 ||
	    ovs_hlmap_rename(m, rel("many"), rel("lots")) < 0)
		return fail("rename many", -errno);
	if (expect_name_set(m, srcfd, "lots/z050", 280))
		return 1;
	/* Every name but one unlinked, each found through the index: the
	 * last is a plain file again. */
	for (i = 0; i < 389; i++) {
		if (i < 200 && (i % 2 || i % 20 == 0))
			continue;
		snprintf(name, sizeof(name), i < 200 ? "lots/r%03d" : "lots/z%03d",
			 i < 200 ? i : i - 190);
		if (unlink_name(m, srcfd, name))
			return 1;
	}
	return expect_name_set(m, srcfd, "lots/z199", 1);
}

/* One inode under the same name in 300 folders: names that share a bucket
 * of the index differ only by their folder, so each unlink must find the
 * name of its own folder (find_name() compares the folder too). */
static int hlmap_same_name(struct ovs_hlmap *m, int srcfd)
{
	char name[64];
	int fd, i;

	if (mkdirat(srcfd, "same", 0755) < 0 ||
	    (fd = openat(srcfd, "same/x", O_WRONLY | O_CREAT | O_EXCL, 0644)) < 0 ||
	    close(fd) < 0)
		return fail("same/x", -errno);
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "same/d%03d", i);
		if (mkdirat(srcfd, name, 0755) < 0)
			return fail(name, -errno);
		snprintf(name, sizeof(name), "same/d%03d/x", i);
		if (link_name(m, srcfd, "same/x", name))
			return 1;
	}
	if (expect_name_set(m, srcfd, "same/x", 301))
		return 1;
	for (i = 1; i < 300; i += 2) {
		snprintf(name, sizeof(name), "same/d%03d/x", i);
		if (unlink_name(m, srcfd, name))
			return 1;
	}
	return expect_name_set(m, srcfd, "same/d000/x", 151);
}

/* SRC holds a (2 links: a, d/b), single, and d/c linked from outside. */
static int hlmap_selftest(const char *src)
{
	struct ovs_hlmap *m;
	struct stat st;
	size_t outside;
	int srcfd = open(src, O_RDONLY | O_DIRECTORY), rc;

	if (srcfd < 0)
		return fail(src, -errno);
	rc = ovs_hlmap_build(srcfd, &m, &outside);
	if (rc < 0)
		return fail("build", rc);
	if (outside != 1) {
		fprintf(stderr, "preserve-test: outside links %zu, want 1\n", outside);
		return 1;
	}
	if (expect_names(m, srcfd, "a", 2) || expect_names(m, srcfd, "d/b", 2) ||
	    expect_names(m, srcfd, "single", 1))
		return 1;
	/* link a -> e */
	if (linkat(srcfd, "a", srcfd, "e", 0) < 0 || ovs_hlmap_link(m, srcfd, rel("a"), rel("e")) < 0)
		return fail("link", -errno);
	if (expect_names(m, srcfd, "d/b", 3))
		return 1;
	/* link single -> single2: a new entry */
	if (linkat(srcfd, "single", srcfd, "single2", 0) < 0 ||
	    ovs_hlmap_link(m, srcfd, rel("single"), rel("single2")) < 0)
		return fail("link single", -errno);
	if (expect_names(m, srcfd, "single2", 2))
		return 1;
	/* rename the directory d -> D: d/b becomes D/b */
	if (renameat(srcfd, "d", srcfd, "D") < 0 || ovs_hlmap_rename(m, rel("d"), rel("D")) < 0)
		return fail("rename", -errno);
	if (expect_names(m, srcfd, "D/b", 3))
		return 1;
	/* unlink e */
	if (fstatat(srcfd, "e", &st, AT_SYMLINK_NOFOLLOW) < 0 || unlinkat(srcfd, "e", 0) < 0 ||
	    ovs_hlmap_unlink(m, rel("e"), &st) < 0)
		return fail("unlink", -errno);
	if (expect_names(m, srcfd, "a", 2))
		return 1;
	/* rename single2 over a: a loses its old inode's name */
	if (renameat(srcfd, "single2", srcfd, "a") < 0 || ovs_hlmap_rename(m, rel("single2"), rel("a")) < 0)
		return fail("rename over", -errno);
	if (expect_names(m, srcfd, "a", 2) || expect_names(m, srcfd, "D/b", 1))
		return 1;
	/* A link two levels down, then its directory moves up a level:
	 * every name below it follows. */
	if (mkdirat(srcfd, "D/x", 0755) < 0 || linkat(srcfd, "a", srcfd, "D/x/l", 0) < 0 ||
	    ovs_hlmap_link(m, srcfd, rel("a"), rel("D/x/l")) < 0)
		return fail("link below", -errno);
	if (expect_names(m, srcfd, "D/x/l", 3))
		return 1;
	if (renameat(srcfd, "D/x", srcfd, "y") < 0 || ovs_hlmap_rename(m, rel("D/x"), rel("y")) < 0)
		return fail("rename up", -errno);
	if (expect_names(m, srcfd, "y/l", 3) || expect_names(m, srcfd, "single", 3))
		return 1;
	/* Two directories exchanged: each one's names follow it. */
	if (renameat2(srcfd, "y", srcfd, "D", RENAME_EXCHANGE) < 0 ||
	    ovs_hlmap_exchange(m, rel("y"), rel("D")) < 0)
		return fail("exchange", -errno);
	if (expect_names(m, srcfd, "D/l", 3) || expect_names(m, srcfd, "y/b", 1))
		return 1;
	/* A linked file moves to another directory. */
	if (renameat(srcfd, "D/l", srcfd, "y/l2") < 0 ||
	    ovs_hlmap_rename(m, rel("D/l"), rel("y/l2")) < 0)
		return fail("rename file", -errno);
	if (expect_names(m, srcfd, "y/l2", 3) || expect_names(m, srcfd, "a", 3))
		return 1;
	if (hlmap_many_names(m, srcfd) || hlmap_same_name(m, srcfd))
		return 1;
	/* An update that fails (here: a link whose new name is not there)
	 * makes the map refuse to name linked files rather than name too
	 * few; a directory needs no map and still works. */
	if (ovs_hlmap_link(m, srcfd, rel("a"), rel("no such name")) >= 0)
		return fail("link of a missing name succeeded", -EINVAL);
	{
		struct ovs_relpath *names;
		size_t n;

		rc = ovs_hlmap_names(m, srcfd, rel("a"), &names, &n);
		if (rc != -EIO) {
			if (rc >= 0)
				ovs_hlmap_names_free(names, n);
			fprintf(stderr, "preserve-test: names on an invalid map: %d, want -EIO\n",
				rc);
			return 1;
		}
		if (ovs_hlmap_names(m, srcfd, rel("D"), &names, &n) < 0)
			return fail("names of a directory on an invalid map", -EIO);
		ovs_hlmap_names_free(names, n);
	}
	ovs_hlmap_free(m);
	close(srcfd);
	return 0;
}

/* ---- timing the link map (no assertion: figures for a human) ---------------- */

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int hlmap_bench(const char *dir, long ndirs, long nfiles)
{
	char a[64], b[64], c[64];
	struct ovs_hlmap *m;
	size_t outside, total = 0;
	double t0, t1, t2, t3;
	long i, j;
	int dfd, fd;

	if (ndirs <= 0 || nfiles <= 0 || ndirs > 1000000 || nfiles > 1000000)
		return fail("hlbench: NDIRS and NFILES are 1..1000000", -EINVAL);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		return fail(dir, -errno);
	if (mkdirat(dfd, "a", 0755) < 0 || mkdirat(dfd, "b", 0755) < 0)
		return fail("mkdir (DIR must be empty)", -errno);
	for (i = 0; i < ndirs; i++) {
		snprintf(a, sizeof(a), "a/d%06ld", i);
		snprintf(b, sizeof(b), "b/d%06ld", i);
		if (mkdirat(dfd, a, 0755) < 0 || mkdirat(dfd, b, 0755) < 0)
			return fail(a, -errno);
		for (j = 0; j < nfiles; j++) {
			snprintf(a, sizeof(a), "a/d%06ld/f%04ld", i, j);
			snprintf(b, sizeof(b), "b/d%06ld/f%04ld", i, j);
			fd = openat(dfd, a, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (fd < 0 || close(fd) < 0 || linkat(dfd, a, dfd, b, 0) < 0)
				return fail(b, -errno);
		}
	}
	t0 = now();
	if (ovs_hlmap_build(dfd, &m, &outside) < 0)
		return fail("hard link map", -EIO);
	t1 = now();
	/* Every file's names, as a preserve of each would ask. */
	for (i = 0; i < ndirs; i++) {
		for (j = 0; j < nfiles; j++) {
			struct ovs_relpath *names;
			size_t n;

			snprintf(b, sizeof(b), "b/d%06ld/f%04ld", i, j);
			if (ovs_hlmap_names(m, dfd, rel(b), &names, &n) < 0)
				return fail(b, -EIO);
			total += n;
			ovs_hlmap_names_free(names, n);
		}
	}
	t2 = now();
	/* Each directory of b renamed, and one more link in it. */
	for (i = 0; i < ndirs; i++) {
		snprintf(b, sizeof(b), "b/d%06ld", i);
		snprintf(c, sizeof(c), "b/e%06ld", i);
		if (renameat(dfd, b, dfd, c) < 0 || ovs_hlmap_rename(m, rel(b), rel(c)) < 0)
			return fail(c, -EIO);
		snprintf(a, sizeof(a), "b/e%06ld/f0000", i);
		snprintf(c, sizeof(c), "b/e%06ld/l", i);
		if (linkat(dfd, a, dfd, c, 0) < 0 || ovs_hlmap_link(m, dfd, rel(a), rel(c)) < 0)
			return fail(c, -EIO);
	}
	t3 = now();
	printf("%ld dirs x %ld files x 2 names: build %.3f s, names of each %.3f s "
	       "(%zu names), rename+link per dir %.3f s\n",
	       ndirs, nfiles, t1 - t0, t2 - t1, total, t3 - t2);
	ovs_hlmap_free(m);
	close(dfd);
	return 0;
}

/* ---- driving the engine ----------------------------------------------------- */

static int init_layer(const char *src, const char *upper, const char *work)
{
	int srcfd, upfd, rc;

	if (mkdir(upper, 0755) < 0 || mkdir(work, 0700) < 0)
		return fail("mkdir", -errno);
	srcfd = open(src, O_RDONLY | O_DIRECTORY);
	upfd = open(upper, O_RDONLY | O_DIRECTORY);
	if (srcfd < 0 || upfd < 0)
		return fail(src, -errno);
	rc = ovs_copy_root_metadata(srcfd, upfd);
	if (rc < 0)
		return fail("root metadata", rc);
	close(upfd);
	close(srcfd);
	return 0;
}

struct parallel_call {
	pthread_t thread;
	struct ovs_layer *l;
	struct ovs_hlmap *m;
	const char *arg;		/* OP:PATH */
	pthread_barrier_t *start;
	int rc;
};

static void *parallel_one(void *arg)
{
	struct parallel_call *c = arg;
	const char *path = strchr(c->arg, ':') + 1;
	struct ovs_relpath rp;
	void *mem;

	pthread_barrier_wait(c->start);
	c->rc = ovs_relpath_split(path, &rp, &mem);
	if (c->rc < 0)
		return NULL;
	c->rc = !strncmp(c->arg, "name:", 5) ? ovs_preserve_name(c->l, c->m, &rp)
					     : ovs_preserve_object(c->l, c->m, &rp);
	if (c->rc < 0)
		fprintf(stderr, "preserve-test: %s: %s\n", c->arg, ovs_last_error());
	free(mem);
	return NULL;
}

/* Every preserve of argv at once, one thread each. */
static int parallel(struct ovs_layer *l, struct ovs_hlmap *m, int argc, char **argv)
{
	struct parallel_call *calls = calloc(argc, sizeof(*calls));
	pthread_barrier_t start;
	int i, rc = 0;

	if (!calls)
		return fail("parallel", -ENOMEM);
	for (i = 0; i < argc; i++)
		if (strncmp(argv[i], "object:", 7) && strncmp(argv[i], "name:", 5)) {
			fprintf(stderr, "preserve-test: parallel: %s is not OP:PATH\n", argv[i]);
			return 2;
		}
	pthread_barrier_init(&start, NULL, argc);
	for (i = 0; i < argc; i++) {
		calls[i] = (struct parallel_call){ .l = l, .m = m, .arg = argv[i], .start = &start };
		if (pthread_create(&calls[i].thread, NULL, parallel_one, &calls[i]) != 0)
			return fail("pthread_create", -EAGAIN);
	}
	for (i = 0; i < argc; i++) {
		pthread_join(calls[i].thread, NULL);
		if (calls[i].rc < 0)
			rc = 1;
	}
	pthread_barrier_destroy(&start);
	free(calls);
	return rc;
}

/*
 * "unlink": rule 1 before an unlink and the unlink itself, as the daemon
 * makes them (with no open handle: may move; the name's directory open
 * and its stat of the name given, so that the preserve's walk can hand
 * the move its upper directory), printing "moved" when the file itself
 * went into the upper, "unlinked" when it was preserved by a copy (or was
 * covered) and then unlinked.
 */
/* What the last unlink_as_daemon's preserve found covered. */
static unsigned unlink_cov;

static int unlink_as_daemon(struct ovs_layer *l, struct ovs_hlmap *m, int srcfd,
			    struct ovs_relpath *rp, const char *p)
{
	struct ovs_upper_dir to = OVS_UPPER_DIR_INIT;
	const char *slash = strrchr(p, '/'), *base = slash ? slash + 1 : p;
	struct stat st;
	unsigned cov = 0;
	bool moved = false;
	int rc, dfd = srcfd;

	if (slash) {
		char *dir = strndup(p, slash - p);

		if (!dir)
			return -ENOMEM;
		dfd = openat(srcfd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		free(dir);
		if (dfd < 0)
			return -errno;
	}
	rc = fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	rp->srcdirfd = dfd;
	rp->st = &st;
	if (rc == 0)
		rc = ovs_preserve_unlink(l, m, rp, true, &to, &cov);
	unlink_cov = cov;
	if (rc == 1) {
		rc = ovs_move_to_upper(l, rp, &st, &to, &moved);
		if (rc == 0 && !moved)
			rc = ovs_preserve_object(l, m, rp);
	}
	ovs_upper_dir_release(&to);
	if (rc == 0 && !moved && unlinkat(dfd, base, 0) < 0)
		rc = -errno;
	rp->srcdirfd = -1;
	rp->st = NULL;
	if (dfd != srcfd)
		close(dfd);
	if (rc == 0)
		printf("%s\n", moved ? "moved" : "unlinked");
	return rc;
}

int main(int argc, char **argv)
{
	struct ovs_layer *l;
	struct ovs_hlmap *m;
	const char *op;
	size_t outside;
	unsigned cov;
	int srcfd, rc, i, first = 5, dirfd = -1;

	if (argc == 3 && !strcmp(argv[1], "manifest"))
		return manifest(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "hlmap"))
		return hlmap_selftest(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "hlbench"))
		return hlmap_bench(argv[2], atol(argv[3]), atol(argv[4]));
	if (argc == 5 && !strcmp(argv[1], "init"))
		return init_layer(argv[2], argv[3], argv[4]);
	if (argc < 6) {
		fprintf(stderr, "usage: preserve-test OP SRC UPPER WORK PATH...\n");
		return 2;
	}
	op = argv[1];
	srcfd = open(argv[2], O_RDONLY | O_DIRECTORY);
	if (srcfd < 0)
		return fail(argv[2], -errno);
	rc = ovs_layer_open(argv[3], argv[4], srcfd,
			    getenv("OVS_TEST_NOSYNC") && *getenv("OVS_TEST_NOSYNC") ?
				OVS_LAYER_NOSYNC : 0, &l);
	if (rc < 0)
		return fail("open layer", rc);
	rc = ovs_hlmap_build(srcfd, &m, &outside);
	if (rc < 0)
		return fail("hard link map", rc);
	if (!strcmp(op, "parallel")) {
		rc = parallel(l, m, argc - 5, argv + 5);
		ovs_hlmap_free(m);
		ovs_layer_close(l);
		close(srcfd);
		return rc;
	}
	if (!strcmp(op, "objectat")) {
		/* The daemon's case: the directory holding the last name is
		 * open already, so the engine starts there, not at the root. */
		dirfd = openat(srcfd, argv[5], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dirfd < 0)
			return fail(argv[5], -errno);
		first = 6;
	}
	for (i = first; i < argc; i++) {
		const char *p = argv[i];
		struct ovs_relpath *rp = rel(p);

		rp->srcdirfd = dirfd;
		cov = 0;
		if (!strcmp(op, "object") || !strcmp(op, "cloned") || !strcmp(op, "objectat"))
			rc = ovs_preserve_object(l, m, rp);
		else if (!strcmp(op, "objectcov"))
			rc = ovs_preserve_object_cov(l, m, rp, &cov);
		else if (!strcmp(op, "name"))
			rc = ovs_preserve_name(l, m, rp);
		else if (!strcmp(op, "rmdir"))
			rc = ovs_preserve_rmdir(l, rp);
		else if (!strcmp(op, "subtree"))
			rc = ovs_preserve_subtree(l, m, rp);
		else if (!strcmp(op, "covered"))
			rc = ovs_covered(l, rp);
		else if (!strcmp(op, "unlink") || !strcmp(op, "unlinkcov")) {
			rc = unlink_as_daemon(l, m, srcfd, rp, p);
			cov = unlink_cov;
		}
		else {
			fprintf(stderr, "preserve-test: unknown operation %s\n", op);
			return 2;
		}
		if (rc < 0)
			return fail(p, rc);
		if (!strcmp(op, "covered"))
			printf("%d\n", rc);
		if (!strcmp(op, "cloned"))
			printf("%s\n", ovs_layer_cloned(l) ? "clone" : "copy");
		if (!strcmp(op, "objectcov") || !strcmp(op, "unlinkcov"))
			printf("%s\n", cov & OVS_COV_SIBLINGS ? "siblings" : "-");
	}
	ovs_hlmap_free(m);
	ovs_layer_close(l);
	if (dirfd >= 0)
		close(dirfd);
	close(srcfd);
	return 0;
}
