/*
 * Retention policies: which snapshots a --keep SPEC keeps, and why.
 *
 * SPEC is a comma-separated list of RULE=N with RULE one of last, hourly,
 * daily, weekly, monthly, yearly, and space=N% or space=SIZE (see
 * ovs_keep_limit_space): keep the newest snapshot of each of the
 * N most recent periods that have a snapshot (UTC; ISO 8601 weeks; "last"
 * keeps the N newest snapshots).  A period without a snapshot does not use
 * up N, as restic's --keep-* options.  The rules judge the snapshots of
 * one class (timeline unless the policy says otherwise) and count only
 * those; every other snapshot is kept.  Whatever the rules say, the newest
 * snapshot (the active one), held snapshots and snapshots whose layers a
 * mounted view uses are kept.
 */
#ifndef OVSNAP_RETENTION_H
#define OVSNAP_RETENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libovsnap.h"
#include "merge.h"

enum ovs_keep_rule {
	OVS_KEEP_LAST,
	OVS_KEEP_HOURLY,
	OVS_KEEP_DAILY,
	OVS_KEEP_WEEKLY,
	OVS_KEEP_MONTHLY,
	OVS_KEEP_YEARLY,
	OVS_KEEP_NRULES
};

struct ovs_keep_policy {
	unsigned count[OVS_KEEP_NRULES];	/* 0: the rule is not used */
	enum ovs_snap_class cls;	/* the class the rules apply to */
	/* space=N% / space=SIZE: at most this much of the filesystem for
	 * the volume's layers (0: no such rule) */
	unsigned space_percent;
	uint64_t space_bytes;
};

/* Reasons a snapshot is kept (bits); the rule bits are 1 << enum ovs_keep_rule. */
enum ovs_keep_reason {
	OVS_KEEP_BY_NEWEST = 1 << 8,	/* the newest snapshot: always kept */
	OVS_KEEP_BY_HOLD = 1 << 9,	/* held */
	OVS_KEEP_BY_VIEW = 1 << 10,	/* a mounted view uses its layer */
	OVS_KEEP_BY_CLASS = 1 << 11,	/* not of the class the rules apply to */
	OVS_KEEP_BY_SPACE = 1 << 12,	/* within the space limit (no count rule) */
	/* Not a reason to keep: on a dropped verdict, the space limit (not
	 * the count rules) dropped it, which the log says. */
	OVS_DROP_BY_SPACE = 1 << 13,
};

struct ovs_keep_verdict {
	uint64_t id;
	bool keep;
	unsigned reasons;	/* why it is kept (0 when dropped) */
};

/* Parse SPEC ("last=3,daily=7", "daily=7,space=20%", "space=10G");
 * -EINVAL with a message.  The policy's
 * class is timeline: set p->cls afterwards for another. */
int ovs_keep_parse(const char *spec, struct ovs_keep_policy *p);

/*
 * Judge every snapshot of v (registry loaded) by the policy: *plan gets one
 * verdict per snapshot, oldest first (free() it).  mounted/nmounted: ids of
 * snapshots that are views now, and kernel_from: the oldest snapshot a
 * kernel (--kernel) view uses, or 0 for none: its layer and every newer
 * one are kept.  ovs_keep_plan_volume() finds those itself.
 */
int ovs_keep_plan(const struct ovs_volume *v, const struct ovs_keep_policy *p,
		  const uint64_t *mounted, size_t nmounted, uint64_t kernel_from,
		  struct ovs_keep_verdict **plan, size_t *n);
int ovs_keep_plan_volume(const struct ovs_volume *v, const struct ovs_keep_policy *p,
			 struct ovs_keep_verdict **plan, size_t *n);

/*
 * The space rule over a plan: while the layers the plan keeps hold more
 * than limit bytes (space[i]: what snapshot i holds on its own, as list's
 * SPACE), drop the oldest snapshot of the policy's class that only its
 * rules keep.  Dropping a snapshot that is not the oldest merges its
 * layer into the one before, which may keep part of it: the estimate can
 * only be low, and the next run drops more.
 */
void ovs_keep_limit_space(const struct ovs_keep_policy *p, struct ovs_keep_verdict *plan,
			  size_t n, const uint64_t *space, uint64_t limit);

/* "daily,weekly" / "newest" / "hold" ...: the reasons, comma-separated. */
void ovs_keep_reasons_format(unsigned reasons, char *buf, size_t len);

/*
 * Drop every snapshot the plan drops, oldest first (ovs_drop_snapshot).
 * The caller holds the volume lock.  *dropped counts the snapshots gone.
 */
int ovs_keep_apply(struct ovs_volume *v, const struct ovs_keep_verdict *plan, size_t n,
		   ovs_progress_fn progress, void *arg, size_t *dropped);

#endif
