/*
 * ovs_diff(): the changes between two snapshots, or a snapshot and the
 * live tree, computed from the layers (see diff.h for why that suffices).
 *
 * 1. Candidates: every entry of the layers U_A..U_B-1 (U_A..U_n for the
 *    live tree); entries that hide what lies below them (whiteouts,
 *    non-directories, opaque directories) are marks.
 * 2. Below each mark, whatever B has there is a candidate too (a directory
 *    made after a removal, with everything in it).
 *    Both are found by one walk of those layers (and of B's view below the
 *    marks) together, a directory at a time, in path order, so nothing
 *    but the directories on the current path is held (issue 13).
 * 3. Each candidate is resolved in A's stack and in B's (the library's
 *    resolver) and the two objects compared: type, then content, mode,
 *    owner, mtime and xattrs.  The same object (the same layer, or SRC in
 *    both stacks) is equal without a look.  Comparing states, not events,
 *    leaves out what was changed and changed back.  A change is handed to
 *    the caller as soon as it is found.
 *
 * While the volume is active, its daemon may preserve a path into U_n and
 * then change SRC while we look at it.  An answer that read SRC for a path
 * that was not covered in U_n is checked afterwards, as views do (view.h):
 * if the path became covered meanwhile, it is resolved again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ovsnap-private.h"
#include "diff.h"
#include "layer-format.h"
#include "preserve.h"
#include "resolve.h"
#include "runs.h"
#include "walk.h"

#define RESOLVE_STRICT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV)

struct diff {
	struct ovs_volume *v;
	size_t a, b, n;		/* registry indices; b == n: the live tree */
	int *fds;		/* layer a + i is fds[i]; SRC is "layer" n */
	int srcfd;		/* not ours */
	bool active;		/* a daemon may be writing U_n */
	bool dir_mtimes;	/* report directories whose mtime alone differs */
	struct ovs_rstack *sa, *sb;	/* A's and B's stacks */
	ovs_diff_fn fn;
	void *arg;
};

/* ---- 1. and 2. the candidates, one directory at a time ------------------------ */

/*
 * The candidates are walked as one tree: the union of the layers
 * U_A..U_B-1 (each read where it has a directory), and at or below a
 * mark (an entry hiding what lies below it), B's view too.  Each
 * directory's entries are read in full, sorted by name and merged
 * (spilling to a file past a budget, below), and
 * each name is compared before its subdirectory is entered: a preorder
 * with names in strcmp() order is the order of full paths compared
 * component by component ("a", "a/b", "a b", "a-b", "a.b"), so changes
 * come out in the order a global sort of the paths gave, while memory
 * holds only the directories on the current path, never the tree.
 */

/* An entry of the directory being walked, in one layer or in B's view. */
struct dent {
	const char *name;
	size_t layer;		/* 0..nl-1: layer a + layer; B_VIEW: B's view */
	bool dir;		/* a directory there: its entries are candidates */
	bool mark;		/* hides what lies below it in older layers */
};

#define B_VIEW SIZE_MAX

/*
 * A directory's entries, sorted by name, then layer, in bounded memory
 * (issue 13 item 3).  They are gathered in memory up to a budget
 * (NAMES_MAX_BYTES); a directory with more is written out a budget's
 * worth at a time, each sorted, as runs to an unlinked file (runs.h),
 * its last part too, and the runs are merged as the walk takes the
 * names.  So a huge directory on the walk's path holds a 4 KiB buffer
 * per run (10^6 names of 100 bytes: 27 runs), a small one its entries,
 * as it always did; past OVS_RUNS_FAN_IN runs (a folder of some 10^7
 * names), runs are first merged in groups into longer ones, so the
 * readers stay a fan-in's worth.  Should the file fail (/tmp full, no
 * memory for a memfd), the rest of the entries stay in memory and are
 * merged too.
 */
#define NAMES_MAX_BYTES	(4u << 20)

/* An entry as it is stored, in memory or in a run: this, then its name
 * and a NUL. */
struct dent_rec {
	uint32_t layer;		/* UINT32_MAX: B's view */
	uint16_t len;		/* of the name */
	uint8_t dir, mark;
};

#define REC_B_VIEW	UINT32_MAX

/* a run, or the entries in memory, being merged */
struct names_src {
	struct ovs_run_reader *r;	/* NULL: the entries in memory */
	const struct dent_rec *cur;	/* its least entry not taken, NULL: none */
};

struct names {
	char *mem;		/* entries in memory, one after another */
	size_t len, cap;
	size_t *idx;		/* their offsets in mem, sorted once all are read */
	size_t n, icap, next;
	struct ovs_runs runs;
	bool spill_failed;	/* hold the rest in memory */
	struct names_src *src;	/* being merged: the runs, then memory */
	size_t nsrc;
	size_t *heap;		/* the sources with entries, least entry first */
	size_t nheap;
	/* the name of the entries taken last: not in the struct, which
	 * moves as the walk's stack grows */
	char *name;
};

/* The largest list in memory: NAMES_MAX_BYTES, or the tests' budget
 * OVSNAP_TEST_DIFF_NAMES_BYTES (to run the spill on small folders). */
static size_t names_max_bytes(void)
{
	const char *env = getenv("OVSNAP_TEST_DIFF_NAMES_BYTES");
	unsigned long long bytes = env ? strtoull(env, NULL, 10) : 0;

	return bytes ? bytes : NAMES_MAX_BYTES;
}

static const char *rec_name(const struct dent_rec *r)
{
	return (const char *)(r + 1);
}

/* padded, so that the next record is aligned */
static size_t rec_size(const struct dent_rec *r)
{
	const size_t a = _Alignof(struct dent_rec);

	return (sizeof(*r) + r->len + 1 + a - 1) / a * a;
}

