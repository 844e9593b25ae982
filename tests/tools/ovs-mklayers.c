/*
 * ovs-mklayers — test tool for the merge oracle and the overlay resolver.
 *
 *   ovs-mklayers gen SEED LOWER OLDER NEWER
 *	Fill three empty directories with seeded random content: a lower
 *	tree and two overlay layers over it (files, dirs, opaque dirs,
 *	whiteouts — some hard-linked to one shared whiteout inode —,
 *	symlinks, fifos, hard links, user.* and escaped
 *	trusted.overlay.overlay.* xattrs, ovsnap origin xattrs, owners,
 *	modes and times).  Names come from a small pool so the layers
 *	collide with each other and with the lower tree at every depth.
 *   ovs-mklayers merge OLDER NEWER
 *	ovs_merge_layers(OLDER <- NEWER) without the final sync.
 *   ovs-mklayers resolve-check MOUNT LAYER... LOWER
 *	Walk a kernel overlay mount of lowerdir=LAYER...:LOWER and the
 *	userspace resolver over the same layers side by side; report every
 *	difference (names, type, mode, owner, size, mtime, link target).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "libovsnap.h"
#include "preserve.h"
#include "resolve.h"
#include "merge.h"

/* ---- seeded random numbers (xorshift64*) --------------------------------- */

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 2685821657736338717ULL) >> 32) % n;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "ovs-mklayers: %s %s: %s\n", what, path, strerror(errno));
	exit(2);
}

/* ---- generator ------------------------------------------------------------- */

static const char *const name_pool[] = { "a", "b", "c", "d", "e" };
#define NPOOL (sizeof(name_pool) / sizeof(name_pool[0]))
#define MAX_DEPTH 3

struct gen {
	int rootfd;
	const char *label;
	char files[256][PATH_MAX];	/* regular files of this tree, for hard links */
	int nfiles;
	char whiteout[PATH_MAX];	/* first whiteout, shared by later ones */
	bool is_layer;
};

static const uid_t owners[] = { 0, 1000, 1001 };

static void set_meta(struct gen *g, const char *rel, bool symlink, bool xattrs, bool dir)
{
	const char *at = *rel ? rel : ".";
	struct timespec ts[2];

	if (fchownat(g->rootfd, at, owners[rnd(3)], owners[rnd(3)], AT_SYMLINK_NOFOLLOW) < 0)
		die("chown", rel);
	if (!symlink) {
		static const mode_t modes[] = { 0644, 0600, 0755, 0700, 0640 };
		static const mode_t dir_modes[] = { 0755, 0700, 0750, 0711, 01777 };

		if (fchmodat(g->rootfd, at, dir ? dir_modes[rnd(5)] : modes[rnd(5)], 0) < 0)
			die("chmod", rel);
	}
	if (xattrs && !symlink) {
		char val[32];

		snprintf(val, sizeof(val), "%s-%u", g->label, rnd(1000));
		if (rnd(3) == 0 && ovs_lsetxattrat(g->rootfd, rel, "user.k", val, strlen(val), 0) < 0)
			die("setxattr user.k", rel);
		if (rnd(6) == 0 && ovs_lsetxattrat(g->rootfd, rel, "user.z", "", 0, 0) < 0)
			die("setxattr user.z", rel);
		if (g->is_layer && rnd(5) == 0 &&
		    ovs_lsetxattrat(g->rootfd, rel, OVL_XATTR_ESCAPE "esc", val, strlen(val), 0) < 0)
			die("setxattr escaped", rel);
	}
	if (g->is_layer && rnd(4) == 0) {
		char val[64];

		snprintf(val, sizeof(val), "ino=%u ctime=1.0 btime=-", rnd(100000));
		if (ovs_lsetxattrat(g->rootfd, rel, OVS_XATTR_ORIGIN, val, strlen(val), 0) < 0)
			die("setxattr origin", rel);
	}
	ts[0].tv_sec = 1600000000 + rnd(1000000);
	ts[0].tv_nsec = rnd(1000000000);
	ts[1].tv_sec = 1600000000 + rnd(1000000);
	ts[1].tv_nsec = rnd(1000000000);
	if (utimensat(g->rootfd, at, ts, AT_SYMLINK_NOFOLLOW) < 0)
		die("utimensat", rel);
}

