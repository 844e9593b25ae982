/*
 * Sorted runs spilled to an unlinked file and read back in order: what a
 * walk of a huge folder uses instead of a list in memory (issue 13 item
 * 3).  The caller sorts a memory's worth of records, appends them as one
 * run, and at the end merges the runs, reading each through a small
 * buffer.  The file is an unlinked file in /tmp, or a memory file
 * (memfd) where /tmp cannot take one.  Records are the caller's bytes;
 * a reader hands out up to OVS_RUN_BUF of them contiguous at a time,
 * aligned as the records are if their sizes keep them so.
 */
#ifndef OVSNAP_RUNS_H
#define OVSNAP_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ovs_run {
	off_t off;		/* in the file, bytes */
	off_t len;
};

struct ovs_runs {
	int fd;			/* -1 until the first run */
	off_t end;		/* the runs written and the one being written */
	off_t open_at;		/* where the run being written starts */
	struct ovs_run *run;	/* the finished runs */
	size_t n;
	char *wbuf;		/* appended bytes not written yet */
	size_t wlen;
};

#define OVS_RUNS_INIT	{ .fd = -1 }

/* Append len bytes to the run being written: 0 or -errno (the file
 * could not be made or written: the run is then incomplete). */
int ovs_runs_append(struct ovs_runs *rs, const void *buf, size_t len);
/* End the run being written (as run n - 1): 0 or -errno. */
int ovs_runs_finish(struct ovs_runs *rs);
/* Forget the run being written (after a failed append). */
void ovs_runs_abandon(struct ovs_runs *rs);
void ovs_runs_free(struct ovs_runs *rs);

#define OVS_RUN_BUF	4096

/* One run read in order. */
struct ovs_run_reader {
	int fd;
	off_t at, end;		/* the file's bytes not in buf yet */
	size_t pos, len;	/* buf[pos, len) is read, not taken */
	/* aligned for records of any type, whose sizes are multiples of
	 * their alignment */
	char buf[OVS_RUN_BUF] __attribute__((aligned(16)));
};

void ovs_run_reader_init(struct ovs_run_reader *r, const struct ovs_runs *rs, size_t i);
/* The next want (<= OVS_RUN_BUF) bytes of the run, contiguous, without
 * taking them; NULL at its end (*err 0) or on a read error or a run
 * that ends inside a record (*err -errno). */
const void *ovs_run_peek(struct ovs_run_reader *r, size_t want, int *err);
/* Take n bytes that ovs_run_peek() showed. */
void ovs_run_skip(struct ovs_run_reader *r, size_t n);

#endif
