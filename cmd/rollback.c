/*
 * ovsnap rollback — the whole live tree becomes a snapshot again.  A
 * snapshot of the live state is taken first (so the rollback can itself be
 * rolled back), then only the paths that differ are changed, through the
 * snapshot mount (cmd/restore-apply.c).
 *
 * Crash safety: the xattr trusted.ovsnap.rollback on the volume's store
 * folder says "SNAP PRE" from just after the pre-rollback snapshot is
 * taken until the last change is made.  Running the same rollback again
 * finds it and finishes (the changes compare states, so whatever was done
 * already is not done twice) without taking another snapshot; a rollback
 * to another snapshot is refused meanwhile.  No snapshot is ever changed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cmd.h"
#include "ovsnap-private.h"
#include "restore.h"

#define ROLLBACK_MARK "trusted.ovsnap.rollback"

static int opt_force, opt_wait;

static struct poptOption rollback_options[] = {
	{ "force", 'f', POPT_ARG_NONE, &opt_force, 0,
	  "roll back even while files under SRC are open for writing", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

/* The pending rollback: 1 with *snap and *pre, 0 for none, -errno. */
static int mark_read(struct ovs_volume *v, uint64_t *snap, uint64_t *pre)
{
	char buf[64];
	ssize_t n = getxattr(ovs_volume_store(v), ROLLBACK_MARK, buf, sizeof(buf) - 1);

	if (n < 0)
		return errno == ENODATA ? 0 : ovs_err(errno, "read the rollback mark of %s",
						     ovs_volume_store(v));
	buf[n] = '\0';
	if (sscanf(buf, "%" SCNu64 " %" SCNu64, snap, pre) != 2)
		return ovs_err(EUCLEAN, "bad rollback mark '%s' on %s", buf, ovs_volume_store(v));
	return 1;
}

/* Durable before the first change. */
static int mark_sync(struct ovs_volume *v)
{
	int fd = open(ovs_volume_store(v), O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0 || fsync(fd) < 0)
		rc = ovs_err(errno, "sync %s", ovs_volume_store(v));
	if (fd >= 0)
		close(fd);
	return rc;
}

static int mark_write(struct ovs_volume *v, uint64_t snap, uint64_t pre)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%" PRIu64 " %" PRIu64, snap, pre);
	if (setxattr(ovs_volume_store(v), ROLLBACK_MARK, buf, strlen(buf), 0) < 0)
		return ovs_err(errno, "write the rollback mark on %s", ovs_volume_store(v));
	return mark_sync(v);
}

static int mark_clear(struct ovs_volume *v)
{
	if (removexattr(ovs_volume_store(v), ROLLBACK_MARK) < 0 && errno != ENODATA)
		return ovs_err(errno, "remove the rollback mark of %s", ovs_volume_store(v));
	return mark_sync(v);
}

/* The snapshot of the state before the rollback. */
static int take_pre(struct ovs_volume *v, uint64_t snap, uint64_t *pre)
{
	struct ovs_snap_change change = OVS_SNAP_CHANGE_INIT;
	char desc[64];
	int rc;

	if (ovs_check_kernel_views("rollback", v) != EXIT_OK ||
	    ovs_check_detached("rollback", v, true, opt_force) != EXIT_OK)
		return -EBUSY;
	rc = ovs_daemon_take(v, NULL, pre);
	if (rc < 0)
		return rc;
	rc = ovs_registry_load(v);
	snprintf(desc, sizeof(desc), "before rollback to %" PRIu64, snap);
	change.description = desc;
	if (rc == 0)
		rc = ovs_registry_change(v, pre, 1, &change);
	return rc;
}