static void make_file(struct gen *g, const char *rel)
{
	char buf[128];
	int fd, len;

	fd = openat(g->rootfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		die("create", rel);
	len = snprintf(buf, sizeof(buf), "%s:%s:%u\n", g->label, rel, rnd(1u << 30));
	for (int i = rnd(3); i > 0; i--)
		if (write(fd, buf, len) != len)
			die("write", rel);
	close(fd);
	if (g->nfiles < 256)
		snprintf(g->files[g->nfiles++], PATH_MAX, "%s", rel);
	set_meta(g, rel, false, true, false);
}

static void make_whiteout(struct gen *g, const char *rel)
{
	if (g->whiteout[0] && rnd(2) == 0) {
		if (linkat(g->rootfd, g->whiteout, g->rootfd, rel, 0) == 0)
			return;
	}
	if (mknodat(g->rootfd, rel, S_IFCHR | 0, makedev(0, 0)) < 0)
		die("mknod whiteout", rel);
	if (!g->whiteout[0])
		snprintf(g->whiteout, PATH_MAX, "%s", rel);
}

static void gen_tree(struct gen *g, const char *dir, int depth)
{
	for (size_t i = 0; i < NPOOL; i++) {
		char rel[PATH_MAX];
		unsigned r = g->is_layer ? rnd(14) : rnd(11);

		snprintf(rel, sizeof(rel), "%s%s%s", dir, *dir ? "/" : "", name_pool[i]);
		if (g->is_layer) {
			/* 0-2: nothing; sparse like a real upper layer. */
			if (r <= 2)
				continue;
			if (r <= 4 || (r <= 9 && depth >= MAX_DEPTH)) {
				make_file(g, rel);
			} else if (r <= 9) {
				if (mkdirat(g->rootfd, rel, 0755) < 0)
					die("mkdir", rel);
				gen_tree(g, rel, depth + 1);
				if (r == 9 && ovl_set_opaque_at(g->rootfd, rel) < 0)
					die("set opaque", rel);
				set_meta(g, rel, false, true, true);
			} else if (r == 10) {
				make_whiteout(g, rel);
			} else if (r == 11) {
				if (symlinkat(rnd(2) ? "a/b" : "../zz", g->rootfd, rel) < 0)
					die("symlink", rel);
				set_meta(g, rel, true, false, false);
			} else if (r == 12 && g->nfiles) {
				if (linkat(g->rootfd, g->files[rnd(g->nfiles)], g->rootfd, rel, 0) < 0)
					die("link", rel);
			} else {
				make_whiteout(g, rel);
			}
			continue;
		}
		/* The lower tree: denser, no overlay metadata. */
		if (r <= 1)
			continue;
		if (r <= 4) {
			make_file(g, rel);
		} else if (r <= 7 && depth < MAX_DEPTH) {
			if (mkdirat(g->rootfd, rel, 0755) < 0)
				die("mkdir", rel);
			gen_tree(g, rel, depth + 1);
			set_meta(g, rel, false, true, true);
		} else if (r == 8) {
			if (symlinkat("b", g->rootfd, rel) < 0)
				die("symlink", rel);
			set_meta(g, rel, true, false, false);
		} else if (r == 9 && g->nfiles) {
			if (linkat(g->rootfd, g->files[rnd(g->nfiles)], g->rootfd, rel, 0) < 0)
				die("link", rel);
		} else if (r == 10) {
			if (mkfifoat(g->rootfd, rel, 0644) < 0)
				die("mkfifo", rel);
			set_meta(g, rel, false, false, false);
		} else {
			make_file(g, rel);
		}
	}
}

static void gen_one(const char *path, const char *label, bool is_layer)
{
	struct gen *g = calloc(1, sizeof(*g));

	if (!g)
		die("alloc", path);
	g->rootfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (g->rootfd < 0)
		die("open", path);
	g->label = label;
	g->is_layer = is_layer;
	gen_tree(g, "", 0);
	set_meta(g, "", false, false, true);
	close(g->rootfd);
	free(g);
}

static int cmd_gen(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: ovs-mklayers gen SEED LOWER OLDER NEWER\n");
		return 2;
	}
	rng_state = strtoull(argv[1], NULL, 10) * 0x9E3779B97F4A7C15ULL + 1;
	gen_one(argv[2], "lower", false);
	gen_one(argv[4], "newer", true);
	gen_one(argv[3], "older", true);
	return 0;
}

/* ---- merge --------------------------------------------------------------------- */

static int cmd_merge(int argc, char **argv)
{
	struct ovs_merge_stats st;
	int afd, bfd, rc;

	if (argc != 3) {
		fprintf(stderr, "usage: ovs-mklayers merge OLDER NEWER\n");
		return 2;
	}
	afd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bfd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (afd < 0 || bfd < 0)
		die("open", afd < 0 ? argv[1] : argv[2]);
	rc = ovs_merge_layers(afd, bfd, OVS_MERGE_NOSYNC, NULL, NULL, &st);
	if (rc < 0) {
		fprintf(stderr, "ovs-mklayers: merge: %s\n", ovs_last_error());
		return 1;
	}
	printf("entries %" PRIu64 " moved %" PRIu64 " discarded %" PRIu64 " opaqued %" PRIu64 "\n",
	       st.entries, st.moved, st.discarded, st.opaqued);
	return 0;
}

/* ---- resolver vs kernel ------------------------------------------------------- */

static int failures;