static int rec_cmp(const struct dent_rec *a, const struct dent_rec *b)
{
	int c = strcmp(rec_name(a), rec_name(b));

	if (c)
		return c;
	return a->layer < b->layer ? -1 : a->layer > b->layer;
}

static int idx_cmp(const void *x, const void *y, void *mem)
{
	return rec_cmp((const struct dent_rec *)((char *)mem + *(const size_t *)x),
		       (const struct dent_rec *)((char *)mem + *(const size_t *)y));
}

static int names_grow(void **p, size_t *cap, size_t need, size_t unit)
{
	size_t ncap = *cap ? *cap : 4096 / unit;
	void *np;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, ncap * unit);
	if (!np)
		return ovs_err(ENOMEM, "diff: out of memory");
	*p = np;
	*cap = ncap;
	return 0;
}

/* The entries in memory, sorted, as the next run.  A failure leaves them
 * in memory, sorted, and the file alone from then on. */
static void names_spill(struct names *nm)
{
	int rc = 0;

	if (nm->n)
		qsort_r(nm->idx, nm->n, sizeof(*nm->idx), idx_cmp, nm->mem);
	for (size_t i = 0; rc == 0 && i < nm->n; i++) {
		const struct dent_rec *r = (const void *)(nm->mem + nm->idx[i]);

		rc = ovs_runs_append(&nm->runs, r, rec_size(r));
	}
	if (rc == 0)
		rc = ovs_runs_finish(&nm->runs);
	if (rc < 0) {
		ovs_runs_abandon(&nm->runs);
		nm->spill_failed = true;
		return;
	}
	nm->len = nm->n = 0;
}

static int names_add(struct names *nm, size_t max_bytes, const char *name, size_t layer,
		     bool dir, bool mark)
{
	struct dent_rec r = { .layer = layer == B_VIEW ? REC_B_VIEW : layer,
			      .len = strlen(name), .dir = dir, .mark = mark };
	size_t size = rec_size(&r);
	int rc;

	if (nm->n && !nm->spill_failed &&
	    nm->len + size + (nm->n + 1) * sizeof(*nm->idx) > max_bytes)
		names_spill(nm);
	rc = names_grow((void **)&nm->mem, &nm->cap, nm->len + size, 1);
	if (rc == 0)
		rc = names_grow((void **)&nm->idx, &nm->icap, nm->n + 1, sizeof(*nm->idx));
	if (rc < 0)
		return rc;
	memcpy(nm->mem + nm->len, &r, sizeof(r));
	memset(nm->mem + nm->len + size - _Alignof(struct dent_rec), 0, _Alignof(struct dent_rec));
	memcpy(nm->mem + nm->len + sizeof(r), name, r.len + 1);
	nm->idx[nm->n++] = nm->len;
	nm->len += size;
	return 0;
}

/* Move source s to its next entry. */
static int names_src_next(struct names *nm, struct names_src *s, bool first)
{
	const struct dent_rec *r;
	int err;

	if (!s->r) {
		if (!first)
			nm->next++;
		s->cur = nm->next < nm->n ? (const void *)(nm->mem + nm->idx[nm->next]) : NULL;
		return 0;
	}
	if (!first)
		ovs_run_skip(s->r, rec_size(s->cur));
	s->cur = NULL;
	r = ovs_run_peek(s->r, sizeof(*r), &err);
	if (r && r->len <= NAME_MAX)
		r = ovs_run_peek(s->r, rec_size(r), &err);
	else if (r)
		err = -EIO;
	if (err < 0)
		return ovs_err(-err, "diff: read the names spilled to /tmp: %s", strerror(-err));
	s->cur = r;
	return 0;
}

static bool heap_less(const struct names *nm, size_t i, size_t j)
{
	return rec_cmp(nm->src[nm->heap[i]].cur, nm->src[nm->heap[j]].cur) < 0;
}

static void heap_down(struct names *nm, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i, t;

		if (l < nm->nheap && heap_less(nm, l, m))
			m = l;
		if (l + 1 < nm->nheap && heap_less(nm, l + 1, m))
			m = l + 1;
		if (m == i)
			return;
		t = nm->heap[i];
		nm->heap[i] = nm->heap[m];
		nm->heap[m] = t;
		i = m;
	}
}

static size_t rec_size_head(const void *head, void *arg)
{
	const struct dent_rec *r = head;

	(void)arg;
	return r->len <= NAME_MAX ? rec_size(r) : 0;
}

static int rec_cmp_runs(const void *a, const void *b, void *arg)
{
	(void)arg;
	return rec_cmp(a, b);
}

static const struct ovs_runs_order names_order = {
	.head = sizeof(struct dent_rec), .size = rec_size_head, .cmp = rec_cmp_runs,
};

/* All entries read: sort them, or write out the last run and merge. */
static int names_sorted(struct names *nm)
{
	size_t k;
	int rc = 0;

	if (nm->runs.n && !nm->spill_failed && nm->n) {
		names_spill(nm);
		if (!nm->spill_failed) {
			free(nm->mem);
			free(nm->idx);
			nm->mem = NULL;
			nm->idx = NULL;
			nm->cap = nm->icap = 0;
		}
	}
	/* a reader per run in the merge below: more than a fan-in of them
	 * are merged into longer runs first (should that fail, the merge
	 * below takes them all, in more memory) */
	if (nm->runs.n > ovs_runs_fan_in())
		(void)ovs_runs_reduce(&nm->runs, ovs_runs_fan_in(), &names_order);
	if (nm->n)
		qsort_r(nm->idx, nm->n, sizeof(*nm->idx), idx_cmp, nm->mem);
	k = nm->runs.n + 1;
	nm->src = calloc(k, sizeof(*nm->src));
	nm->heap = calloc(k, sizeof(*nm->heap));
	nm->name = malloc(NAME_MAX + 1);
	if (!nm->src || !nm->heap || !nm->name)
		return ovs_err(ENOMEM, "diff: out of memory");
	for (size_t i = 0; i < nm->runs.n; i++) {
		nm->src[i].r = malloc(sizeof(*nm->src[i].r));
		if (!nm->src[i].r)
			return ovs_err(ENOMEM, "diff: out of memory");
		ovs_run_reader_init(nm->src[i].r, &nm->runs, i);
	}
	nm->nsrc = k;
	for (size_t i = 0; rc == 0 && i < k; i++) {
		rc = names_src_next(nm, &nm->src[i], true);
		if (rc == 0 && nm->src[i].cur)
			nm->heap[nm->nheap++] = i;
	}
	for (size_t i = nm->nheap / 2; rc == 0 && i-- > 0;)
		heap_down(nm, i);
	return rc;
}

