/* Sorted runs in an unlinked file (see runs.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ovsnap-private.h"
#include "runs.h"

/* appended bytes are written this many at a time */
#define RUNS_WRITE_BUF	(64u << 10)

/* The file: an unlinked one in /tmp, memory if /tmp cannot take one. */
static int runs_open(struct ovs_runs *rs)
{
	bool in_memory = false;

	if (rs->fd >= 0)
		return 0;
	rs->fd = ovs_scratch_file("ovsnap-runs", &in_memory);
	return rs->fd < 0 ? rs->fd : 0;
}

static int runs_flush(struct ovs_runs *rs)
{
	int rc = ovs_pwrite_all(rs->fd, rs->wbuf, rs->wlen, rs->end);

	if (rc < 0)
		return rc;
	rs->end += rs->wlen;
	rs->wlen = 0;
	return 0;
}

int ovs_runs_append(struct ovs_runs *rs, const void *buf, size_t len)
{
	int rc = runs_open(rs);

	if (rc < 0)
		return rc;
	if (!rs->wbuf && !(rs->wbuf = malloc(RUNS_WRITE_BUF)))
		return -ENOMEM;
	if (rs->wlen + len > RUNS_WRITE_BUF) {
		rc = runs_flush(rs);
		if (rc < 0)
			return rc;
	}
	if (len >= RUNS_WRITE_BUF) {
		rc = ovs_pwrite_all(rs->fd, buf, len, rs->end);
		if (rc == 0)
			rs->end += len;
		return rc;
	}
	memcpy(rs->wbuf + rs->wlen, buf, len);
	rs->wlen += len;
	return 0;
}

int ovs_runs_finish(struct ovs_runs *rs)
{
	struct ovs_run *run;
	int rc = runs_open(rs);

	if (rc == 0)
		rc = runs_flush(rs);
	if (rc < 0)
		return rc;
	run = realloc(rs->run, (rs->n + 1) * sizeof(*run));
	if (!run)
		return -ENOMEM;
	rs->run = run;
	rs->run[rs->n++] = (struct ovs_run){ rs->open_at, rs->end - rs->open_at };
	rs->open_at = rs->end;
	return 0;
}

void ovs_runs_abandon(struct ovs_runs *rs)
{
	rs->wlen = 0;
	rs->end = rs->open_at;
}

void ovs_runs_free(struct ovs_runs *rs)
{
	if (rs->fd >= 0)
		close(rs->fd);
	free(rs->run);
	free(rs->wbuf);
	*rs = (struct ovs_runs)OVS_RUNS_INIT;
}

void ovs_run_reader_init(struct ovs_run_reader *r, const struct ovs_runs *rs, size_t i)
{
	r->fd = rs->fd;
	r->at = rs->run[i].off;
	r->end = rs->run[i].off + rs->run[i].len;
	r->pos = r->len = 0;
}

const void *ovs_run_peek(struct ovs_run_reader *r, size_t want, int *err)
{
	*err = 0;
	if (r->len - r->pos >= want)
		return r->buf + r->pos;
	/* keep what is left of buf at its start, fill the rest */
	memmove(r->buf, r->buf + r->pos, r->len - r->pos);
	r->len -= r->pos;
	r->pos = 0;
	while (r->len < want && r->at < r->end) {
		size_t room = sizeof(r->buf) - r->len;
		ssize_t got;

		if ((off_t)room > r->end - r->at)
			room = r->end - r->at;
		got = pread(r->fd, r->buf + r->len, room, r->at);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			*err = got < 0 ? -errno : -EIO;
			return NULL;
		}
		r->len += got;
		r->at += got;
	}
	if (r->len >= want)
		return r->buf;
	if (r->len)
		*err = -EIO;	/* the run ends inside a record */
	return NULL;
}

void ovs_run_skip(struct ovs_run_reader *r, size_t n)
{
	r->pos += n;
}

