/*
 * ovsnap status — is each volume protected right now?  For monitoring:
 * the exit status alone answers it, the text and JSON say why and what to
 * do.  ovsnap list shows the same verdict in its PROTECTION column.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "control.h"
#include "ovsnap-private.h"

static int opt_json;

static struct poptOption status_options[] = {
	{ "json", 'J', POPT_ARG_NONE, &opt_json, 0,
	  "print one JSON object (the keys are documented in ovsnap-status(8))", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

const char *ovs_health_name(enum ovs_health_state s)
{
	switch (s) {
	case OVS_HEALTH_PROTECTED:
		return "protected";
	case OVS_HEALTH_DEACTIVATED:
		return "deactivated";
	case OVS_HEALTH_BROKEN:
		return "broken";
	case OVS_HEALTH_UNKNOWN:
		break;
	}
	return "unknown";
}

/*
 * The last deactivation came after the newest snapshot and the volume was
 * switched on again since: what changed in between is in no snapshot (the
 * same reading of the registry as fsck's, lib/fsck.c check_src).
 */
static bool unprotected_window(struct ovs_volume *v)
{
	size_t n = ovs_snapshot_count(v);
	int64_t deact = ovs_volume_deactivated_ns(v), act = v->reg.activated_ns;

	return n > 0 && deact != 0 && act >= deact &&
	       ovs_snapshot_at(v, n - 1)->created_ns < act;
}

void ovs_volume_health(struct ovs_volume *v, struct ovs_health *h)
{
	const char *src = ovs_volume_source(v);
	char reply[OVS_CTL_MSG_MAX], fstype[64] = "";
	size_t n;
	int rc;

	memset(h, 0, sizeof(*h));
	if (ovs_volume_problem(v)) {
		/* a user who may not read the store cannot tell */
		h->state = strncmp(ovs_volume_problem(v), "permission denied", 17) == 0 ?
			   OVS_HEALTH_UNKNOWN : OVS_HEALTH_BROKEN;
		snprintf(h->problem, sizeof(h->problem), "%s", ovs_volume_problem(v));
		snprintf(h->action, sizeof(h->action), "run 'ovsnap fsck -n %s' as root", src);
		return;
	}
	n = ovs_snapshot_count(v);
	if (n) {
		h->last_take = ovs_snapshot_at(v, n - 1);
	}
	rc = ovs_daemon_status(v, reply, sizeof(reply));
	if (rc == 0) {
		struct ovs_daemon_state st;

		h->daemon = true;
		if (ovs_daemon_state_parse(reply, &st) == 0) {
			h->pid = (long)st.pid;
			h->layer = st.layer;
			h->has_open = st.has_open;
			h->open = st.open;
		}
	}
	if (!ovs_volume_active(v)) {
		h->state = OVS_HEALTH_DEACTIVATED;
		if (h->daemon)
			snprintf(h->problem, sizeof(h->problem), "deactivated; a detached "
				 "snapshot mount still serves files opened before (--lazy)");
		else
			snprintf(h->problem, sizeof(h->problem), "deactivated: changes to SRC "
				 "are not preserved");
		snprintf(h->action, sizeof(h->action), "run 'ovsnap activate %s'", src);
		return;
	}
	if (rc == -EACCES || rc == -EPERM) {
		h->state = OVS_HEALTH_UNKNOWN;
		snprintf(h->problem, sizeof(h->problem), "cannot ask the daemon: %s",
			 strerror(-rc));
		snprintf(h->action, sizeof(h->action), "run 'ovsnap status %s' as root", src);
		return;
	}
	h->state = OVS_HEALTH_BROKEN;
	if (!h->daemon) {
		if (ovs_mount_dead(src))
			snprintf(h->problem, sizeof(h->problem), "daemon dead: SRC answers "
				 "\"Transport endpoint is not connected\"");
		else
			snprintf(h->problem, sizeof(h->problem), "daemon dead and its mount "
				 "missing: changes to SRC are not preserved");
		snprintf(h->action, sizeof(h->action), "run 'ovsnap activate %s', then "
			 "'ovsnap take %s'; changes made meanwhile are not in the snapshots "
			 "(see ovsnap-fsck(8))", src, src);
		return;
	}
	if (ovs_is_mountpoint(src, fstype, sizeof(fstype)) <= 0 ||
	    strcmp(fstype, "fuse.ovsnap") != 0) {
		snprintf(h->problem, sizeof(h->problem), "mount missing: the daemon (pid %ld) "
			 "runs but SRC is not covered by its mount; changes to SRC are not "
			 "preserved", h->pid);
		snprintf(h->action, sizeof(h->action), "run 'ovsnap deactivate %s', "
			 "'ovsnap activate %s', then 'ovsnap take %s'", src, src, src);
		return;
	}
	if (unprotected_window(v)) {
		char from[64], to[64];

		ovs_format_time_local(ovs_volume_deactivated_ns(v), from, sizeof(from));
		ovs_format_time_local(v->reg.activated_ns, to, sizeof(to));
		snprintf(h->problem, sizeof(h->problem), "unprotected window: deactivated "
			 "from %s to %s, after the newest snapshot; the snapshots may show "
			 "changes made then", from, to);
		snprintf(h->action, sizeof(h->action), "run 'ovsnap take %s' to end the window; "
			 "'ovsnap deactivate %s; ovsnap fsck -n %s' lists what changed in it",
			 src, src, src);
		return;
	}
	h->state = OVS_HEALTH_PROTECTED;
}