/* The entries of the next name, least first, into *grp (*ngrp of them,
 * none at the end); their name is nm->name. */
static int names_next(struct names *nm, struct dent **grp, size_t *ngrp, size_t *grpcap)
{
	int rc = 0;

	*ngrp = 0;
	while (nm->nheap) {
		struct names_src *s = &nm->src[nm->heap[0]];
		const struct dent_rec *r = s->cur;

		if (*ngrp && strcmp(rec_name(r), nm->name) != 0)
			break;
		if (!*ngrp)
			memcpy(nm->name, rec_name(r), r->len + 1);
		rc = names_grow((void **)grp, grpcap, *ngrp + 1, sizeof(**grp));
		if (rc < 0)
			return rc;
		(*grp)[(*ngrp)++] = (struct dent){ .name = nm->name,
			.layer = r->layer == REC_B_VIEW ? B_VIEW : r->layer,
			.dir = r->dir, .mark = r->mark };
		rc = names_src_next(nm, s, false);
		if (rc < 0)
			return rc;
		if (!s->cur)
			nm->heap[0] = nm->heap[--nm->nheap];
		heap_down(nm, 0);
	}
	return 0;
}

static void names_free(struct names *nm)
{
	for (size_t i = 0; nm->src && i < nm->nsrc; i++)
		free(nm->src[i].r);
	free(nm->src);
	free(nm->heap);
	free(nm->name);
	free(nm->mem);
	free(nm->idx);
	ovs_runs_free(&nm->runs);
}

/*
 * A directory of the walk: its own in each layer, and its entries.  The
 * walk holds the names of the directories on its path (never their
 * subtrees) and, for the newest few of them, an fd in each layer that has
 * the directory, to open their children with.  Depth times layers fds
 * would run out of descriptors on a deep path in a long chain (rule 18:
 * any depth works), so only the top levels (FD_BUDGET fds in all, or a
 * quarter of the open file limit if that is less, the root's aside) stay
 * open; a directory whose fds were closed is opened again from its
 * nearest open ancestor when the walk comes back to it, by a path of any
 * length (ovs_open_beneath).
 */
#define FD_BUDGET	256
#define FD_CLOSED	(-2)	/* the layer has the directory; its fd was closed */

struct level {
	int *fds;		/* [nl]: the directory in layer a + i, -1, FD_CLOSED */
	bool below_mark;	/* at or below a mark: B's view is a candidate */
	bool b_dir;		/* B shows a directory here */
	struct names names;	/* its entries */
	struct dent *grp;	/* those of the name being walked */
	size_t ngrp, grpcap;
	size_t pathlen;		/* its path's length in the path buffer */
};

struct walk {
	struct diff *d;
	size_t nl;		/* layers walked: b - a */
	struct level *st;
	size_t depth, cap;
	size_t window;		/* levels below the root whose fds stay open */
	size_t names_max;	/* bytes of a directory's entries in memory */
	char *path;		/* the current path, growing */
	size_t pathcap;
};

static int path_reserve(struct walk *w, size_t len)
{
	if (len < w->pathcap)
		return 0;
	size_t cap = w->pathcap ? w->pathcap : 256;
	char *p;

	while (cap <= len)
		cap *= 2;
	p = realloc(w->path, cap);
	if (!p)
		return ovs_err(ENOMEM, "diff: out of memory");
	w->path = p;
	w->pathcap = cap;
	return 0;
}

/* The path buffer holds the directory at len; append /name. */
static int path_push(struct walk *w, size_t len, const char *name)
{
	size_t nlen = strlen(name);
	int rc = path_reserve(w, len + 1 + nlen);

	if (rc < 0)
		return rc;
	if (len)
		w->path[len++] = '/';
	memcpy(w->path + len, name, nlen + 1);
	return 0;
}

static uint64_t layer_id(const struct walk *w, size_t i)
{
	return ovs_snapshot_at(w->d->v, w->d->a + i)->id;
}

static void level_free(struct walk *w, struct level *lv)
{
	for (size_t i = 0; lv->fds && i < w->nl; i++)
		if (lv->fds[i] >= 0)
			close(lv->fds[i]);
	free(lv->fds);
	names_free(&lv->names);
	free(lv->grp);
	memset(lv, 0, sizeof(*lv));
}

