/*
 * ovsnap fsck — check and repair a volume and its snapshots.  The checks
 * live in lib/fsck.c; this file prints their findings and turns them into
 * the exit status of fsck(8).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "fsck.h"

/* fsck(8) exit codes: a bit each, ORed together. */
enum {
	FSCK_OK = 0,
	FSCK_CORRECTED = 1,
	FSCK_UNCORRECTED = 4,
	FSCK_OPERATIONAL = 8,
	FSCK_USAGE = 16,
};

static int opt_no, opt_preen, opt_yes, opt_json, opt_wait;

static struct poptOption fsck_options[] = {
	{ "no", 'n', POPT_ARG_NONE, &opt_no, 0,
	  "check only, change nothing (the default)", NULL },
	{ "preen", 'p', POPT_ARG_NONE, &opt_preen, 0,
	  "repair what is safe (loses nothing) without asking", NULL },
	{ "yes", 'y', POPT_ARG_NONE, &opt_yes, 0,
	  "repair all that can be repaired", NULL },
	{ "json", 'J', POPT_ARG_NONE, &opt_json, 0,
	  "print one JSON object with every finding", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

static const struct ovs_excl fsck_excl[] = {
	{ { "-n", "-p", "-y" } },
	{ { NULL } }
};

/* --json collects the findings and prints them at the end. */
struct json_finding {
	bool has_snapshot;
	uint64_t snapshot;
	char *path, *check, *message;
	bool repaired;
};

struct report_state {
	struct json_finding *list;
	size_t n, alloc;
	bool oom;
};

static void print_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void report_text(const struct ovs_fsck_finding *f, void *data)
{
	if (f->severity == OVS_FSCK_WARNING)
		fputs("warning: ", stdout);
	if (f->has_snapshot)
		printf("snapshot %" PRIu64 ": ", f->snapshot);
	printf("%s: %s\n", f->path, f->message);
}

static void report_json(const struct ovs_fsck_finding *f, void *data)
{
	struct report_state *rs = data;
	struct json_finding *j;

	if (rs->n == rs->alloc) {
		size_t na = rs->alloc ? rs->alloc * 2 : 32;
		struct json_finding *nl = realloc(rs->list, na * sizeof(*nl));

		if (!nl) {
			rs->oom = true;
			return;
		}
		rs->list = nl;
		rs->alloc = na;
	}
	j = &rs->list[rs->n];
	j->has_snapshot = f->has_snapshot;
	j->snapshot = f->snapshot;
	j->repaired = f->repaired;
	j->path = strdup(f->path);
	j->check = strdup(f->check);
	j->message = strdup(f->message);
	if (!j->path || !j->check || !j->message) {
		free(j->path);
		free(j->check);
		free(j->message);
		rs->oom = true;
		return;
	}
	rs->n++;
}

static void print_json(const char *src, struct report_state *rs, int status)
{
	fputs("{\"source\": ", stdout);
	print_json_string(src);
	fputs(", \"findings\": [", stdout);
	for (size_t i = 0; i < rs->n; i++) {
		struct json_finding *j = &rs->list[i];

		fputs(i ? ",\n  {\"snapshot\": " : "\n  {\"snapshot\": ", stdout);
		if (j->has_snapshot)
			printf("%" PRIu64, j->snapshot);
		else
			fputs("null", stdout);
		fputs(", \"path\": ", stdout);
		print_json_string(j->path);
		fputs(", \"check\": ", stdout);
		print_json_string(j->check);
		fputs(", \"message\": ", stdout);
		print_json_string(j->message);
		printf(", \"repaired\": %s}", j->repaired ? "true" : "false");
		free(j->path);
		free(j->check);
		free(j->message);
	}
	printf("%s], \"exit\": %d}\n", rs->n ? "\n" : "", status);
	free(rs->list);
}

int cmd_fsck(int argc, const char **argv)
{
	static const char *const names[] = { "-n", "-p", "-y" };
	struct report_state rs = { 0 };
	struct ovs_fsck_opts opts = { 0 };
	struct ovs_fsck_summary sum;
	const char **args;
	poptContext pc;
	char *src = NULL;
	int given[3], status, n, rc;

	/* the CLI frame's usage status is 2; fsck(8) says 16 */
	pc = ovs_popt_parse("fsck", argc, argv, fsck_options, "SRC", &status);
	if (!pc)
		return status == EXIT_USAGE ? FSCK_USAGE : status;
	args = ovs_popt_args(pc, "fsck", 1, 1, &n, &status);
	if (!args) {
		status = FSCK_USAGE;
		goto out;
	}
	given[0] = opt_no;
	given[1] = opt_preen;
	given[2] = opt_yes;
	if (ovs_check_exclusive("fsck", fsck_excl, names, given, 3) != EXIT_OK) {
		status = FSCK_USAGE;
		goto out;
	}
	status = FSCK_OPERATIONAL;
	src = ovs_resolve_source("fsck", args[0]);
	if (!src)
		goto out;

	opts.repair = opt_yes ? OVS_FSCK_REPAIR_ALL : opt_preen ? OVS_FSCK_PREEN
							     : OVS_FSCK_NO_REPAIR;
	opts.wait = opt_wait;
	opts.report = opt_json ? report_json : report_text;
	opts.data = &rs;
	rc = ovs_fsck(src, &opts, &sum);

	status = FSCK_OK;
	if (sum.repaired)
		status |= FSCK_CORRECTED;
	if (sum.errors > sum.repaired)
		status |= FSCK_UNCORRECTED;
	if (rc < 0 || rs.oom) {
		if (rc < 0)
			ovs_error_lib(rc, "fsck %s", src);
		else
			ovs_error("fsck %s: out of memory", src);
		status |= FSCK_OPERATIONAL;
	}
	if (opt_json) {
		print_json(src, &rs, status);
	} else if (!ovs_opt_quiet && rc == 0) {
		if (sum.errors == 0)
			printf("%s: clean\n", src);
		else
			printf("%s: %u error%s, %u repaired, %u left\n", src, sum.errors,
			       sum.errors == 1 ? "" : "s", sum.repaired,
			       sum.errors - sum.repaired);
	}
out:
	free(src);
	poptFreeContext(pc);
	return status;
}
