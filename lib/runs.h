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

/* len bytes at off of the file (the runs' bytes, and those appended but
 * not finished): 0 or -errno. */
int ovs_runs_read(struct ovs_runs *rs, void *buf, size_t len, off_t off);

/*
 * Merging runs into longer ones.  Each run being merged costs a reader
 * (OVS_RUN_BUF), so a caller merging the runs of a huge input first
 * merges them in groups (ovs_runs_reduce()) until at most a fan-in of
 * them are left: memory bounded by the fan-in, time O(n log n).
 */
struct ovs_runs_order {
	size_t head;		/* the bytes of a record that tell its size */
	/* a record's size (<= OVS_RUN_BUF) from its head, 0 if it is none
	 * (a damaged run) */
	size_t (*size)(const void *head, void *arg);
	int (*cmp)(const void *a, const void *b, void *arg);
	void *arg;
};

/* Runs merged at a time: OVS_RUNS_FAN_IN, or the tests' fan-in
 * OVSNAP_TEST_RUNS_FAN_IN (at least 2). */
#define OVS_RUNS_FAN_IN	64
size_t ovs_runs_fan_in(void);
/* Merge runs [first, first + n) into one that takes their place (equal
 * records in the order of their runs); their space in the file is
 * freed where the file can punch holes.  No run may be being written.
 * 0, or -errno with the runs as they were. */
int ovs_runs_merge(struct ovs_runs *rs, size_t first, size_t n, const struct ovs_runs_order *ord);
/* Merge groups of fan_in runs, in order, until at most fan_in are left. */
int ovs_runs_reduce(struct ovs_runs *rs, size_t fan_in, const struct ovs_runs_order *ord);

#endif