/* The entries of layer i's directory fd (at path) into lv. */
static int read_layer_dir(struct walk *w, struct level *lv, size_t i)
{
	const char *path = w->path;
	int fd = lv->fds[i], dfd = dup(fd), rc = 0;
	struct dirent *de;
	DIR *dir;

	if (dfd < 0 || !(dir = fdopendir(dfd))) {
		rc = -errno;
		if (dfd >= 0)
			close(dfd);
		return ovs_err(-rc, "layer %" PRIu64 ": read %s: %s", layer_id(w, i),
			       *path ? path : ".", strerror(-rc));
	}
	while (rc == 0 && (errno = 0, de = readdir(dir))) {
		const char *name = de->d_name;
		bool dir_here = false, mark = false;
		struct stat st;
		int opaque;

		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		/* a non-directory (a whiteout too) is a mark: no need to look */
		if (de->d_type != DT_UNKNOWN && de->d_type != DT_DIR) {
			rc = names_add(&lv->names, w->names_max, name, i, false, true);
			continue;
		}
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = ovs_err(errno, "layer %" PRIu64 ": %s%s%s: %m", layer_id(w, i), path,
				     *path ? "/" : "", name);
			break;
		}
		if (ovl_is_whiteout(&st) || !S_ISDIR(st.st_mode)) {
			mark = true;
		} else if (ovs_lgetxattrat(fd, name, OVL_XATTR_REDIRECT, NULL, 0) >= 0) {
			rc = ovs_err(EUCLEAN, "layer %" PRIu64 ": %s%s%s has a redirect, which "
				     "ovsnap never writes (see ovsnap fsck)", layer_id(w, i), path,
				     *path ? "/" : "", name);
			break;
		} else {
			opaque = ovl_is_opaque_at(fd, name);
			if (opaque < 0) {
				rc = opaque;
				break;
			}
			mark = opaque;
			dir_here = true;
		}
		rc = names_add(&lv->names, w->names_max, name, i, dir_here, mark);
	}
	if (rc == 0 && errno) {
		rc = -errno;
		ovs_err(-rc, "layer %" PRIu64 ": read %s: %s", layer_id(w, i), *path ? path : ".",
			strerror(-rc));
	}
	closedir(dir);
	return rc;
}

/* What B shows in the directory at the path (below a mark: all new). */
static int read_b_dir(struct walk *w, struct level *lv)
{
	struct ovs_rdirent *ents;
	size_t cnt;
	int rc = ovs_resolve_readdir(w->d->sb, w->path, &ents, &cnt);

	if (rc == -ENOENT || rc == -ENOTDIR)
		return 0;	/* gone from the live tree meanwhile */
	if (rc < 0)
		return rc;
	for (size_t i = 0; rc == 0 && i < cnt; i++)
		rc = names_add(&lv->names, w->names_max, ents[i].name, B_VIEW,
			       S_ISDIR(ents[i].e.st.st_mode), false);
	if (ents)
		ovs_resolve_dirents_free(ents, cnt);
	return rc;
}

/* Read lv, whose path is in the path buffer: every layer's entries, and
 * below a mark B's, sorted. */
static int level_read(struct walk *w, struct level *lv)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < w->nl; i++)
		if (lv->fds[i] >= 0)
			rc = read_layer_dir(w, lv, i);
	if (rc == 0 && lv->below_mark && lv->b_dir)
		rc = read_b_dir(w, lv);
	if (rc == 0)
		rc = names_sorted(&lv->names);
	return rc;
}

static int level_push(struct walk *w, struct level **out)
{
	struct level *lv;

	if (w->depth == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		struct level *st = realloc(w->st, cap * sizeof(*st));

		if (!st)
			return ovs_err(ENOMEM, "diff: out of memory");
		w->st = st;
		w->cap = cap;
	}
	lv = &w->st[w->depth];
	memset(lv, 0, sizeof(*lv));
	lv->names.runs = (struct ovs_runs)OVS_RUNS_INIT;
	lv->fds = malloc(w->nl * sizeof(int));
	if (!lv->fds)
		return ovs_err(ENOMEM, "diff: out of memory");
	for (size_t i = 0; i < w->nl; i++)
		lv->fds[i] = -1;
	w->depth++;
	/* keep the fds of the root and the top levels only */
	if (w->depth > w->window + 1) {
		struct level *old = &w->st[w->depth - 1 - w->window];

		for (size_t i = 0; i < w->nl; i++)
			if (old->fds[i] >= 0) {
				close(old->fds[i]);
				old->fds[i] = FD_CLOSED;
			}
	}
	*out = lv;
	return 0;
}

/* Open again the fds of level p that level_push() closed, each from the
 * nearest level above it that holds that layer's fd (the root holds all:
 * a layer that has the directory has every directory above it). */
static int level_reopen(struct walk *w, size_t p)
{
	struct level *lv = &w->st[p];

	for (size_t i = 0; i < w->nl; i++) {
		size_t j = p, from;
		char *rel;
		int fd;

		if (lv->fds[i] != FD_CLOSED)
			continue;
		while (j && w->st[j].fds[i] < 0)
			j--;
		/* the path buffer holds a descendant of p: p's path relative to j's */
		from = w->st[j].pathlen ? w->st[j].pathlen + 1 : 0;
		rel = strndup(w->path + from, lv->pathlen - from);
		if (!rel)
			return ovs_err(ENOMEM, "diff: out of memory");
		fd = ovs_open_beneath(w->st[j].fds[i], rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
				      O_NOATIME, RESOLVE_STRICT);
		free(rel);
		if (fd < 0) {
			char save = w->path[lv->pathlen];

			w->path[lv->pathlen] = 0;
			ovs_err(-fd, "layer %" PRIu64 ": open %s: %s", layer_id(w, i), w->path,
				strerror(-fd));
			w->path[lv->pathlen] = save;
			return fd;
		}
		lv->fds[i] = fd;
	}
	return 0;
}

static int compare_path(struct diff *d, const char *path);

/*
 * The entries of parent's name being walked (its group, the path in
 * the buffer): into it, when a layer has a directory there or B's view is
 * a candidate and B shows one.
 */
