/*
 * The names of hard-linked files by inode, for ovsnap restore
 * (cmd/restore-apply.c), in bounded memory (issue 13 item 3): a
 * restore of a tree of a million linked files must neither hold all
 * their names nor search them one by one for each file.
 *
 * The names are written to an unlinked scratch file as they are added;
 * their (dev, ino, where) records are hashed in memory up to a budget,
 * then written out sorted as a run (lib/runs.h), and the runs are kept
 * few by merging the newest two while they are of a size (a binary
 * counter: log2 of the runs, each record merged log2 times).  A name is
 * found by a binary search of each run, then the hash.  Names come back
 * in the order they were added.
 */
#ifndef OVSNAP_CMD_RESTORE_LINKS_H
#define OVSNAP_CMD_RESTORE_LINKS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "runs.h"

struct link_rec {
	uint64_t dev, ino;
	uint64_t off;		/* of the name in names: the order added */
	uint64_t len;
};

struct link_names {
	struct ovs_runs runs;	/* sorted runs of link_rec: the older names */
	struct ovs_runs names;	/* every name, one after another */
	off_t names_end;
	struct link_rec *mem;	/* the newer ones */
	size_t n, cap;
	uint32_t *hash;		/* 1 + their index in mem by (dev, ino); 0: free */
	size_t hcap;
	bool spill_failed;	/* grow in memory from now on */
	char *name;		/* the name found last */
	size_t namecap;
};

#define LINK_NAMES_INIT	{ .runs = OVS_RUNS_INIT, .names = OVS_RUNS_INIT }

/* Where a search is: a run (binary search, then on), then the hash. */
struct link_iter {
	uint64_t dev, ino;
	size_t run;		/* == runs.n: the hash */
	off_t at;		/* record in the run; -1 before the search */
	size_t slot;		/* in the hash */
	bool hash_started;
};

/* 0, or -errno with the message set. */
int link_names_add(struct link_names *ln, dev_t dev, ino_t ino, const char *name);
void link_names_find(struct link_names *ln, dev_t dev, ino_t ino, struct link_iter *it);
/* The next name of the inode, in the order added (valid until the next
 * call); NULL after the last (*err 0) or on a read error (*err -errno,
 * the message set). */
const char *link_names_next(struct link_names *ln, struct link_iter *it, int *err);
void link_names_free(struct link_names *ln);

#endif
