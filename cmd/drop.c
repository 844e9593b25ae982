/*
 * ovsnap drop — delete snapshots by reference, or prune them by a
 * retention policy (--keep), e.g. from cron or a systemd timer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "ovsnap-private.h"
#include "merge.h"
#include "retention.h"

static char *opt_keep, *opt_class;
static int opt_dry_run, opt_explain, opt_wait, opt_force, opt_json;

static struct poptOption drop_options[] = {
	{ "keep", 'k', POPT_ARG_STRING, &opt_keep, 0,
	  "drop what the policy SPEC does not keep (e.g. last=3,hourly=24,daily=7,"
	  "weekly=4,monthly=12,yearly=2)", "SPEC" },
	{ "class", 'c', POPT_ARG_STRING, &opt_class, 0,
	  "with --keep: the class of snapshots the policy judges (default timeline; "
	  "manual, pre, post)", "CLASS" },
	{ "dry-run", 'n', POPT_ARG_NONE, &opt_dry_run, 0,
	  "print what would be dropped, change nothing", NULL },
	{ "explain", 'e', POPT_ARG_NONE, &opt_explain, 0,
	  "with --keep: print every snapshot, keep or drop, and the rule that keeps it", NULL },
	{ "force", 'f', POPT_ARG_NONE, &opt_force, 0,
	  "drop held snapshots named on the command line too", NULL },
	{ "json", 'J', POPT_ARG_NONE, &opt_json, 0,
	  "print what was (with --dry-run: would be) dropped, and with --keep every "
	  "verdict, as a JSON object", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

static const struct ovs_snapshot *find_snapshot(struct ovs_volume *v, uint64_t id)
{
	for (size_t i = 0; i < ovs_snapshot_count(v); i++)
		if (ovs_snapshot_at(v, i)->id == id)
			return ovs_snapshot_at(v, i);
	return NULL;
}

/* The head of drop --json: {"source": S, "dry_run": B, "policy": SPEC|null,
 * "class": C|null, "snapshots": [ (each from json_snapshot) ]} */
static void json_head(struct ovs_volume *v, const char *spec, enum ovs_snap_class cls,
		      bool dry_run)
{
	fputs("{\"source\": ", stdout);
	ovs_json_string(ovs_volume_source(v));
	printf(", \"dry_run\": %s, \"policy\": ", dry_run ? "true" : "false");
	if (spec)
		ovs_json_string(spec);
	else
		fputs("null", stdout);
	fputs(", \"class\": ", stdout);
	if (spec)
		ovs_json_string(ovs_snap_class_name(cls));
	else
		fputs("null", stdout);
	fputs(", \"snapshots\": [", stdout);
}

/* {"id": N, "name": ..., "action": "drop"|"keep", "reasons": [...]}:
 * reasons (why it is kept) as ovs_keep_reasons_format() names them. */
static void json_snapshot(bool first, uint64_t id, const char *name, bool keep,
			  const char *reasons)
{
	char buf[128], *save = NULL, *r;

	printf("%s{\"id\": %" PRIu64 ", \"name\": ", first ? "" : ", ", id);
	if (name && *name)
		ovs_json_string(name);
	else
		fputs("null", stdout);
	printf(", \"action\": \"%s\", \"reasons\": [", keep ? "keep" : "drop");
	snprintf(buf, sizeof(buf), "%s", keep && reasons ? reasons : "");
	for (r = strtok_r(buf, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
		if (r != buf)
			fputs(", ", stdout);
		ovs_json_string(r);
	}
	fputs("]}", stdout);
}

/* names[i]: the name of plan[i]'s snapshot, copied before the drop */
static void json_verdicts(struct ovs_volume *v, const char *spec, enum ovs_snap_class cls,
			  bool dry_run, const struct ovs_keep_verdict *plan, size_t n,
			  char (*names)[OVS_NAME_MAX + 1])
{
	json_head(v, spec, cls, dry_run);
	for (size_t i = 0; i < n; i++) {
		char why[128];

		ovs_keep_reasons_format(plan[i].reasons, why, sizeof(why));
		json_snapshot(i == 0, plan[i].id, names[i], plan[i].keep, why);
	}
	fputs("]}\n", stdout);
}

static void print_verdicts(struct ovs_volume *v, const struct ovs_keep_verdict *plan, size_t n,
			   bool all)
{
	for (size_t i = 0; i < n; i++) {
		const struct ovs_snapshot *s = find_snapshot(v, plan[i].id);
		char created[64], why[128];

		if (!s || (!all && plan[i].keep))
			continue;
		ovs_format_time_utc(s->created_ns, created, sizeof(created));
		ovs_keep_reasons_format(plan[i].reasons, why, sizeof(why));
		if (all)
			printf("%-6" PRIu64 " %-20s %s %s%s%s\n", s->id, s->name[0] ? s->name : "-",
			       created, plan[i].keep ? "keep" : "drop", plan[i].keep ? " " : "",
			       plan[i].keep ? why : "");
		else
			printf("would drop %" PRIu64 "%s%s\n", s->id, s->name[0] ? " " : "", s->name);
	}
}

/* Syslog each verdict that matters: what the policy drops (no rule of
 * it keeps the snapshot), and what only a hold or a view saves. */
static void log_decisions(struct ovs_volume *v, const char *spec, enum ovs_snap_class cls,
			  const struct ovs_keep_verdict *plan, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char why[128];

		ovs_keep_reasons_format(plan[i].reasons, why, sizeof(why));
		if (!plan[i].keep && (plan[i].reasons & OVS_DROP_BY_SPACE))
			ovs_log(v, "snapshot=%" PRIu64 " retention drop rule=space class=%s "
				"(policy %s: the oldest beyond the space limit)", plan[i].id,
				ovs_snap_class_name(cls), spec);
		else if (!plan[i].keep)
			ovs_log(v, "snapshot=%" PRIu64 " retention drop rule=%s class=%s "
				"(no rule keeps it)", plan[i].id, spec, ovs_snap_class_name(cls));
		else if (!(plan[i].reasons & ~(unsigned)(OVS_KEEP_BY_VIEW | OVS_KEEP_BY_HOLD)))
			ovs_log(v, "snapshot=%" PRIu64 " retention keep rule=%s class=%s by=%s",
				plan[i].id, spec, ovs_snap_class_name(cls), why);
	}
}

