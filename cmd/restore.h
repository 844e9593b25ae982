/*
 * Shared by ovsnap restore and ovsnap rollback (cmd/restore-apply.c):
 * make paths of the live tree what they were in a snapshot, through the
 * snapshot mount, so that the change is preserved like any other.
 */
#ifndef OVSNAP_CMD_RESTORE_H
#define OVSNAP_CMD_RESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libovsnap.h"

struct restore_stats {
	uint64_t changed;	/* paths made equal to the snapshot */
	uint64_t cloned;	/* files whose data was cloned */
	uint64_t copied;	/* files whose data had to be copied */
};

/*
 * Make each of paths[0..n) (relative to SRC, "" for SRC itself) of the
 * active, locked volume v what it was in snapshot snap: only the paths
 * that differ are touched (lib/diff.c), missing parents are made as they
 * were, directory times come last.  Running it again after an
 * interruption finishes the work (it compares states).  EXIT_OK, or
 * EXIT_FAIL after printing one line (cmd names the command).
 */
int restore_paths(const char *cmd, struct ovs_volume *v, uint64_t snap, const char *const *paths,
		  size_t n, struct restore_stats *stats);

/* --to: the snapshot's path (and all below it) made as destname in the
 * directory destdirfd, which does not have it yet; not through the
 * daemon. */
int restore_copy_out(const char *cmd, struct ovs_volume *v, uint64_t snap, const char *path,
		     int destdirfd, const char *destname, struct restore_stats *stats);

/* How many files are open for writing through v's snapshot mount, or
 * -errno. */
int restore_writers(struct ovs_volume *v);

/* The volume is active and its daemon answers: EXIT_OK, or EXIT_FAIL
 * with one line. */
int restore_check_active(const char *cmd, struct ovs_volume *v);

/* Test hook (OVSNAPD_TEST_HOOKS=1 and OVSNAP_TEST_RESTORE_KILL_AFTER=N):
 * SIGKILL this process after N more changes. */
void restore_step(void);

/* Test hook (OVSNAPD_TEST_HOOKS=1 and OVSNAP_TEST_RESTORE_PAUSE=P): once
 * the changes are known (made NULL), create P.paused and wait (a minute
 * at most) for P to exist before making them; with
 * OVSNAP_TEST_RESTORE_PAUSE_MADE=PATH, instead once PATH is made (made
 * PATH), before its data and metadata. */
void restore_pause(const char *made);

#endif