/* ---- output ------------------------------------------------------------------ */

static void print_text(struct ovs_volume *v, const struct ovs_health *h)
{
	char when[64];

	printf("%s: %s\n", ovs_volume_source(v), ovs_health_name(h->state));
	if (h->problem[0])
		printf("  problem:      %s\n", h->problem);
	if (h->daemon) {
		printf("  daemon:       pid %ld\n", h->pid);
		printf("  layer:        %" PRIu64 "\n", h->layer);
		if (h->has_open)
			printf("  open handles: %" PRIu64 "\n", h->open);
	} else {
		printf("  daemon:       none\n");
	}
	if (h->last_take) {
		ovs_format_time_local(h->last_take->created_ns, when, sizeof(when));
		printf("  last take:    %s (snapshot %" PRIu64 "%s%s)\n", when, h->last_take->id,
		       h->last_take->name[0] ? " " : "", h->last_take->name);
	} else {
		printf("  last take:    none\n");
	}
	if (h->action[0])
		printf("  to do:        %s\n", h->action);
}

static void print_json(struct ovs_volume *v, const struct ovs_health *h, bool first)
{
	char when[64];

	fputs(first ? "{\"source\": " : ", {\"source\": ", stdout);
	ovs_json_string(ovs_volume_source(v));
	fputs(", \"state\": ", stdout);
	ovs_json_string(ovs_health_name(h->state));
	fputs(", \"problem\": ", stdout);
	if (h->problem[0])
		ovs_json_string(h->problem);
	else
		fputs("null", stdout);
	if (h->daemon) {
		printf(", \"pid\": %ld, \"layer\": %" PRIu64, h->pid, h->layer);
		if (h->has_open)
			printf(", \"open_handles\": %" PRIu64, h->open);
		else
			fputs(", \"open_handles\": null", stdout);
	} else {
		fputs(", \"pid\": null, \"layer\": null, \"open_handles\": null", stdout);
	}
	if (h->last_take) {
		ovs_format_time_utc(h->last_take->created_ns, when, sizeof(when));
		printf(", \"last_take\": {\"id\": %" PRIu64 ", \"created\": \"%s\"}",
		       h->last_take->id, when);
	} else {
		fputs(", \"last_take\": null", stdout);
	}
	fputs(", \"action\": ", stdout);
	if (h->action[0])
		ovs_json_string(h->action);
	else
		fputs("null", stdout);
	putchar('}');
}

/* Worst first: broken, then unknown, then deactivated. */
static int state_exit(enum ovs_health_state s)
{
	switch (s) {
	case OVS_HEALTH_PROTECTED:
		return EXIT_OK;
	case OVS_HEALTH_DEACTIVATED:
		return EXIT_DEACTIVATED;
	case OVS_HEALTH_BROKEN:
		return EXIT_BROKEN;
	case OVS_HEALTH_UNKNOWN:
		break;
	}
	return EXIT_FAIL;
}

static int worse(int a, int b)
{
	static const int rank[] = { [EXIT_OK] = 0, [EXIT_DEACTIVATED] = 1, [EXIT_FAIL] = 2,
				    [EXIT_BROKEN] = 3 };

	return rank[b] > rank[a] ? b : a;
}

static int show(struct ovs_volume **vols, size_t n)
{
	int status = EXIT_OK;

	if (opt_json)
		fputs("{\"volumes\": [", stdout);
	for (size_t i = 0; i < n; i++) {
		struct ovs_health h;

		ovs_volume_health(vols[i], &h);
		if (opt_json)
			print_json(vols[i], &h, i == 0);
		else
			print_text(vols[i], &h);
		status = worse(status, state_exit(h.state));
	}
	if (opt_json)
		fputs("]}\n", stdout);
	return status;
}

int cmd_status(int argc, const char **argv)
{
	struct ovs_volume **vols = NULL;
	const char **args;
	poptContext pc;
	int status, nargs, rc;
	size_t n = 0;

	pc = ovs_popt_parse("status", argc, argv, status_options, "[SRC...]", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "status", 0, -1, &nargs, &status);
	if (!args && status != EXIT_OK)
		goto out;
	if (nargs == 0) {
		rc = ovs_volume_list(&vols, &n);
		if (rc < 0) {
			ovs_error_lib(rc, "status");
			status = EXIT_FAIL;
			goto out;
		}
	} else {
		vols = calloc(nargs, sizeof(*vols));
		if (!vols) {
			ovs_error("status: %s", strerror(ENOMEM));
			status = EXIT_FAIL;
			goto out;
		}
		/* Every name is checked before anything is printed: a typo is
		 * an error, never a silently shorter report. */
		for (int i = 0; i < nargs; i++) {
			char *src = ovs_resolve_source("status", args[i]);

			if (!src) {
				status = EXIT_FAIL;
				goto out;
			}
			/* a volume whose store cannot be used is shown with
			 * its problem, as without SRC: broken, or unknown to a
			 * user who may not read it */
			rc = ovs_volume_open_listed(src, &vols[n]);
			if (rc < 0) {
				if (rc == -ENOENT)
					ovs_error("status %s: not a volume (no snapshot was ever "
						  "taken of it)", src);
				else
					ovs_error_lib(rc, "status %s", src);
				free(src);
				status = EXIT_FAIL;
				goto out;
			}
			free(src);
			n++;
		}
	}
	status = show(vols, n);
out:
	if (vols)
		ovs_volume_list_free(vols, n);
	poptFreeContext(pc);
	return status;
}
