/*
 * ovsnap activate / deactivate — switch a volume's snapshot mount on and
 * off.  Two verbs rather than a flag, so that no typo of another command
 * can ever switch protection off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "ovsnap-private.h"

static int opt_force, opt_all, opt_lazy, opt_wait;

/*
 * Start the daemon of v (the caller holds the volume lock) and record the
 * volume as active.  With a live daemon already there, nothing to do.
 */
int ovs_activate_locked(const char *cmd, struct ovs_volume *v, bool force)
{
	const char *src = ovs_volume_source(v);
	int rc;

	if (ovs_daemon_running(v)) {
		if (!ovs_volume_active(v)) {
			rc = ovs_registry_set_active(v, true);
			if (rc < 0) {
				ovs_error_lib(rc, "%s %s", cmd, src);
				return EXIT_FAIL;
			}
		}
		return EXIT_OK;
	}
	if (ovs_check_activation(cmd, v, force) != EXIT_OK)
		return EXIT_FAIL;
	/* A dead daemon's mount still covers SRC (ENOTCONN) and nothing can
	 * bypass it: the new daemon mounts over it with no unprotected gap.
	 * Without one, what processes hold open would bypass the new mount. */
	if (ovs_mount_dead(src))
		force = true;
	if (!force && ovs_check_no_users(cmd, src) != EXIT_OK)
		return EXIT_FAIL;
	rc = ovs_daemon_start(v);
	if (rc < 0) {
		ovs_error_lib(rc, "%s %s", cmd, src);
		return EXIT_FAIL;
	}
	if (!ovs_volume_active(v)) {
		rc = ovs_registry_set_active(v, true);
		if (rc < 0) {
			ovs_error_lib(rc, "%s %s", cmd, src);
			return EXIT_FAIL;
		}
	}
	return EXIT_OK;
}

static int activate_one(const char *src)
{
	struct ovs_volume *v;
	int status;

	status = ovs_open_locked("activate", src, opt_wait, &v);
	if (status != EXIT_OK)
		return status;
	status = ovs_activate_locked("activate", v, opt_force);
	ovs_volume_unlock(v);
	ovs_volume_unref(v);
	return status;
}

/*
 * At boot: every volume that was active when the machine went down.  A
 * volume whose store cannot be read (its filesystem not mounted yet, a
 * registry that fsck must see to) may have been one: whether it was is
 * in that store.  It is named and the exit status says so, rather than
 * skipped as if it had been deactivated, which would leave SRC
 * unprotected with the boot unit reporting success.  One that a forget
 * was removing is named but not a failure: the forget deactivated it.
 */
static int activate_all(void)
{
	struct ovs_volume **vols;
	int rc, status = EXIT_OK;
	size_t n;

	rc = ovs_volume_list(&vols, &n);
	if (rc < 0) {
		ovs_error_lib(rc, "activate --all");
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < n; i++) {
		const char *problem = ovs_volume_problem(vols[i]);
		int marked;

		/* A forget deactivates before it removes anything: one that
		 * was interrupted leaves nothing to activate. */
		marked = problem ? ovs_volume_forget_marked(vols[i]) : 0;
		if (marked > 0) {
			ovs_error("activate --all: %s: %s, left by an interrupted forget: not "
				  "activated (%srun 'ovsnap forget %s' to finish it)",
				  ovs_volume_source(vols[i]), problem,
				  marked == OVS_FORGET_BEGUN && ovs_volume_store_missing(vols[i]) ?
				  "mount the filesystem that holds its store, then " : "",
				  ovs_volume_source(vols[i]));
			continue;
		}
		if (problem) {
			ovs_error("activate --all: %s: %s: not activated (%s)",
				  ovs_volume_source(vols[i]), problem,
				  ovs_volume_store_missing(vols[i]) ?
				  "is the filesystem that holds its store mounted?" :
				  "see 'ovsnap fsck'");
			status = EXIT_FAIL;
			continue;
		}
		if (!ovs_volume_active(vols[i]))
			continue;
		if (activate_one(ovs_volume_source(vols[i])) != EXIT_OK)
			status = EXIT_FAIL;
	}
	ovs_volume_list_free(vols, n);
	return status;
}