static void fail(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *path, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "resolve-check: /%s: ", path);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	failures++;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void compare_entry(int mntfd, struct ovs_rstack *s, const char *rel,
			  const struct ovs_rentry *e)
{
	struct stat k;
	const struct stat *r = &e->st;

	if (fstatat(mntfd, rel, &k, AT_SYMLINK_NOFOLLOW) < 0) {
		fail(rel, "kernel lstat: %s", strerror(errno));
		return;
	}
	if ((k.st_mode & S_IFMT) != (r->st_mode & S_IFMT))
		fail(rel, "type kernel %o resolver %o", k.st_mode & S_IFMT, r->st_mode & S_IFMT);
	if (k.st_mode != r->st_mode)
		fail(rel, "mode kernel %o resolver %o", k.st_mode, r->st_mode);
	if (k.st_uid != r->st_uid || k.st_gid != r->st_gid)
		fail(rel, "owner kernel %d:%d resolver %d:%d", k.st_uid, k.st_gid,
		     r->st_uid, r->st_gid);
	if (!S_ISDIR(k.st_mode) && k.st_size != r->st_size)
		fail(rel, "size kernel %lld resolver %lld", (long long)k.st_size,
		     (long long)r->st_size);
	if (k.st_mtim.tv_sec != r->st_mtim.tv_sec || k.st_mtim.tv_nsec != r->st_mtim.tv_nsec)
		fail(rel, "mtime differs");
	if (!S_ISDIR(k.st_mode) && k.st_ino != r->st_ino)
		fail(rel, "ino kernel %llu resolver %llu", (unsigned long long)k.st_ino,
		     (unsigned long long)r->st_ino);
	if (S_ISLNK(k.st_mode)) {
		char kt[PATH_MAX], rt[PATH_MAX], parent[PATH_MAX];
		const char *slash = strrchr(rel, '/');
		ssize_t kn, rn;
		int pfd;

		snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash - rel) : 0, rel);
		kn = readlinkat(mntfd, rel, kt, sizeof(kt));
		pfd = ovs_rstack_openat(s, e->layer, parent, 0);
		rn = pfd >= 0 ? readlinkat(pfd, slash ? slash + 1 : rel, rt, sizeof(rt)) : -1;
		if (pfd >= 0)
			close(pfd);
		if (kn < 0 || rn < 0 || kn != rn || memcmp(kt, rt, kn))
			fail(rel, "symlink target differs");
	}
}

static void check_dir(int mntfd, struct ovs_rstack *s, const char *rel)
{
	struct ovs_rdirent *ents;
	char **knames = NULL;
	size_t nk = 0, nr, i;
	struct dirent *d;
	DIR *dir;
	int fd;

	fd = openat(mntfd, *rel ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(dir = fdopendir(fd))) {
		fail(rel, "kernel opendir: %s", strerror(errno));
		return;
	}
	while ((d = readdir(dir))) {
		struct stat st;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		/* A directory that merges with nothing is read as it is,
		 * whiteouts included: the kernel lists them, lookup fails. */
		if (fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
			continue;
		knames = realloc(knames, (nk + 1) * sizeof(*knames));
		knames[nk++] = strdup(d->d_name);
	}
	closedir(dir);
	qsort(knames, nk, sizeof(*knames), cmp_str);
	if (ovs_resolve_readdir(s, rel, &ents, &nr) < 0) {
		fail(rel, "resolver readdir: %s", ovs_last_error());
		goto out;
	}
	if (nr != nk)
		fail(rel, "kernel lists %zu names, resolver %zu", nk, nr);
	for (i = 0; i < nk && i < nr; i++) {
		char sub[PATH_MAX];
		struct ovs_rentry e;

		if (strcmp(knames[i], ents[i].name)) {
			fail(rel, "name kernel '%s' resolver '%s'", knames[i], ents[i].name);
			break;
		}
		snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", knames[i]);
		if (ovs_resolve_lookup(s, sub, &e) < 0 || e.kind != OVS_R_ENTRY ||
		    e.layer != ents[i].e.layer) {
			fail(sub, "lookup disagrees with readdir");
			continue;
		}
		compare_entry(mntfd, s, sub, &ents[i].e);
		if (S_ISDIR(ents[i].e.st.st_mode))
			check_dir(mntfd, s, sub);
	}
	ovs_resolve_dirents_free(ents, nr);
out:
	for (i = 0; i < nk; i++)
		free(knames[i]);
	free(knames);
}

static int cmd_resolve_check(int argc, char **argv)
{
	struct ovs_rstack *s;
	int mntfd, nl = argc - 3, *fds;

	if (argc < 3) {
		fprintf(stderr, "usage: ovs-mklayers resolve-check MOUNT LAYER... LOWER\n");
		return 2;
	}
	mntfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mntfd < 0)
		die("open", argv[1]);
	fds = calloc(argc, sizeof(int));
	for (int i = 2; i < argc; i++) {
		fds[i - 2] = open(argv[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fds[i - 2] < 0)
			die("open", argv[i]);
	}
	if (ovs_rstack_new(fds, nl, fds[nl], &s) < 0) {
		fprintf(stderr, "ovs-mklayers: %s\n", ovs_last_error());
		return 1;
	}
	check_dir(mntfd, s, "");
	ovs_rstack_free(s);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "gen"))
		return cmd_gen(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "merge"))
		return cmd_merge(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "resolve-check"))
		return cmd_resolve_check(argc - 1, argv + 1);
	fprintf(stderr, "usage: ovs-mklayers gen|merge|resolve-check ...\n");
	return 2;
}