static int enter(struct walk *w, size_t parent)
{
	struct level *lv;
	struct dent *ents = w->st[parent].grp;
	size_t cnt = w->st[parent].ngrp;
	bool below = w->st[parent].below_mark, b_dir = false, any = false;
	int rc;

	for (size_t k = 0; k < cnt; k++) {
		if (ents[k].layer == B_VIEW)
			b_dir = ents[k].dir;
		else
			below |= ents[k].mark;
		any |= ents[k].layer != B_VIEW && ents[k].dir;
	}
	if (below && !w->st[parent].below_mark) {
		/* the mark itself: what does B show there? */
		struct ovs_rentry e;

		rc = ovs_resolve_lookup(w->d->sb, w->path, &e);
		if (rc < 0 && rc != -ENOTDIR)
			return rc;
		b_dir = rc == 0 && e.kind == OVS_R_ENTRY && S_ISDIR(e.st.st_mode);
	}
	if (!any && !(below && b_dir))
		return 0;
	rc = level_reopen(w, parent);
	if (rc < 0)
		return rc;
	rc = level_push(w, &lv);
	if (rc < 0)
		return rc;
	/* w->st may have moved */
	ents = w->st[parent].grp;
	lv->below_mark = below;
	lv->b_dir = b_dir;
	lv->pathlen = strlen(w->path);
	for (size_t k = 0; k < cnt; k++) {
		size_t i = ents[k].layer;

		if (i == B_VIEW || !ents[k].dir)
			continue;
		/* O_NOATIME: reading a layer must not change it */
		lv->fds[i] = openat(w->st[parent].fds[i], ents[k].name, O_RDONLY | O_DIRECTORY |
				    O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
		if (lv->fds[i] < 0)
			return ovs_err(errno, "layer %" PRIu64 ": open %s: %m", layer_id(w, i),
				       w->path);
	}
	return level_read(w, lv);
}

/* Walk the candidates from SRC's root, comparing each as it comes. */
static int walk_candidates(struct diff *d)
{
	struct walk w = { .d = d, .nl = d->b - d->a };
	struct level *root;
	size_t budget;
	int rc;

	if (!w.nl)
		return 0;	/* the same snapshot: no layer, no change */
	/* the walk shares the limit with the resolver's lookups, the spool
	 * and, in a restore, the changes it makes */
	budget = ovs_nofile_quarter(FD_BUDGET);
	w.window = budget / w.nl > 2 ? budget / w.nl : 2;
	w.names_max = names_max_bytes();
	rc = path_reserve(&w, 0);
	if (rc == 0) {
		w.path[0] = 0;
		rc = level_push(&w, &root);
	}
	for (size_t i = 0; rc == 0 && i < w.nl; i++) {
		root->fds[i] = openat(d->fds[i], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC |
				      O_NOATIME);
		if (root->fds[i] < 0)
			rc = ovs_err(errno, "layer %" PRIu64 ": open: %m", layer_id(&w, i));
	}
	/* SRC's root: its metadata lives in every layer's root */
	if (rc == 0)
		rc = compare_path(d, "");
	if (rc == 0)
		rc = level_read(&w, root);
	while (rc == 0 && w.depth) {
		size_t top = w.depth - 1;
		struct level *lv = &w.st[top];

		rc = names_next(&lv->names, &lv->grp, &lv->ngrp, &lv->grpcap);
		if (rc < 0)
			break;
		if (!lv->ngrp) {
			level_free(&w, lv);
			w.depth--;
			if (w.depth)
				w.path[w.st[w.depth - 1].pathlen] = 0;
			continue;
		}
		rc = path_push(&w, lv->pathlen, lv->grp[0].name);
		if (rc == 0)
			rc = compare_path(d, w.path);
		if (rc == 0)
			rc = enter(&w, top);
		if (rc == 0 && w.depth == top + 1)
			w.path[lv->pathlen] = 0;	/* not entered */
	}
	while (w.depth)
		level_free(&w, &w.st[--w.depth]);
	free(w.st);
	free(w.path);
	return rc;
}

/* ---- 3. comparing two objects --------------------------------------------- */

/* An object of a layer (or SRC) as its parent directory and its name. */
struct obj {
	int dirfd;		/* ours when owned */
	const char *name;	/* "" for the layer's root itself */
	bool owned;
	bool in_layer;		/* not SRC: escaped trusted.overlay.* xattrs */
};

static int layer_fd(const struct diff *d, size_t g)
{
	return g == d->n ? d->srcfd : d->fds[g - d->a];
}

static int obj_open(const struct diff *d, size_t g, const char *path, struct obj *o)
{
	const char *slash = strrchr(path, '/');
	char *parent;
	int fd;

	o->in_layer = g != d->n;
	o->owned = false;
	if (!*path) {
		o->dirfd = layer_fd(d, g);
		o->name = "";
		return 0;
	}
	if (!slash) {
		o->dirfd = layer_fd(d, g);
		o->name = path;
		return 0;
	}
	parent = strndup(path, slash - path);
	if (!parent)
		return ovs_err(ENOMEM, "diff: out of memory");
	fd = ovs_open_beneath(layer_fd(d, g), parent, O_PATH | O_DIRECTORY | O_CLOEXEC,
			      RESOLVE_STRICT);
	free(parent);
	if (fd < 0)
		return fd;
	o->dirfd = fd;
	o->owned = true;
	o->name = slash + 1;
	return 0;
}

static void obj_close(struct obj *o)
{
	if (o->owned)
		close(o->dirfd);
	o->owned = false;
}

/* obj_open_file(): the object is no regular file now (a user replaced it
 * in SRC since it was listed). */
#define OBJ_NOT_A_FILE (-ESTALE)

/* The regular file at o, open for reading.  Never a wait: a FIFO swapped
 * in for the file by a user would hold the diff (and the volume lock of
 * a restore) until someone opened it for writing. */
static int obj_open_file(const struct obj *o)
{
	int fl = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	int fd = openat(o->dirfd, o->name, fl | O_NOATIME);
	struct stat st;

	if (fd < 0 && errno == EPERM)
		fd = openat(o->dirfd, o->name, fl);
	if (fd < 0)
		return errno == ELOOP ? OBJ_NOT_A_FILE : -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return OBJ_NOT_A_FILE;
	}
	return fd;
}

