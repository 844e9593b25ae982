/*
 * ovsnap take — take a snapshot of a directory.  The first take sets the
 * volume up: store, registry and the snapshot mount over SRC.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "retention.h"

static char *opt_name, *opt_store, *opt_keep;
static int opt_json, opt_force, opt_wait, opt_hold;

static struct poptOption take_options[] = {
	{ "name", 'n', POPT_ARG_STRING, &opt_name, 0,
	  "name the snapshot (letters, digits, '.', '_', '-')", "NAME" },
	{ "hold", 'H', POPT_ARG_NONE, &opt_hold, 0,
	  "protect the snapshot from retention (drop --keep never drops it)", NULL },
	{ "keep", 'k', POPT_ARG_STRING, &opt_keep, 0,
	  "after the take, drop what the retention policy SPEC does not keep "
	  "(as ovsnap drop --keep)", "SPEC" },
	{ "json", 'J', POPT_ARG_NONE, &opt_json, 0,
	  "print the new snapshot as a JSON object", NULL },
	{ "store", 's', POPT_ARG_STRING, &opt_store, 0,
	  "first take only: keep the store in DIR (default: .ovsnap at the root of SRC's filesystem)", "DIR" },
	{ "force", 'f', POPT_ARG_NONE, &opt_force, 0,
	  "first take only: set up even while processes use SRC", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

static int print_snapshot(struct ovs_volume *v, uint64_t id)
{
	const struct ovs_snapshot *s = NULL;
	char ref[32], created[64], upper[4096];
	int rc;

	if (!opt_json) {
		printf("%" PRIu64 "\n", id);
		return 0;
	}
	snprintf(ref, sizeof(ref), "%" PRIu64, id);
	rc = ovs_snapshot_resolve(v, ref, &s);
	if (rc == 0)
		rc = ovs_snapshot_upper(v, id, upper, sizeof(upper));
	if (rc < 0)
		return rc;
	ovs_format_time_utc(s->created_ns, created, sizeof(created));
	printf("{\"id\": %" PRIu64 ", \"name\": ", id);
	if (s->name[0])
		ovs_json_string(s->name);
	else
		fputs("null", stdout);
	printf(", \"created\": \"%s\", \"upper\": ", created);
	ovs_json_string(upper);
	fputs("}\n", stdout);
	return 0;
}

/* A name that already names a snapshot is refused before anything else. */
static int check_name(struct ovs_volume *v, const char *src)
{
	const struct ovs_snapshot *s;

	if (!opt_name)
		return EXIT_OK;
	if (!ovs_snapshot_name_valid(opt_name)) {
		ovs_error("take %s: invalid snapshot name '%s' (letters, digits, '.', '_', '-'; "
			  "not all digits; not starting with '@', '.' or '-')", src, opt_name);
		return EXIT_USAGE;
	}
	if (v && ovs_snapshot_resolve(v, opt_name, &s) == 0) {
		ovs_error("take %s: a snapshot named '%s' exists already (id %" PRIu64 ")",
			  src, opt_name, s->id);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* Open the volume of src, setting it up if it is none yet. */
static int open_or_create(const char *src, struct ovs_volume **v)
{
	struct ovs_volume_opts opts = { .store = opt_store };
	int rc;

	rc = ovs_volume_open(src, v);
	if (rc == 0) {
		if (opt_store)
			ovs_error("take %s: --store only applies when a volume is set up; "
				  "ignoring it", src);
		return EXIT_OK;
	}
	if (rc != -ENOENT) {
		ovs_error_lib(rc, "take %s", src);
		return EXIT_FAIL;
	}
	if (check_name(NULL, src) != EXIT_OK)
		return EXIT_USAGE;
	if (!opt_force && ovs_check_no_users("take", src) != EXIT_OK)
		return EXIT_FAIL;
	rc = ovs_volume_create(src, &opts, v);
	if (rc < 0) {
		ovs_error_lib(rc, "take %s", src);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int take_locked(struct ovs_volume *v, const char *src)
{
	uint64_t id;
	int rc, status;

	status = check_name(v, src);
	if (status != EXIT_OK)
		return status;
	if (opt_keep) {
		struct ovs_keep_policy policy;

		rc = ovs_keep_parse(opt_keep, &policy);
		if (rc < 0) {
			ovs_error_lib(rc, "take %s", src);
			return EXIT_USAGE;
		}
	}
	if (!ovs_volume_active(v)) {
		/* A volume without snapshots is still being set up: protection
		 * starts here.  One that has snapshots was switched off on
		 * purpose, and a snapshot taken now could not be kept. */
		if (ovs_snapshot_count(v) > 0) {
			ovs_error("take %s: the volume is deactivated; run 'ovsnap activate %s' first",
				  src, src);
			return EXIT_FAIL;
		}
		status = ovs_activate_locked("take", v, opt_force);
		if (status != EXIT_OK)
			return status;
	} else if (!ovs_daemon_running(v)) {
		ovs_error("take %s: the snapshot mount is not running (the daemon died?); "
			  "run 'ovsnap activate %s'", src, src);
		return EXIT_FAIL;
	}
	rc = ovs_daemon_take(v, opt_name, &id);
	if (rc < 0) {
		ovs_error_lib(rc, "take %s", src);
		return EXIT_FAIL;
	}
	/* The daemon wrote the registry: read it again before changing it. */
	rc = ovs_registry_load(v);
	if (rc == 0 && opt_hold)
		rc = ovs_registry_set_hold(v, id, true);
	if (rc == 0)
		rc = print_snapshot(v, id);
	if (rc < 0) {
		ovs_error_lib(rc, "take %s: snapshot %" PRIu64 " was taken, but", src, id);
		return EXIT_FAIL;
	}
	if (opt_keep)
		return ovs_drop_by_policy(v, opt_keep, false, false);
	return EXIT_OK;
}

int cmd_take(int argc, const char **argv)
{
	struct ovs_volume *v = NULL;
	const char **args;
	poptContext pc;
	char *src = NULL;
	int status, n;

	pc = ovs_popt_parse("take", argc, argv, take_options, "SRC", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "take", 1, 1, &n, &status);
	if (!args)
		goto out;
	status = EXIT_FAIL;
	src = ovs_resolve_source("take", args[0]);
	if (!src)
		goto out;
	status = open_or_create(src, &v);
	if (status != EXIT_OK)
		goto out;
	status = ovs_lock_loaded("take", v, opt_wait);
	if (status != EXIT_OK)
		goto out;
	status = take_locked(v, src);
out:
	if (v) {
		ovs_volume_unlock(v);
		ovs_volume_unref(v);
	}
	free(src);
	poptFreeContext(pc);
	return status;
}
