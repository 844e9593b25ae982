/*
 * Check and repair a volume: its registry against its store, interrupted
 * operations, leftovers, the layer format, the mounts, changes made while
 * SRC was unprotected and user data that overlayfs would misread.
 *
 * The library never prints: every problem found is handed to the caller's
 * report callback as a struct ovs_fsck_finding, after the repair (if any)
 * was attempted, so that the finding says what became of it.
 */
#ifndef OVSNAP_FSCK_H
#define OVSNAP_FSCK_H

#include <stdbool.h>
#include <stdint.h>

enum ovs_fsck_repair {
	OVS_FSCK_NO_REPAIR,	/* -n: change nothing */
	OVS_FSCK_PREEN,		/* -p: repairs that lose nothing */
	OVS_FSCK_REPAIR_ALL,	/* -y: every repair there is */
};

enum ovs_fsck_severity {
	OVS_FSCK_WARNING,	/* worth knowing; leaves the exit status alone */
	OVS_FSCK_ERROR,
};

struct ovs_fsck_finding {
	enum ovs_fsck_severity severity;
	bool has_snapshot;	/* snapshot is meaningful */
	uint64_t snapshot;
	/* What it concerns: "upper/a/b" or "work/x" inside a snapshot's
	 * layer, "registry" or "layers/7" inside the volume's store, or an
	 * absolute path (SRC and what lies below it, mount points). */
	const char *path;
	/* A short stable name of the check, for scripts and --json:
	 * registry, store, intent, layer-missing, layer-extra, work-leftover,
	 * volatile, layer-format, daemon, view, unprotected-change,
	 * frozen-change, user-data. */
	const char *check;
	/* What is wrong, then ": " and what was done or what to do. */
	const char *message;
	bool repairable;	/* some mode of fsck can repair it */
	bool repaired;
};

typedef void (*ovs_fsck_report_fn)(const struct ovs_fsck_finding *f, void *data);

struct ovs_fsck_opts {
	enum ovs_fsck_repair repair;
	bool wait;		/* wait for the volume lock instead of -EBUSY */
	ovs_fsck_report_fn report;
	void *data;
};

struct ovs_fsck_summary {
	unsigned errors;	/* findings of severity ERROR */
	unsigned repaired;	/* ... of which repaired */
	unsigned warnings;
};

/*
 * Check the volume of src (an absolute, canonical path) under its lock.
 * Returns 0 when every check ran (findings or not: see *sum), or -errno
 * when fsck itself could not work: -ENOENT not a volume, -EBUSY the lock
 * is held (and !wait), or an I/O error.  Findings reported before such
 * an error stay valid and counted.
 */
int ovs_fsck(const char *src, const struct ovs_fsck_opts *opts, struct ovs_fsck_summary *sum);

#endif