/* The extent map of fd (flushed first), or NULL when it cannot tell. */
static struct fiemap *extent_map(int fd)
{
	enum { MAX_EXTENTS = 512 };
	struct fiemap *fm = calloc(1, sizeof(*fm) + MAX_EXTENTS * sizeof(struct fiemap_extent));

	if (!fm)
		return NULL;
	fm->fm_length = FIEMAP_MAX_OFFSET;
	fm->fm_flags = FIEMAP_FLAG_SYNC;
	fm->fm_extent_count = MAX_EXTENTS;
	if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0 ||
	    (fm->fm_mapped_extents == MAX_EXTENTS &&
	     !(fm->fm_extents[MAX_EXTENTS - 1].fe_flags & FIEMAP_EXTENT_LAST))) {
		free(fm);
		return NULL;
	}
	return fm;
}

/*
 * Whether two files of one filesystem certainly hold the same bytes
 * because they share every extent (a reflink clone neither side wrote
 * since): the same physical blocks at the same offsets.  Extents whose
 * place is not known or whose bytes are not all in the blocks (delayed,
 * inline, encoded) say nothing.
 */
static bool same_extents(int fa, int fb)
{
	const unsigned unsure = FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC |
				FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_DATA_ENCRYPTED |
				FIEMAP_EXTENT_NOT_ALIGNED | FIEMAP_EXTENT_DATA_INLINE |
				FIEMAP_EXTENT_DATA_TAIL;
	struct fiemap *ma = extent_map(fa), *mb = ma ? extent_map(fb) : NULL;
	bool same = ma && mb && ma->fm_mapped_extents == mb->fm_mapped_extents &&
		    ma->fm_mapped_extents > 0;

	for (unsigned i = 0; same && i < ma->fm_mapped_extents; i++) {
		const struct fiemap_extent *x = &ma->fm_extents[i], *y = &mb->fm_extents[i];

		same = x->fe_logical == y->fe_logical && x->fe_physical == y->fe_physical &&
		       x->fe_length == y->fe_length && x->fe_flags == y->fe_flags &&
		       !(x->fe_flags & unsure);
	}
	free(ma);
	free(mb);
	return same;
}

/* 1 if the data of the two regular files (of equal size) differs. */
static int data_differs(const struct obj *oa, const struct obj *ob, const char *path)
{
	enum { CHUNK = 1 << 17 };
	char *ba = NULL, *bb = NULL;
	struct stat sa, sb;
	int fa, fb = -1, rc;

	/* Replaced by another kind of object since it was listed: its data
	 * is not the file's any more. */
	fa = obj_open_file(oa);
	if (fa == OBJ_NOT_A_FILE)
		return 1;
	if (fa < 0)
		return ovs_err(-fa, "diff: open %s: %s", path, strerror(-fa));
	fb = obj_open_file(ob);
	if (fb == OBJ_NOT_A_FILE) {
		rc = 1;
		goto out;
	}
	if (fb < 0) {
		rc = ovs_err(-fb, "diff: open %s: %s", path, strerror(-fb));
		goto out;
	}
	if (fstat(fa, &sa) == 0 && fstat(fb, &sb) == 0 && sa.st_dev == sb.st_dev &&
	    same_extents(fa, fb)) {
		rc = 0;
		goto out;
	}
	ba = malloc(CHUNK);
	bb = malloc(CHUNK);
	if (!ba || !bb) {
		rc = ovs_err(ENOMEM, "diff: out of memory");
		goto out;
	}
	for (off_t off = 0;;) {
		ssize_t na = pread(fa, ba, CHUNK, off), nb;

		if (na < 0) {
			rc = ovs_err(errno, "diff: read %s: %m", path);
			goto out;
		}
		/* the other side exactly as far (short reads of regular
		 * files happen only at the end) */
		nb = na ? pread(fb, bb, na, off) : pread(fb, bb, 1, off);
		if (nb < 0) {
			rc = ovs_err(errno, "diff: read %s: %m", path);
			goto out;
		}
		if (na != nb || memcmp(ba, bb, na) != 0) {
			rc = 1;
			goto out;
		}
		if (!na) {
			rc = 0;
			goto out;
		}
		off += na;
	}
out:
	free(ba);
	free(bb);
	close(fa);
	if (fb >= 0)
		close(fb);
	return rc;
}

static int link_differs(const struct obj *oa, const struct obj *ob, const struct stat *st,
			const char *path)
{
	size_t len = st->st_size + 2;
	char *ta = malloc(len), *tb = malloc(len);
	ssize_t na, nb;
	int rc;

	if (!ta || !tb) {
		rc = ovs_err(ENOMEM, "diff: out of memory");
		goto out;
	}
	na = readlinkat(oa->dirfd, oa->name, ta, len);
	nb = readlinkat(ob->dirfd, ob->name, tb, len);
	if (na < 0 || nb < 0) {
		rc = ovs_err(errno, "diff: readlink %s: %m", path);
		goto out;
	}
	rc = na != nb || memcmp(ta, tb, na) != 0;
out:
	free(ta);
	free(tb);
	return rc;
}

struct xattr {
	char *name;
	char *val;
	size_t len;
};

static int xattr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct xattr *)a)->name, ((const struct xattr *)b)->name);
}

static void xattrs_free(struct xattr *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(x[i].name);
		free(x[i].val);
	}
	free(x);
}

#define XATTR_LIST_LEN	65536
#define XATTR_VALUE_LEN	65536

/*
 * The xattrs of o as its owner set them, sorted by name.  A layer copy
 * stores a user's trusted.overlay.X as trusted.overlay.overlay.X (rule 14)
 * and carries overlayfs' and ovsnap's own trusted.overlay.* names, which
 * are no part of the user's object.
 */
