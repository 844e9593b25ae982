/* Sorted runs in an unlinked file (see runs.h). */
#include <errno.h>
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
