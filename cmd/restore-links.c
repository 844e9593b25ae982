/* The names of hard-linked files by inode (see restore-links.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ovsnap-private.h"
#include "restore-links.h"

/* the records in memory at most: 4 MiB (about 100,000 names) */
#define LINK_NAMES_MAX_BYTES	(4u << 20)
/* a record in memory: itself and two slots of the hash */
#define LINK_MEM_BYTES		(sizeof(struct link_rec) + 2 * sizeof(uint32_t))

/* LINK_NAMES_MAX_BYTES, or the tests' budget
 * OVSNAP_TEST_RESTORE_LINKS_BYTES (to spill with a small tree). */
static size_t link_names_max(void)
{
	const char *env = getenv("OVSNAP_TEST_RESTORE_LINKS_BYTES");
	unsigned long long bytes = env ? strtoull(env, NULL, 10) : 0;
	size_t max = (bytes ? bytes : LINK_NAMES_MAX_BYTES) / LINK_MEM_BYTES;

	return max < 4 ? 4 : max;
}

static int key_cmp(uint64_t dev, uint64_t ino, const struct link_rec *r)
{
	if (dev != r->dev)
		return dev < r->dev ? -1 : 1;
	return ino < r->ino ? -1 : ino > r->ino;
}

static int rec_cmp(const void *a, const void *b, void *arg)
{
	const struct link_rec *x = a, *y = b;
	int c = key_cmp(x->dev, x->ino, y);

	(void)arg;
	if (c)
		return c;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int rec_qsort_cmp(const void *a, const void *b)
{
	return rec_cmp(a, b, NULL);
}

static size_t rec_size(const void *head, void *arg)
{
	(void)head;
	(void)arg;
	return sizeof(struct link_rec);
}

static const struct ovs_runs_order link_order = {
	.head = sizeof(struct link_rec), .size = rec_size, .cmp = rec_cmp,
};

static size_t link_home(const struct link_names *ln, uint64_t dev, uint64_t ino)
{
	uint64_t h = (ino ^ (dev << 32 | dev >> 32)) * 0x9E3779B97F4A7C15ULL;

	return (size_t)(h ^ (h >> 29)) & (ln->hcap - 1);
}

static void link_hash(struct link_names *ln, size_t i)
{
	size_t s = link_home(ln, ln->mem[i].dev, ln->mem[i].ino);

	while (ln->hash[s])
		s = (s + 1) & (ln->hcap - 1);
	ln->hash[s] = i + 1;
}

/* Room for twice the records in memory (their order kept), the first
 * time for 1024 (or the budget's), hashed anew. */
static int link_grow(struct link_names *ln)
{
	size_t cap = ln->cap ? 2 * ln->cap : 1024, hcap = 4;
	struct link_rec *mem;
	uint32_t *hash;

	if (!ln->cap && cap > link_names_max())
		cap = link_names_max();
	if (cap > UINT32_MAX / 4)
		return -ENOMEM;
	while (hcap < 2 * cap)	/* half of the slots free at most */
		hcap *= 2;
	mem = realloc(ln->mem, cap * sizeof(*mem));
	if (!mem)
		return -ENOMEM;
	ln->mem = mem;
	hash = calloc(hcap, sizeof(*hash));
	if (!hash)
		return -ENOMEM;
	free(ln->hash);
	ln->hash = hash;
	ln->hcap = hcap;
	ln->cap = cap;
	for (size_t i = 0; i < ln->n; i++)
		link_hash(ln, i);
	return 0;
}

/* The records in memory, sorted, as the newest run; then the newest
 * runs merged while the older is no longer than the newer. */
static int link_spill(struct link_names *ln)
{
	int rc;

	qsort(ln->mem, ln->n, sizeof(*ln->mem), rec_qsort_cmp);
	rc = ovs_runs_append(&ln->runs, ln->mem, ln->n * sizeof(*ln->mem));
	if (rc == 0)
		rc = ovs_runs_finish(&ln->runs);
	if (rc < 0) {
		ovs_runs_abandon(&ln->runs);
		return rc;
	}
	ln->n = 0;
	memset(ln->hash, 0, ln->hcap * sizeof(*ln->hash));
	while (ln->runs.n >= 2 &&
	       ln->runs.run[ln->runs.n - 2].len <= ln->runs.run[ln->runs.n - 1].len)
		if (ovs_runs_merge(&ln->runs, ln->runs.n - 2, 2, &link_order) < 0)
			break;	/* more runs to search, still right */
	return 0;
}

int link_names_add(struct link_names *ln, dev_t dev, ino_t ino, const char *name)
{
	size_t len = strlen(name);
	int rc;

	if (ln->n == ln->cap) {
		rc = -ENOMEM;
		if (ln->cap && ln->cap >= link_names_max() && !ln->spill_failed) {
			rc = link_spill(ln);
			ln->spill_failed = rc < 0;
		}
		/* where the file fails, the records stay in memory: sorted,
		 * so hashed anew */
		if (rc < 0 && (rc = link_grow(ln)) < 0)
			return ovs_err(-rc, "out of memory");
	}
	rc = ovs_runs_append(&ln->names, name, len);
	if (rc < 0)
		return ovs_err(-rc, "keep the names of hard-linked files in /tmp: %s",
			       strerror(-rc));
	ln->mem[ln->n] = (struct link_rec){ dev, ino, ln->names_end, len };
	ln->names_end += len;
	link_hash(ln, ln->n++);
	return 0;
}

void link_names_find(struct link_names *ln, dev_t dev, ino_t ino, struct link_iter *it)
{
	(void)ln;
	*it = (struct link_iter){ .dev = dev, .ino = ino, .at = -1 };
}

static int read_fail(int rc)
{
	return ovs_err(-rc, "read the names of hard-linked files from /tmp: %s", strerror(-rc));
}

/* record i of run */
static int run_rec(struct link_names *ln, size_t run, off_t i, struct link_rec *r)
{
	return ovs_runs_read(&ln->runs, r, sizeof(*r),
			     ln->runs.run[run].off + i * (off_t)sizeof(*r));
}

static const char *link_name(struct link_names *ln, const struct link_rec *r, int *err)
{
	if (r->len + 1 > ln->namecap) {
		char *p = realloc(ln->name, r->len + 1);

		if (!p) {
			*err = ovs_err(ENOMEM, "out of memory");
			return NULL;
		}
		ln->name = p;
		ln->namecap = r->len + 1;
	}
	if (r->len && (*err = ovs_runs_read(&ln->names, ln->name, r->len, r->off)) < 0) {
		*err = read_fail(*err);
		return NULL;
	}
	ln->name[r->len] = '\0';
	return ln->name;
}

const char *link_names_next(struct link_names *ln, struct link_iter *it, int *err)
{
	struct link_rec r;

	*err = 0;
	/* the runs, oldest first: each a binary search, then on */
	for (; it->run < ln->runs.n; it->run++, it->at = -1) {
		off_t count = ln->runs.run[it->run].len / (off_t)sizeof(r);

		if (it->at < 0) {
			off_t lo = 0, hi = count;

			while (lo < hi) {
				off_t mid = lo + (hi - lo) / 2;

				*err = run_rec(ln, it->run, mid, &r);
				if (*err < 0) {
					*err = read_fail(*err);
					return NULL;
				}
				if (key_cmp(it->dev, it->ino, &r) > 0)
					lo = mid + 1;
				else
					hi = mid;
			}
			it->at = lo;
		}
		if (it->at >= count)
			continue;
		*err = run_rec(ln, it->run, it->at, &r);
		if (*err < 0) {
			*err = read_fail(*err);
			return NULL;
		}
		if (key_cmp(it->dev, it->ino, &r) != 0)
			continue;
		it->at++;
		return link_name(ln, &r, err);
	}
	/* then memory: equal keys lie along a probe in the order added */
	if (!ln->hcap)
		return NULL;
	if (!it->hash_started) {
		it->hash_started = true;
		it->slot = link_home(ln, it->dev, it->ino);
	}
	while (ln->hash[it->slot]) {
		const struct link_rec *m = &ln->mem[ln->hash[it->slot] - 1];

		it->slot = (it->slot + 1) & (ln->hcap - 1);
		if (key_cmp(it->dev, it->ino, m) == 0)
			return link_name(ln, m, err);
	}
	return NULL;
}

void link_names_free(struct link_names *ln)
{
	ovs_runs_free(&ln->runs);
	ovs_runs_free(&ln->names);
	free(ln->mem);
	free(ln->hash);
	free(ln->name);
	*ln = (struct link_names)LINK_NAMES_INIT;
}