static int xattrs_read(const struct obj *o, const char *path, struct xattr **out, size_t *nout)
{
	const size_t plen = strlen(OVL_XATTR_PREFIX), elen = strlen(OVL_XATTR_ESCAPE);
	char *list = malloc(XATTR_LIST_LEN), *val = malloc(XATTR_VALUE_LEN);
	struct xattr *x = NULL;
	size_t n = 0, cap = 0;
	ssize_t llen;
	int rc = 0;

	*out = NULL;
	*nout = 0;
	if (!list || !val) {
		rc = ovs_err(ENOMEM, "diff: out of memory");
		goto out;
	}
	llen = ovs_llistxattrat(o->dirfd, o->name, list, XATTR_LIST_LEN);
	if (llen == -ENOTSUP || llen == -EOPNOTSUPP)
		goto out;
	if (llen < 0) {
		rc = ovs_err(-llen, "diff: list xattrs of %s: %s", path, strerror(-llen));
		goto out;
	}
	for (char *p = list; p < list + llen; p += strlen(p) + 1) {
		const char *shown = p;
		char *name = NULL;
		ssize_t vlen;

		if (o->in_layer && strncmp(p, OVL_XATTR_PREFIX, plen) == 0) {
			if (strncmp(p, OVL_XATTR_ESCAPE, elen) != 0)
				continue;
			if (asprintf(&name, "%s%s", OVL_XATTR_PREFIX, p + elen) < 0)
				name = NULL;
			shown = name;
			if (!name) {
				rc = ovs_err(ENOMEM, "diff: out of memory");
				goto out;
			}
		}
		vlen = ovs_lgetxattrat(o->dirfd, o->name, p, val, XATTR_VALUE_LEN);
		if (vlen == -ENODATA) {
			free(name);
			continue;	/* removed since the list */
		}
		if (vlen < 0) {
			free(name);
			rc = ovs_err(-vlen, "diff: read xattr %s of %s: %s", p, path,
				     strerror(-vlen));
			goto out;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct xattr *nx = realloc(x, ncap * sizeof(*nx));

			if (!nx) {
				free(name);
				rc = ovs_err(ENOMEM, "diff: out of memory");
				goto out;
			}
			x = nx;
			cap = ncap;
		}
		x[n].name = name ? name : strdup(shown);
		x[n].val = malloc(vlen ? vlen : 1);
		x[n].len = vlen;
		if (!x[n].name || !x[n].val) {
			free(x[n].name);
			free(x[n].val);
			rc = ovs_err(ENOMEM, "diff: out of memory");
			goto out;
		}
		memcpy(x[n].val, val, vlen);
		n++;
	}
	if (n)
		qsort(x, n, sizeof(*x), xattr_cmp);
out:
	free(list);
	free(val);
	if (rc < 0) {
		xattrs_free(x, n);
		return rc;
	}
	*out = x;
	*nout = n;
	return 0;
}

static int xattrs_differ(const struct obj *oa, const struct obj *ob, const char *path)
{
	struct xattr *xa, *xb;
	size_t na, nb;
	int rc = xattrs_read(oa, path, &xa, &na);

	if (rc < 0)
		return rc;
	rc = xattrs_read(ob, path, &xb, &nb);
	if (rc < 0) {
		xattrs_free(xa, na);
		return rc;
	}
	rc = na != nb;
	for (size_t i = 0; !rc && i < na; i++)
		rc = strcmp(xa[i].name, xb[i].name) != 0 || xa[i].len != xb[i].len ||
		     memcmp(xa[i].val, xb[i].val, xa[i].len) != 0;
	xattrs_free(xa, na);
	xattrs_free(xb, nb);
	return rc;
}

/* The fields in which path differs between layer ga of A and gb of B,
 * both the same type, whose lstat are sa and sb. */
static int compare_objects(struct diff *d, const char *path, size_t ga, const struct stat *sa,
			   size_t gb, const struct stat *sb, unsigned *fields)
{
	struct obj oa = { .dirfd = -1 }, ob = { .dirfd = -1 };
	int rc;

	*fields = 0;
	if ((sa->st_mode ^ sb->st_mode) & 07777)
		*fields |= OVS_DIFF_MODE;
	if (sa->st_uid != sb->st_uid || sa->st_gid != sb->st_gid)
		*fields |= OVS_DIFF_OWNER;
	if (sa->st_mtim.tv_sec != sb->st_mtim.tv_sec || sa->st_mtim.tv_nsec != sb->st_mtim.tv_nsec)
		*fields |= OVS_DIFF_MTIME;
	if ((S_ISCHR(sa->st_mode) || S_ISBLK(sa->st_mode)) && sa->st_rdev != sb->st_rdev)
		*fields |= OVS_DIFF_CONTENT;
	if ((S_ISREG(sa->st_mode) || S_ISLNK(sa->st_mode)) && sa->st_size != sb->st_size)
		*fields |= OVS_DIFF_CONTENT;

	rc = obj_open(d, ga, path, &oa);
	if (rc == 0)
		rc = obj_open(d, gb, path, &ob);
	if (rc < 0)
		goto out;
	if (!(*fields & OVS_DIFF_CONTENT) && S_ISREG(sa->st_mode))
		rc = data_differs(&oa, &ob, path);
	else if (!(*fields & OVS_DIFF_CONTENT) && S_ISLNK(sa->st_mode))
		rc = link_differs(&oa, &ob, sa, path);
	if (rc < 0)
		goto out;
	if (rc > 0)
		*fields |= OVS_DIFF_CONTENT;
	rc = xattrs_differ(&oa, &ob, path);
	if (rc > 0)
		*fields |= OVS_DIFF_XATTRS;
out:
	obj_close(&oa);
	obj_close(&ob);
	return rc < 0 ? rc : 0;
}

/* Hand a change to the caller. */
static int report_change(struct diff *d, const char *path, enum ovs_diff_kind kind,
			 mode_t from, mode_t to, unsigned fields)
{
	struct ovs_diff_change c = { .path = path, .kind = kind, .from_mode = from,
				     .to_mode = to, .fields = fields };

	return d->fn(&c, d->arg);
}

