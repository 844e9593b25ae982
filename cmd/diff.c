/*
 * ovsnap diff — what changed between two snapshots, or between a snapshot
 * and the live tree, one line per path like zfs diff, or as JSON.  The
 * changes come from the layers themselves (lib/diff.c), read from the
 * store, so no view needs to be mounted and the volume may be active or
 * not.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "diff.h"
#include "ovsnap-private.h"

static int opt_json, opt_wait;

static struct poptOption diff_options[] = {
	{ "json", 'J', POPT_ARG_NONE, &opt_json, 0,
	  "print one JSON object (the keys are documented in ovsnap-diff(8))", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

static const char *type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	case S_IFCHR: return "char";
	case S_IFBLK: return "block";
	}
	return "unknown";
}

static const char *const kind_names[] = {
	[OVS_DIFF_ADDED] = "added",
	[OVS_DIFF_REMOVED] = "removed",
	[OVS_DIFF_MODIFIED] = "modified",
	[OVS_DIFF_TYPE] = "type",
};
static const char kind_marks[] = {
	[OVS_DIFF_ADDED] = '+',
	[OVS_DIFF_REMOVED] = '-',
	[OVS_DIFF_MODIFIED] = 'M',
	[OVS_DIFF_TYPE] = 'T',
};

static const struct {
	unsigned field;
	const char *name;
} field_names[] = {
	{ OVS_DIFF_CONTENT, "content" },
	{ OVS_DIFF_MODE, "mode" },
	{ OVS_DIFF_OWNER, "owner" },
	{ OVS_DIFF_MTIME, "mtime" },
	{ OVS_DIFF_XATTRS, "xattrs" },
};

/* A path on one line: control bytes and '\' as \ooo octal (as zfs diff
 * does), so that every change is exactly one line. */
static void print_path(const char *p)
{
	if (!*p) {
		putchar('.');
		return;
	}
	for (; *p; p++) {
		unsigned char c = *p;

		if (c < 0x20 || c == 0x7f || c == '\\')
			printf("\\%03o", c);
		else
			putchar(c);
	}
}

struct out {
	bool first;
	const char *src;
	uint64_t from, to;
};

/* The opening of the JSON object, printed with the first change (or
 * after the last one, when there is none): every change is known before
 * the first one is printed, so a failure prints nothing on stdout. */
static void json_head(struct out *o)
{
	if (!o->first)
		return;
	fputs("{\"source\": ", stdout);
	ovs_json_string(o->src);
	printf(", \"from\": %" PRIu64 ", \"to\": ", o->from);
	if (o->to != OVS_DIFF_LIVE)
		printf("%" PRIu64, o->to);
	else
		fputs("\"live\"", stdout);
	fputs(", \"changes\": [", stdout);
}

static int print_change(const struct ovs_diff_change *c, void *arg)
{
	struct out *o = arg;

	if (!opt_json) {
		printf("%c\t", kind_marks[c->kind]);
		print_path(c->path);
		putchar('\n');
		return 0;
	}
	json_head(o);
	fputs(o->first ? "{\"path\": " : ", {\"path\": ", stdout);
	o->first = false;
	ovs_json_string(*c->path ? c->path : ".");
	printf(", \"change\": \"%s\"", kind_names[c->kind]);
	switch (c->kind) {
	case OVS_DIFF_ADDED:
		printf(", \"type\": \"%s\"", type_name(c->to_mode));
		break;
	case OVS_DIFF_REMOVED:
		printf(", \"type\": \"%s\"", type_name(c->from_mode));
		break;
	case OVS_DIFF_TYPE:
		printf(", \"from_type\": \"%s\", \"to_type\": \"%s\"", type_name(c->from_mode),
		       type_name(c->to_mode));
		break;
	case OVS_DIFF_MODIFIED: {
		bool first = true;

		printf(", \"type\": \"%s\", \"fields\": [", type_name(c->to_mode));
		for (size_t i = 0; i < sizeof(field_names) / sizeof(field_names[0]); i++) {
			if (!(c->fields & field_names[i].field))
				continue;
			printf("%s\"%s\"", first ? "" : ", ", field_names[i].name);
			first = false;
		}
		putchar(']');
		break;
	}
	}
	putchar('}');
	return 0;
}

static int run_diff(struct ovs_volume *v, const char *arg_a, const char *arg_b)
{
	const char *src = ovs_volume_source(v);
	const struct ovs_snapshot *a, *b = NULL;
	struct out o = { .first = true };
	uint64_t ida, idb;
	int srcfd, rc;

	rc = ovs_snapshot_resolve(v, arg_a, &a);
	if (rc < 0) {
		ovs_error_lib(rc, "diff %s %s", src, arg_a);
		return EXIT_FAIL;
	}
	ida = a->id;
	if (arg_b) {
		rc = ovs_snapshot_resolve(v, arg_b, &b);
		if (rc < 0) {
			ovs_error_lib(rc, "diff %s %s", src, arg_b);
			return EXIT_FAIL;
		}
	}
	idb = b ? b->id : OVS_DIFF_LIVE;
	if (b && b->id < a->id) {
		ovs_error("diff %s %s %s: snapshot %" PRIu64 " is newer than snapshot %" PRIu64
			  " (give the older one first)", src, arg_a, arg_b, a->id, b->id);
		return EXIT_FAIL;
	}
	srcfd = ovs_open_real_source(src);
	if (srcfd < 0) {
		ovs_error_lib(srcfd, "diff %s", src);
		return EXIT_FAIL;
	}
	o.src = src;
	o.from = ida;
	o.to = idb;
	rc = ovs_diff(v, ida, idb, srcfd, print_change, &o);
	close(srcfd);
	if (rc < 0) {
		ovs_error_lib(rc, "diff %s", src);
		return EXIT_FAIL;
	}
	if (opt_json) {
		json_head(&o);
		fputs("]}\n", stdout);
	}
	return EXIT_OK;
}

/* Three fds per layer are open at once (one's own and the two stacks'),
 * up to 499 layers: more than the usual soft limit of 1024. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int cmd_diff(int argc, const char **argv)
{
	struct ovs_volume *v = NULL;
	const char **args;
	poptContext pc;
	int status, nargs;

	pc = ovs_popt_parse("diff", argc, argv, diff_options, "SRC A [B]", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "diff", 2, 3, &nargs, &status);
	if (!args)
		goto out;
	raise_fd_limit();
	/* The lock keeps takes, merges and drops from changing the layers
	 * while they are read; a pending merge or drop is finished first. */
	status = ovs_open_locked("diff", args[0], opt_wait, &v);
	if (status != EXIT_OK)
		goto out;
	status = run_diff(v, args[1], nargs == 3 ? args[2] : NULL);
	ovs_volume_unlock(v);
	ovs_volume_unref(v);
out:
	poptFreeContext(pc);
	return status;
}