int ovs_runs_read(struct ovs_runs *rs, void *buf, size_t len, off_t off)
{
	int rc = 0;

	if (off + (off_t)len > rs->end && rs->wlen)
		rc = runs_flush(rs);	/* some of them are still in wbuf */
	if (rc < 0)
		return rc;
	if (off + (off_t)len > rs->end)
		return -EIO;
	while (len) {
		ssize_t got = pread(rs->fd, buf, len, off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -EIO;
		buf = (char *)buf + got;
		off += got;
		len -= got;
	}
	return 0;
}

size_t ovs_runs_fan_in(void)
{
	const char *env = getenv("OVSNAP_TEST_RUNS_FAN_IN");
	unsigned long long n = env ? strtoull(env, NULL, 10) : 0;

	if (!n)
		return OVS_RUNS_FAN_IN;
	return n < 2 ? 2 : n;
}

/* A run being merged: its reader and its least record not taken. */
struct merge_src {
	struct ovs_run_reader r;
	const void *cur;	/* NULL: none left */
	size_t size;
};

static int merge_src_next(struct merge_src *s, const struct ovs_runs_order *ord)
{
	const void *head;
	int err;

	if (s->cur)
		ovs_run_skip(&s->r, s->size);
	s->cur = NULL;
	head = ovs_run_peek(&s->r, ord->head, &err);
	if (!head)
		return err;
	s->size = ord->size(head, ord->arg);
	if (s->size < ord->head || s->size > OVS_RUN_BUF)
		return -EIO;
	s->cur = ovs_run_peek(&s->r, s->size, &err);
	return s->cur ? 0 : err < 0 ? err : -EIO;
}

/* heap of source indexes, least record first, ties to the earlier run */
static bool merge_less(struct merge_src *src, const struct ovs_runs_order *ord, size_t a, size_t b)
{
	int c = ord->cmp(src[a].cur, src[b].cur, ord->arg);

	return c < 0 || (c == 0 && a < b);
}

static void merge_down(struct merge_src *src, const struct ovs_runs_order *ord, size_t *heap,
		       size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i, t;

		if (l < n && merge_less(src, ord, heap[l], heap[m]))
			m = l;
		if (l + 1 < n && merge_less(src, ord, heap[l + 1], heap[m]))
			m = l + 1;
		if (m == i)
			return;
		t = heap[i];
		heap[i] = heap[m];
		heap[m] = t;
		i = m;
	}
}

/* The file's bytes [off, off + len) are not needed any more. */
static void runs_forget(struct ovs_runs *rs, off_t off, off_t len)
{
	if (len > 0)	/* where it cannot, they just stay */
		(void)fallocate(rs->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
}

int ovs_runs_merge(struct ovs_runs *rs, size_t first, size_t n, const struct ovs_runs_order *ord)
{
	struct merge_src *src;
	size_t *heap, nheap = 0;
	int rc = 0;

	if (n < 2)
		return 0;
	src = calloc(n, sizeof(*src));
	heap = calloc(n, sizeof(*heap));
	if (!src || !heap) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		ovs_run_reader_init(&src[i].r, rs, first + i);
		rc = merge_src_next(&src[i], ord);
		if (rc == 0 && src[i].cur)
			heap[nheap++] = i;
	}
	for (size_t i = nheap / 2; rc == 0 && i-- > 0;)
		merge_down(src, ord, heap, nheap, i);
	while (rc == 0 && nheap) {
		struct merge_src *s = &src[heap[0]];

		rc = ovs_runs_append(rs, s->cur, s->size);
		if (rc == 0)
			rc = merge_src_next(s, ord);
		if (rc == 0 && !s->cur)
			heap[0] = heap[--nheap];
		if (rc == 0)
			merge_down(src, ord, heap, nheap, 0);
	}
	if (rc == 0)
		rc = ovs_runs_finish(rs);
	if (rc < 0) {
		ovs_runs_abandon(rs);
		goto out;
	}
	/* the merged run (the last) in place of its inputs */
	for (size_t i = first; i < first + n; i++)
		runs_forget(rs, rs->run[i].off, rs->run[i].len);
	rs->run[first] = rs->run[rs->n - 1];
	memmove(&rs->run[first + 1], &rs->run[first + n],
		(rs->n - 1 - first - n) * sizeof(*rs->run));
	rs->n -= n;
out:
	free(src);
	free(heap);
	return rc;
}

int ovs_runs_reduce(struct ovs_runs *rs, size_t fan_in, const struct ovs_runs_order *ord)
{
	if (fan_in < 2)
		fan_in = 2;
	while (rs->n > fan_in) {
		/* one pass: each group of fan_in becomes one run */
		for (size_t first = 0; first < rs->n; first++) {
			size_t n = rs->n - first < fan_in ? rs->n - first : fan_in;
			int rc = ovs_runs_merge(rs, first, n, ord);

			if (rc < 0)
				return rc;
		}
	}
	return 0;
}