/* Resolve path in s: 1 and *g (the global layer index) when visible. */
static int resolve_in(struct ovs_rstack *s, size_t base, const char *path,
		      struct ovs_rentry *e, size_t *g)
{
	int rc = ovs_resolve_lookup(s, path, e);

	if (rc == -ENOTDIR)
		return 0;	/* below a non-directory: absent */
	if (rc < 0)
		return rc;
	if (e->kind != OVS_R_ENTRY)
		return 0;
	*g = base + e->layer;
	return 1;
}

static int compare_path(struct diff *d, const char *path)
{
	int newest = d->fds[d->n - 1 - d->a];

	for (int tries = 0;; tries++) {
		struct ovs_rentry ea, eb;
		size_t ga = 0, gb = 0;
		enum ovs_diff_kind kind;
		unsigned fields = 0;
		bool report = true;
		int covered = 1, in_a, in_b, rc;

		/* an answer that may read SRC is checked afterwards (above) */
		if (d->active && tries < 100) {
			covered = ovs_covered_at(newest, path);
			if (covered < 0)
				return covered;
		}
		in_a = resolve_in(d->sa, d->a, path, &ea, &ga);
		if (in_a < 0)
			return in_a;
		in_b = resolve_in(d->sb, d->b, path, &eb, &gb);
		if (in_b < 0)
			return in_b;
		if (!in_a && !in_b) {
			report = false;
		} else if (!in_a) {
			kind = OVS_DIFF_ADDED;
		} else if (!in_b) {
			kind = OVS_DIFF_REMOVED;
		} else if ((ea.st.st_mode & S_IFMT) != (eb.st.st_mode & S_IFMT)) {
			kind = OVS_DIFF_TYPE;
		} else if (ga == gb) {
			report = false;	/* the very same object */
		} else {
			kind = OVS_DIFF_MODIFIED;
			rc = compare_objects(d, path, ga, &ea.st, gb, &eb.st, &fields);
			if ((rc == -ENOENT || rc == -ENOTDIR || rc == -ELOOP) && tries < 100)
				continue;	/* moved under us: look again */
			if (rc < 0)
				return rc;
			/* a directory's mtime follows the names in it,
			 * which are reported themselves */
			report = S_ISDIR(ea.st.st_mode) && !d->dir_mtimes ?
					 (fields & ~OVS_DIFF_MTIME) != 0 : fields != 0;
		}
		if (!covered) {
			covered = ovs_covered_at(newest, path);
			if (covered < 0)
				return covered;
			if (covered)
				continue;	/* SRC changed meanwhile: again */
		}
		if (!report)
			return 0;
		return report_change(d, path, kind, in_a ? ea.st.st_mode : 0,
				  in_b ? eb.st.st_mode : 0, fields);
	}
}

/* ---- the whole ------------------------------------------------------------ */

static int index_of(const struct ovs_volume *v, uint64_t id, size_t *idx)
{
	for (size_t i = 0; i < ovs_snapshot_count(v); i++)
		if (ovs_snapshot_at(v, i)->id == id) {
			*idx = i;
			return 0;
		}
	return ovs_err(ENOENT, "%s has no snapshot %" PRIu64, ovs_volume_source(v), id);
}

static int open_stacks(struct diff *d)
{
	size_t nl = d->n - d->a;
	int rc;

	d->fds = calloc(nl, sizeof(int));
	if (!d->fds)
		return ovs_err(ENOMEM, "diff: out of memory");
	for (size_t i = 0; i < nl; i++)
		d->fds[i] = -1;
	for (size_t i = 0; i < nl; i++) {
		/* from the store's fd, no symlink followed (rule 20) */
		rc = ovs_snapshot_open_upper(d->v, ovs_snapshot_at(d->v, d->a + i)->id, O_RDONLY);
		if (rc < 0)
			return rc;
		d->fds[i] = rc;
	}
	rc = ovs_rstack_new(d->fds, nl, d->srcfd, &d->sa);
	if (rc == 0)
		rc = ovs_rstack_new(d->fds + (d->b - d->a), d->n - d->b, d->srcfd, &d->sb);
	return rc;
}

static int diff_run(struct ovs_volume *v, uint64_t from, uint64_t to, int srcfd,
		    bool dir_mtimes, ovs_diff_fn fn, void *arg)
{
	struct diff d = { .v = v, .srcfd = srcfd, .n = ovs_snapshot_count(v),
			  .dir_mtimes = dir_mtimes, .fn = fn, .arg = arg };
	int rc;

	rc = index_of(v, from, &d.a);
	if (rc == 0 && to != OVS_DIFF_LIVE)
		rc = index_of(v, to, &d.b);
	else
		d.b = d.n;
	if (rc < 0)
		return rc;
	if (d.a > d.b)
		return ovs_err(EINVAL, "snapshot %" PRIu64 " is newer than snapshot %" PRIu64
			       " (give the older one first)", from, to);
	d.active = ovs_volume_active(v);
	rc = open_stacks(&d);
	if (rc < 0)
		goto out;
	rc = walk_candidates(&d);
out:
	ovs_rstack_free(d.sa);
	ovs_rstack_free(d.sb);
	if (d.fds)
		for (size_t i = 0; i < d.n - d.a; i++)
			if (d.fds[i] >= 0)
				close(d.fds[i]);
	free(d.fds);
	return rc;
}

int ovs_diff(struct ovs_volume *v, uint64_t from, uint64_t to, int srcfd, ovs_diff_fn fn,
	     void *arg)
{
	return diff_run(v, from, to, srcfd, false, fn, arg);
}

int ovs_diff_all(struct ovs_volume *v, uint64_t from, uint64_t to, int srcfd, ovs_diff_fn fn,
		 void *arg)
{
	return diff_run(v, from, to, srcfd, true, fn, arg);
}
