/*
 * ovsnap-viewd — serve one read-only snapshot view over FUSE.
 *
 *	ovsnap-viewd [--ready-fd N] [-o OPTS] SRC ID TARGET
 *
 * Started by `ovsnap mount` (fork, setsid, exec), one process per view.
 * It writes "ok\n" (or "err MESSAGE\n") to the ready fd once TARGET is
 * mounted, then serves requests until the view is unmounted.  Why the view
 * stays coherent with no lock shared with the live daemon: see view.h.
 */
#define FUSE_USE_VERSION OVS_FUSE_USE_VERSION
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <popt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "view.h"
#include "fuse-uring.h"
#include "sched-slice.h"

extern const struct fuse_lowlevel_ops view_ops;

/* The kernel caches what a view shows for this long: a snapshot never
 * changes, so only a dropped snapshot could make this stale. */
#define VIEW_CACHE_TIMEOUT 3600.0

static int ready_fd = -1;

static void say_ready(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (strncmp(buf, "err ", 4) == 0)
		fprintf(stderr, "ovsnap-viewd: %s\n", buf + 4);
	if (ready_fd >= 0) {
		dprintf(ready_fd, "%s\n", buf);
		close(ready_fd);
		ready_fd = -1;
	}
}

/* Append "key=value" to a FUSE option string, escaping ',' and '\'. */
static int add_opt(char **opts, const char *key, const char *value)
{
	size_t len = *opts ? strlen(*opts) : 0;
	size_t need = len + strlen(key) + 2 * (value ? strlen(value) : 0) + 3;
	char *o = realloc(*opts, need), *p;

	if (!o)
		return -ENOMEM;
	p = o + len;
	if (len)
		*p++ = ',';
	p = stpcpy(p, key);
	if (value) {
		*p++ = '=';
		for (; *value; value++) {
			if (*value == ',' || *value == '\\')
				*p++ = '\\';
			*p++ = *value;
		}
	}
	*p = 0;
	*opts = o;
	return 0;
}

int main(int argc, const char **argv)
{
	char *opt_o = NULL, *fuseopts = NULL, fsname[PATH_MAX + 64];
	int opt_ready = -1, opt_nopt = 0, opt_nouring = 0, rc, status = 1;
	struct poptOption options[] = {
		{ "ready-fd", 0, POPT_ARG_INT, &opt_ready, 0, "say ok/err on this fd", "FD" },
		{ "no-passthrough", 0, POPT_ARG_NONE, &opt_nopt, 0,
		  "serve every read here, also of files in frozen layers", NULL },
		{ "no-io-uring", 0, POPT_ARG_NONE, &opt_nouring, 0,
		  "serve requests from /dev/fuse even where the kernel offers io_uring", NULL },
		{ NULL, 'o', POPT_ARG_STRING, &opt_o, 0, "mount options", "OPTS" },
		POPT_AUTOHELP
		POPT_TABLEEND
	};
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	const char **rest;
	struct view vw;
	uint64_t id;
	poptContext pc;

	pc = poptGetContext("ovsnap-viewd", argc, argv, options, 0);
	poptSetOtherOptionHelp(pc, "SRC ID TARGET");
	while ((rc = poptGetNextOpt(pc)) > 0)
		;
	ready_fd = opt_ready;
	if (rc < -1) {
		say_ready("err %s: %s", poptBadOption(pc, 0), poptStrerror(rc));
		return 2;
	}
	view_passthrough_wanted = !opt_nopt;
	view_uring_wanted = !opt_nouring;
	rest = poptGetArgs(pc);
	if (!rest || !rest[0] || !rest[1] || !rest[2] || rest[3] ||
	    ovs_parse_u64(rest[1], &id) < 0) {
		say_ready("err usage: ovsnap-viewd [--ready-fd N] [-o OPTS] SRC ID TARGET");
		return 2;
	}
	rc = view_open(&vw, rest[0], id);
	if (rc < 0) {
		say_ready("err %s", ovs_last_error()[0] ? ovs_last_error() : strerror(-rc));
		return 1;
	}
	vw.timeout = VIEW_CACHE_TIMEOUT;
	view_passthrough_setup(&vw);

	/*
	 * The marker `ovsnap umount` and `ovsnap list` recognise a view by:
	 * fstype fuse.ovsnap-view, source ovsnap-view:SRC:ID.  allow_other so
	 * users can browse, default_permissions so the snapshot's own
	 * permissions decide who may.  libfuse mounts nosuid,nodev unless the
	 * options say suid or dev.
	 */
	snprintf(fsname, sizeof(fsname), "ovsnap-view:%s:%" PRIu64, rest[0], id);
	if (add_opt(&fuseopts, "ro", NULL) || add_opt(&fuseopts, "default_permissions", NULL) ||
	    add_opt(&fuseopts, "allow_other", NULL) || add_opt(&fuseopts, "fsname", fsname) ||
	    add_opt(&fuseopts, "subtype", "ovsnap-view") ||
	    (opt_o && *opt_o && add_opt(&fuseopts, opt_o, NULL)) ||
	    (view_uring_wanted && fuse_uring_session_opt() &&
	     add_opt(&fuseopts, fuse_uring_session_opt(), NULL))) {
		say_ready("err out of memory");
		return 1;
	}
	if (fuse_opt_add_arg(&args, "ovsnap-viewd") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, fuseopts)) {
		say_ready("err out of memory");
		return 1;
	}
	se = fuse_session_new(&args, &view_ops, sizeof(view_ops), &vw);
	if (!se) {
		say_ready("err cannot set up the FUSE session (options: %s)", fuseopts);
		goto out;
	}
	if (fuse_set_signal_handlers(se) != 0) {
		say_ready("err cannot set signal handlers");
		goto out_session;
	}
	if (fuse_session_mount(se, rest[2]) != 0) {
		say_ready("err cannot mount the view at %s (see the log)", rest[2]);
		goto out_signals;
	}
	if (chdir("/") < 0) {
		/* nothing of ours may keep a directory busy */
	}
	say_ready("ok");

	/* The workers libfuse starts from this thread inherit it. */
	sched_short_slice();
	cfg = fuse_loop_cfg_create();
	if (cfg) {
		fuse_loop_cfg_set_clone_fd(cfg, 0);
		fuse_loop_cfg_set_max_threads(cfg, 16);
	}
	status = fuse_session_loop_mt(se, cfg) == 0 ? 0 : 1;
	if (cfg)
		fuse_loop_cfg_destroy(cfg);
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out:
	fuse_opt_free_args(&args);
	free(fuseopts);
	view_close(&vw);
	poptFreeContext(pc);
	return status;
}
