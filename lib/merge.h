/*
 * Merging adjacent overlay layers, dropping snapshots, and finishing an
 * interrupted merge or drop (crash recovery).
 *
 * Layer model: snapshot k's view is lowerdir=U_k:U_k+1:...:U_n:SRC.  An
 * older layer sits ABOVE a newer one in every stack that holds both, so
 * "merge newer B into older A" keeps A's entries and folds in what A:B
 * showed of B.
 */
#ifndef OVSNAP_MERGE_H
#define OVSNAP_MERGE_H

#include <stdbool.h>
#include <stdint.h>

#include "libovsnap.h"

/* Called now and then during a merge: entries of the merged-away layer
 * processed so far, and their total (0 while it is not known yet). */
typedef void (*ovs_progress_fn)(void *arg, uint64_t done, uint64_t total);

struct ovs_merge_stats {
	uint64_t entries;	/* entries of the newer layer looked at */
	uint64_t moved;		/* entries (subtrees) renamed into the older layer */
	uint64_t discarded;	/* entries hidden by the older layer (deleted with it) */
	uint64_t opaqued;	/* directories of the older layer made opaque */
};

enum ovs_merge_flags {
	OVS_MERGE_NOSYNC = 1 << 0,	/* skip the final syncfs (logic tests only) */
	/* ovs_merge_snapshots_flags/ovs_drop_snapshot_flags: the caller is
	 * the volume's daemon with its barrier up and no preservation in
	 * flight, so the active layer may be folded or dropped. */
	OVS_MERGE_UNDER_BARRIER = 1 << 1,
};

/*
 * Merge the layer directory newerfd INTO olderfd so that olderfd over the
 * layers below newerfd shows exactly what olderfd:newerfd showed.  Entries
 * move by rename (no data copy); olderfd's entries and directory metadata
 * win.  What is left in newerfd afterwards is hidden and must be deleted by
 * the caller.  Idempotent: re-running it after an interruption at any point
 * finishes the same merge.  Refuses (-EOPNOTSUPP) layers with redirects or
 * metacopy entries, before changing anything.
 */
int ovs_merge_layers(int olderfd, int newerfd, unsigned flags,
		     ovs_progress_fn progress, void *arg, struct ovs_merge_stats *stats);

/*
 * Fold the snapshots after `older` up to and including `newer` (adjacent
 * run, older first) into older's layer: older's view and every older view
 * stay exactly the same; the folded snapshots disappear.  The caller holds
 * the volume lock.  The active layer (newest snapshot of an active volume)
 * cannot be folded (-EBUSY with a message) except by its daemon, under
 * its barrier (OVS_MERGE_UNDER_BARRIER): `ovsnap merge` and `ovsnap drop`
 * ask the daemon for that.
 */
int ovs_merge_snapshots(struct ovs_volume *v, uint64_t older, uint64_t newer,
			ovs_progress_fn progress, void *arg);
int ovs_merge_snapshots_flags(struct ovs_volume *v, uint64_t older, uint64_t newer,
			      unsigned flags, ovs_progress_fn progress, void *arg);

/*
 * Drop one snapshot: the oldest by deleting its layer, any other by merging
 * its layer into the next older one.  The newest of an inactive volume is
 * merged into the previous one, which becomes the newest.  -EBUSY for the
 * newest of an active volume, unless OVS_MERGE_UNDER_BARRIER (the daemon).
 * The caller holds the volume lock.
 */
int ovs_drop_snapshot(struct ovs_volume *v, uint64_t id,
		      ovs_progress_fn progress, void *arg);
int ovs_drop_snapshot_flags(struct ovs_volume *v, uint64_t id, unsigned flags,
			    ovs_progress_fn progress, void *arg);

/*
 * Finish a merge or drop left pending by an interrupted command (the intent
 * record says which).  Call it after taking the volume lock and loading the
 * registry.  Returns 1 when it finished something, 0 when there was nothing
 * of merge/drop pending (other intents are left alone), -errno on failure.
 */
int ovs_recover(struct ovs_volume *v);

#endif
