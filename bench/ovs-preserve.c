/*
 * ovs-preserve — the floor of a first change in an old folder, with no
 * daemon and no FUSE in the way (bench/preserve-floor-bench.sh): N files
 * fNNNNNNNN of SRC/DIR (as ovs-fileops create makes them), each preserved
 * into the layer UPPER (with WORK) and then chmodded to 0600 in SRC.
 *   ovs-preserve SRC UPPER WORK DIR N engine
 *       the library's preserve, ovs_preserve_object, as ovsnapd calls it
 *       (a clone on XFS, ordered by the log: no fsync)
 *   ovs-preserve SRC UPPER WORK DIR N meta
 *       the least a metadata-only preserve (overlayfs' metacopy) would do:
 *       create the copy in WORK with its mode, set one xattr and the
 *       times, rename it into UPPER/DIR; no data, no ownership, no checks
 * UPPER and WORK are made (they must not exist), DIR's copy in UPPER
 * before the clock starts.  Prints the elapsed time in nanoseconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "preserve.h"

static int fail(const char *what, int err)
{
	fprintf(stderr, "ovs-preserve: %s: %s\n", what, strerror(err));
	return 1;
}

/* What a mode keeps between the preserves of one run. */
struct run {
	int dfd;			/* SRC/DIR */
	/* engine */
	struct ovs_layer *l;
	struct ovs_hlmap *m;
	const char *names[2];		/* DIR, the file's name */
	/* meta */
	int workfd, updfd;		/* WORK, UPPER/DIR */
};

/* The engine's preserve, as ovsnapd calls it: the file's directory open,
 * the name stat'ed by the caller.  0 or a positive errno. */
static int engine_one(struct run *r, const char *name, const struct stat *st)
{
	struct ovs_relpath path = { .names = r->names, .n = 2, .srcdirfd = r->dfd, .st = st };

	r->names[1] = name;
	return -ovs_preserve_object(r->l, r->m, &path);
}

/* The least a metadata-only preserve does: no data, no ownership, no
 * checks.  0 or a positive errno. */
static int meta_one(struct run *r, const char *name, const struct stat *st)
{
	static const char origin[] = "ino=0 ctime=0.000000000 btime=-";
	struct timespec times[2] = { st->st_atim, st->st_mtim };
	int out, err = 0;

	out = openat(r->workfd, "#copy", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
		     st->st_mode & 0777);
	if (out < 0)
		return errno;
	if (fsetxattr(out, "trusted.overlay.metacopy", "", 0, 0) < 0 ||
	    fsetxattr(out, "trusted.overlay.ovsnap.origin", origin, sizeof(origin) - 1, 0) < 0 ||
	    futimens(out, times) < 0)
		err = errno;
	close(out);
	if (!err && renameat2(r->workfd, "#copy", r->updfd, name, RENAME_NOREPLACE) < 0)
		err = errno;
	return err;
}

static int engine_setup(struct run *r, int srcfd, const char *upper, const char *work,
			const char *dir)
{
	struct ovs_relpath dpath = { .names = r->names, .n = 1, .srcdirfd = -1 };
	size_t outside;
	int upfd, rc;

	upfd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (upfd < 0)
		return fail(upper, errno);
	rc = ovs_copy_root_metadata(srcfd, upfd);
	close(upfd);
	if (rc < 0)
		return fail("the root's copy", -rc);
	rc = ovs_layer_open(upper, work, srcfd, 0, &r->l);
	if (rc < 0)
		return fail("open the layer", -rc);
	rc = ovs_hlmap_build(srcfd, &r->m, &outside);
	if (rc < 0)
		return fail("hard link map", -rc);
	r->names[0] = dir;
	rc = ovs_preserve_object(r->l, r->m, &dpath);
	if (rc < 0)
		return fail(dir, -rc);
	return 0;
}

static int meta_setup(struct run *r, const char *upper, const char *work, const char *dir)
{
	int upfd;

	r->workfd = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->workfd < 0)
		return fail(work, errno);
	upfd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (upfd < 0 || mkdirat(upfd, dir, 0755) < 0)
		return fail(upper, errno);
	r->updfd = openat(upfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(upfd);
	if (r->updfd < 0)
		return fail(dir, errno);
	return 0;
}

int main(int argc, char **argv)
{
	int (*one)(struct run *, const char *, const struct stat *);
	struct run r = { .workfd = -1, .updfd = -1 };
	struct timespec t0, t1;
	long long n, i;
	int srcfd, err;

	if (argc != 7 || (strcmp(argv[6], "engine") && strcmp(argv[6], "meta"))) {
		fprintf(stderr, "usage: ovs-preserve SRC UPPER WORK DIR N engine|meta\n");
		return 2;
	}
	n = atoll(argv[5]);
	srcfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (srcfd < 0)
		return fail(argv[1], errno);
	r.dfd = openat(srcfd, argv[4], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r.dfd < 0)
		return fail(argv[4], errno);
	if (mkdir(argv[2], 0755) < 0 || mkdir(argv[3], 0700) < 0)
		return fail("make the upper and work", errno);
	if (!strcmp(argv[6], "engine")) {
		one = engine_one;
		err = engine_setup(&r, srcfd, argv[2], argv[3], argv[4]);
	} else {
		one = meta_one;
		err = meta_setup(&r, argv[2], argv[3], argv[4]);
	}
	if (err)
		return err;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++) {
		char name[32];
		struct stat st;

		snprintf(name, sizeof(name), "f%08lld", i);
		if (fstatat(r.dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return fail(name, errno);
		err = one(&r, name, &st);
		if (err)
			return fail(name, err);
		if (fchmodat(r.dfd, name, 0600, 0) < 0)
			return fail(name, errno);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%lld\n", (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
	if (r.l) {
		ovs_hlmap_free(r.m);
		ovs_layer_close(r.l);
	}
	return 0;
}