int ovs_drop_by_policy(struct ovs_volume *v, const char *spec, enum ovs_snap_class cls,
		       bool explain, bool dry_run)
{
	struct ovs_progress prog = { .what = "drop" };
	struct ovs_keep_verdict *plan = NULL;
	char (*names)[OVS_NAME_MAX + 1];
	struct ovs_keep_policy policy;
	size_t n, dropped = 0;
	int rc;

	rc = ovs_keep_parse(spec, &policy);
	if (rc < 0) {
		ovs_error_lib(rc, "drop %s", ovs_volume_source(v));
		return EXIT_USAGE;
	}
	policy.cls = cls;
	rc = ovs_keep_plan_volume(v, &policy, &plan, &n);
	if (rc < 0) {
		ovs_error_lib(rc, "drop %s", ovs_volume_source(v));
		return EXIT_FAIL;
	}
	if (opt_json)
		;	/* once it is done: below */
	else if (explain)
		print_verdicts(v, plan, n, true);
	else if (dry_run)
		print_verdicts(v, plan, n, false);
	/* What the rules would drop and only a hold or a view keeps. */
	for (size_t i = 0; i < n && !ovs_opt_quiet; i++) {
		const unsigned saved = OVS_KEEP_BY_VIEW | OVS_KEEP_BY_HOLD;
		char label[OVS_NAME_MAX + 64];

		if (!plan[i].keep || !(plan[i].reasons & saved) || (plan[i].reasons & ~saved))
			continue;
		ovs_snapshot_label(find_snapshot(v, plan[i].id), label, sizeof(label));
		if (plan[i].reasons & OVS_KEEP_BY_HOLD)
			fprintf(stderr, "%s: drop %s: keeping %s the policy would drop: it is "
				"held ('ovsnap release' it first)\n", ovs_progname,
				ovs_volume_source(v), label);
		else
			fprintf(stderr, "%s: drop %s: keeping %s the policy would drop: a "
				"mounted view uses it\n", ovs_progname, ovs_volume_source(v),
				label);
	}
	/* The names, copied before the snapshots are gone */
	names = calloc(n ? n : 1, sizeof(*names));
	if (!names) {
		free(plan);
		ovs_error("drop: %s", strerror(ENOMEM));
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ovs_snapshot *s = find_snapshot(v, plan[i].id);

		snprintf(names[i], sizeof(names[i]), "%s", s ? s->name : "");
	}
	if (dry_run) {
		if (opt_json)
			json_verdicts(v, spec, cls, true, plan, n, names);
		free(names);
		free(plan);
		return EXIT_OK;
	}
	log_decisions(v, spec, cls, plan, n);
	rc = ovs_keep_apply(v, plan, n, ovs_progress_show, &prog, &dropped);
	ovs_progress_end(&prog);
	if (rc == 0 && opt_json)
		json_verdicts(v, spec, cls, false, plan, n, names);
	free(names);
	free(plan);
	if (rc < 0) {
		ovs_error_lib(rc, "drop %s", ovs_volume_source(v));
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int cmp_index(const void *a, const void *b)
{
	const size_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

static int drop_listed(struct ovs_volume *v, const char **refs, int nrefs)
{
	struct ovs_progress prog = { .what = "drop" };
	size_t *idx, n = 0, count = ovs_snapshot_count(v);
	char (*names)[OVS_NAME_MAX + 1] = NULL;
	uint64_t *ids;
	int rc, status = EXIT_OK;

	idx = calloc(nrefs, sizeof(*idx));
	ids = calloc(nrefs, sizeof(*ids));
	if (!idx || !ids) {
		ovs_error("drop: %s", strerror(ENOMEM));
		free(idx);
		free(ids);
		return EXIT_FAIL;
	}
	/* Resolve and check everything before the first change. */
	for (int r = 0; r < nrefs; r++) {
		const struct ovs_snapshot *s;
		size_t i;

		rc = ovs_snapshot_resolve(v, refs[r], &s);
		if (rc < 0) {
			ovs_error_lib(rc, "drop %s", ovs_volume_source(v));
			status = EXIT_FAIL;
			goto out;
		}
		for (i = 0; i < count; i++)
			if (ovs_snapshot_at(v, i) == s)
				break;
		if (s->hold && !opt_force) {
			char label[OVS_NAME_MAX + 64];

			ovs_snapshot_label(s, label, sizeof(label));
			ovs_error("drop %s: %s is held: use --force to drop it, or "
				  "'ovsnap release' it first", ovs_volume_source(v), label);
			status = EXIT_FAIL;
			goto out;
		}
		if (ovs_volume_active(v) && i == count - 1 && !opt_dry_run &&
		    !ovs_daemon_running(v)) {
			ovs_error("drop %s: snapshot %" PRIu64 " is the active one and the "
				  "snapshot mount is not running (the daemon died?): run "
				  "'ovsnap activate %s' first", ovs_volume_source(v), s->id,
				  ovs_volume_source(v));
			status = EXIT_FAIL;
			goto out;
		}
		idx[n++] = i;
	}
	/* Oldest first: each layer is then merged once, into a survivor. */
	qsort(idx, n, sizeof(*idx), cmp_index);
	{
		size_t k = 0;

		for (size_t i = 0; i < n; i++)
			if (i == 0 || idx[i] != idx[i - 1])
				ids[k++] = ovs_snapshot_at(v, idx[i])->id;
		n = k;
	}
	names = calloc(n ? n : 1, sizeof(*names));
	if (!names) {
		ovs_error("drop: %s", strerror(ENOMEM));
		status = EXIT_FAIL;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		snprintf(names[i], sizeof(names[i]), "%s", find_snapshot(v, ids[i])->name);
	for (size_t i = 0; i < n; i++) {
		if (opt_dry_run) {
			if (!opt_json)
				printf("would drop %" PRIu64 "\n", ids[i]);
			continue;
		}
		count = ovs_snapshot_count(v);
		if (ovs_volume_active(v) && ovs_snapshot_at(v, count - 1)->id == ids[i]) {
			/* The daemon preserves into it: it merges the layer
			 * away under its barrier and switches to the one
			 * before.  Oldest first, so this is the last one. */
			rc = ovs_daemon_drop_active(v, ids[i]);
			if (rc == 0)
				rc = ovs_registry_load(v);
		} else {
			rc = ovs_drop_snapshot(v, ids[i], ovs_progress_show, &prog);
			ovs_progress_end(&prog);
		}
		if (rc < 0) {
			ovs_error_lib(rc, "drop %s: snapshot %" PRIu64, ovs_volume_source(v), ids[i]);
			status = EXIT_FAIL;
			goto out;
		}
	}
	if (opt_json) {
		json_head(v, NULL, 0, opt_dry_run);
		for (size_t i = 0; i < n; i++)
			json_snapshot(i == 0, ids[i], names[i], false, NULL);
		fputs("]}\n", stdout);
	}
out:
	free(names);
	free(idx);
	free(ids);
	return status;
}

int cmd_drop(int argc, const char **argv)
{
	struct ovs_volume *v = NULL;
	const char **args;
	poptContext pc;
	enum ovs_snap_class cls = OVS_CLASS_TIMELINE;
	int status, nargs;

	pc = ovs_popt_parse("drop", argc, argv, drop_options, "SRC [SNAP...]", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "drop", 1, -1, &nargs, &status);
	if (!args)
		goto out;
	if (opt_keep && nargs > 1) {
		ovs_error("drop: --keep and snapshot arguments cannot be used together");
		status = EXIT_USAGE;
		goto out;
	}
	if (!opt_keep && nargs < 2) {
		ovs_error("drop: name the snapshots to drop, or give --keep SPEC");
		fprintf(stderr, "Try '%s drop --help' for more information.\n", ovs_progname);
		status = EXIT_USAGE;
		goto out;
	}
	if (opt_class && !opt_keep) {
		ovs_error("drop: --class needs --keep");
		status = EXIT_USAGE;
		goto out;
	}
	if (opt_explain && !opt_keep) {
		ovs_error("drop: --explain needs --keep");
		status = EXIT_USAGE;
		goto out;
	}
	if (opt_keep) {
		struct ovs_keep_policy policy;

		/* A bad SPEC is a usage error even before the volume is opened. */
		if (ovs_keep_parse(opt_keep, &policy) < 0 ||
		    (opt_class && ovs_snap_class_parse(opt_class, &cls) < 0)) {
			ovs_error("drop: %s", ovs_last_error());
			status = EXIT_USAGE;
			goto out;
		}
	}
	status = ovs_open_locked("drop", args[0], opt_wait, &v);
	if (status != EXIT_OK)
		goto out;
	if (opt_keep)
		status = ovs_drop_by_policy(v, opt_keep, cls, opt_explain, opt_dry_run);
	else
		status = drop_listed(v, args + 1, nargs - 1);
out:
	if (v)
		ovs_volume_unref(v);
	poptFreeContext(pc);
	return status;
}