static struct poptOption activate_options[] = {
	{ "all", 'a', POPT_ARG_NONE, &opt_all, 0,
	  "activate every volume that was active (at boot)", NULL },
	{ "force", 'f', POPT_ARG_NONE, &opt_force, 0,
	  "activate even while processes use SRC (what they hold open is unprotected)", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

int cmd_activate(int argc, const char **argv)
{
	const char **args;
	poptContext pc;
	int status, n;

	pc = ovs_popt_parse("activate", argc, argv, activate_options, "SRC", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "activate", opt_all ? 0 : 1, opt_all ? 0 : 1, &n, &status);
	if (!args && status) {
		poptFreeContext(pc);
		return status;
	}
	status = opt_all ? activate_all() : activate_one(args[0]);
	poptFreeContext(pc);
	return status;
}

static struct poptOption deactivate_options[] = {
	{ "lazy", 'l', POPT_ARG_NONE, &opt_lazy, 0,
	  "switch off even while files are open (their later changes are not preserved)", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

int ovs_deactivate_locked(struct ovs_volume *v)
{
	const char *src = ovs_volume_source(v);
	char *lingering = NULL;
	int64_t since = 0;
	int rc, i;

	/* The instant from which changes to SRC may be unprotected, taken
	 * before the daemon lets go of SRC: a change made the moment it has
	 * must not look older than the deactivation to fsck. */
	if (ovs_volume_active(v)) {
		rc = ovs_registry_deactivation_stamp(v, &since);
		if (rc < 0) {
			ovs_error_lib(rc, "deactivate %s", src);
			return EXIT_FAIL;
		}
	}
	if (ovs_daemon_running(v)) {
		rc = ovs_daemon_stop(v, opt_lazy);
		if (rc == -EBUSY) {
			char users[512];

			ovs_mount_users_text(src, users, sizeof(users));
			/* also forget's: so the way out names its command */
			ovs_error("deactivate %s: %s%s%s: close them, or switch off now with "
				  "'ovsnap deactivate --lazy %s' (their later changes are not "
				  "preserved)", src, ovs_last_error(), *users ? ", used by " : "",
				  users, src);
			return EXIT_FAIL;
		}
		if (rc < 0) {
			ovs_error_lib(rc, "deactivate %s", src);
			return EXIT_FAIL;
		}
		/* Stopped, but still holding the filesystem: record the
		 * deactivation all the same (SRC is unprotected now), then say
		 * why the filesystem is still busy. */
		if (rc > 0)
			lingering = strdup(ovs_last_error());
	}
	/* Mounts of daemons that died: alone, or beneath the one just
	 * stopped when activate mounted over them.  Take them away so SRC is
	 * the plain directory again. */
	for (i = 0; i < 64; i++) {
		rc = ovs_umount_dead(src);
		if (rc <= 0)
			break;
	}
	if (rc < 0) {
		ovs_error_lib(rc, "deactivate %s", src);
		free(lingering);
		return EXIT_FAIL;
	}
	/* Recorded even when it was not active, so fsck knows from when on
	 * changes to SRC are unprotected. */
	rc = ovs_registry_set_inactive_since(v, false, since);
	if (rc < 0) {
		ovs_error_lib(rc, "deactivate %s", src);
		free(lingering);
		return EXIT_FAIL;
	}
	if (lingering) {
		ovs_error("deactivate %s: deactivated, but %s", src, lingering);
		free(lingering);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/*
 * The store cannot be read (its filesystem was shut down, or fails with
 * I/O errors): the lock and the registry are out of reach, but the daemon
 * still holds the filesystem and must let go of it, or nobody can even
 * unmount it.  Stop it all the same (no other command can work on the
 * volume meanwhile: they all need the store), and say that the
 * deactivation is not recorded.
 */
static int stop_unrecorded(const char *src, int err)
{
	/* whole: it may name a path of any length */
	char *copy = strdup(*ovs_last_error() ? ovs_last_error() : strerror(-err));
	const char *why = copy ? copy : "out of memory";
	struct ovs_volume **vols, *v = NULL;
	size_t n = 0;
	int rc;

	if (ovs_volume_list(&vols, &n) < 0)
		n = 0;
	for (size_t i = 0; i < n && !v; i++)
		if (strcmp(ovs_volume_source(vols[i]), src) == 0)
			v = vols[i];
	if (!v || !ovs_daemon_running(v)) {
		ovs_error("deactivate %s: %s", src, why);
	} else {
		rc = ovs_daemon_stop(v, opt_lazy);
		if (rc < 0)
			ovs_error_lib(rc, "deactivate %s", src);
		else
			ovs_error("deactivate %s: the snapshot mount is stopped, but the deactivation "
				  "could not be recorded (%s): run 'ovsnap deactivate %s' again once "
				  "the store can be read", src, why, src);
	}
	if (n)
		ovs_volume_list_free(vols, n);
	free(copy);
	return EXIT_FAIL;
}

static int deactivate_one(const char *arg)
{
	struct ovs_volume *v = NULL;
	char *src;
	int rc, status;

	src = ovs_resolve_source("deactivate", arg);
	if (!src)
		return EXIT_FAIL;
	rc = ovs_volume_open(src, &v);
	if (rc == -ENOENT)
		ovs_error("deactivate %s: not a volume (no snapshot was ever taken of it)", src);
	if (rc < 0) {
		status = rc == -ENOENT ? EXIT_FAIL : stop_unrecorded(src, rc);
		free(src);
		return status;
	}
	free(src);
	status = ovs_lock_loaded("deactivate", v, opt_wait);
	if (status == EXIT_OK) {
		status = ovs_deactivate_locked(v);
		ovs_volume_unlock(v);
	}
	ovs_volume_unref(v);
	return status;
}

int cmd_deactivate(int argc, const char **argv)
{
	const char **args;
	poptContext pc;
	int status, n;

	pc = ovs_popt_parse("deactivate", argc, argv, deactivate_options, "SRC", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "deactivate", 1, 1, &n, &status);
	if (args)
		status = deactivate_one(args[0]);
	poptFreeContext(pc);
	return status;
}