static int run_rollback(struct ovs_volume *v, const char *ref)
{
	const char *src = ovs_volume_source(v);
	const struct ovs_snapshot *s;
	struct restore_stats st = { 0 };
	const char *const all[] = { "" };
	uint64_t snap, msnap, pre;
	int rc, status;

	rc = ovs_snapshot_resolve(v, ref, &s);
	if (rc < 0) {
		ovs_error_lib(rc, "rollback %s %s", src, ref);
		return EXIT_FAIL;
	}
	status = restore_check_active("rollback", v);
	if (status != EXIT_OK)
		return status;
	/* what the restore needs, before the snapshot and the mark */
	rc = ovs_open_real_source(src);
	if (rc < 0) {
		ovs_error_lib(rc, "rollback %s", src);
		return EXIT_FAIL;
	}
	close(rc);
	snap = s->id;
	rc = mark_read(v, &msnap, &pre);
	if (rc < 0) {
		ovs_error_lib(rc, "rollback %s", src);
		return EXIT_FAIL;
	}
	if (rc > 0 && msnap != snap) {
		ovs_error("rollback %s %s: an interrupted rollback to snapshot %" PRIu64
			  " is pending; run 'ovsnap rollback %s %" PRIu64 "' to finish it first",
			  src, ref, msnap, src, msnap);
		return EXIT_FAIL;
	}
	if (rc > 0) {
		if (!ovs_opt_quiet)
			fprintf(stderr, "finishing the interrupted rollback to snapshot %" PRIu64
				"; snapshot %" PRIu64 " holds the state before it\n", snap, pre);
	} else {
		if (!opt_force) {
			int writers = restore_writers(v);

			if (writers < 0) {
				ovs_error_lib(writers, "rollback %s", src);
				return EXIT_FAIL;
			}
			if (writers > 0) {
				ovs_error("rollback %s: %d file%s under it %s open for writing "
					  "(close them, or use --force)", src, writers,
					  writers == 1 ? "" : "s", writers == 1 ? "is" : "are");
				return EXIT_FAIL;
			}
		}
		rc = take_pre(v, snap, &pre);
		if (rc == -EBUSY)
			return EXIT_FAIL;	/* said why */
		if (rc == 0)
			rc = mark_write(v, snap, pre);
		if (rc < 0) {
			ovs_error_lib(rc, "rollback %s", src);
			return EXIT_FAIL;
		}
		printf("%" PRIu64 "\n", pre);
		fflush(stdout);
		if (!ovs_opt_quiet)
			fprintf(stderr, "snapshot %" PRIu64 " holds the state before the rollback\n",
				pre);
	}
	restore_step();
	status = restore_paths("rollback", v, snap, all, 1, &st);
	if (status != EXIT_OK)
		return status;
	rc = mark_clear(v);
	if (rc < 0) {
		ovs_error_lib(rc, "rollback %s: rolled back, but", src);
		return EXIT_FAIL;
	}
	ovs_log(v, "snapshot=%" PRIu64 " rollback changed=%" PRIu64 " cloned=%" PRIu64
		" copied=%" PRIu64, snap, st.changed, st.cloned, st.copied);
	if (!ovs_opt_quiet)
		fprintf(stderr, "rolled back to snapshot %" PRIu64 ": %" PRIu64 " paths changed "
			"(%" PRIu64 " files cloned, %" PRIu64 " copied)\n",
			snap, st.changed, st.cloned, st.copied);
	return EXIT_OK;
}

int cmd_rollback(int argc, const char **argv)
{
	struct ovs_volume *v = NULL;
	const char **args;
	poptContext pc;
	int status, nargs;

	pc = ovs_popt_parse("rollback", argc, argv, rollback_options, "SRC SNAP", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "rollback", 2, 2, &nargs, &status);
	if (!args)
		goto out;
	status = ovs_open_locked("rollback", args[0], opt_wait, &v);
	if (status != EXIT_OK)
		goto out;
	status = run_rollback(v, args[1]);
	ovs_volume_unlock(v);
	ovs_volume_unref(v);
out:
	poptFreeContext(pc);
	return status;
}
