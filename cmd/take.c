/*
 * ovsnap take — take a snapshot of a directory.  The first take sets the
 * volume up: store, registry and the snapshot mount over SRC.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "conf.h"
#include "ovsnap-private.h"
#include "retention.h"

static char *opt_name, *opt_store, *opt_keep, *opt_description, *opt_class, *opt_post;
static const char **opt_userdata;
static int opt_json, opt_force, opt_wait, opt_hold, opt_no_wait, opt_pre;
static int opt_timer;
/* The volume's ovsnap.conf(5): hooks, and the timer's rules. */
static struct ovs_conf conf;
/* What the take records about the new snapshot besides its name. */
static struct ovs_snap_change change = OVS_SNAP_CHANGE_INIT;

static struct poptOption take_options[] = {
	{ "name", 'N', POPT_ARG_STRING, &opt_name, 0,
	  "name the snapshot (letters, digits, '.', '_', '-')", "NAME" },
	/* -n and -H meant --name and --hold until -n became dry-run and -H
	 * no-headings elsewhere (issue 14 item 9): accepted for one release */
	{ NULL, 'n', POPT_ARG_STRING | POPT_ARGFLAG_DOC_HIDDEN, &opt_name, OVS_OPT_DEPRECATED,
	  "-N (--name)", NULL },
	{ NULL, 'H', POPT_ARG_NONE | POPT_ARGFLAG_DOC_HIDDEN, &opt_hold, OVS_OPT_DEPRECATED + 1,
	  "--hold", NULL },
	{ "hold", 0, POPT_ARG_NONE, &opt_hold, 0,
	  "hold the snapshot: nothing removes it without --force (ovsnap release)", NULL },
	{ "description", 'd', POPT_ARG_STRING, &opt_description, 0,
	  "describe the snapshot (one line of text)", "TEXT" },
	{ "userdata", 'u', POPT_ARG_ARGV, &opt_userdata, 0,
	  "record KEY=VALUE with the snapshot (repeatable)", "KEY=VALUE" },
	{ "class", 'c', POPT_ARG_STRING, &opt_class, 0,
	  "the snapshot's cleanup class, manual or timeline (default: timeline with "
	  "--keep, else manual); --keep judges this class", "CLASS" },
	{ "pre", 0, POPT_ARG_NONE, &opt_pre, 0,
	  "the snapshot before a change (class pre); its id goes to --post", NULL },
	{ "post", 0, POPT_ARG_STRING, &opt_post, 0,
	  "the snapshot after the change that the pre snapshot PRE was taken before "
	  "(class post, linked to PRE)", "PRE" },
	{ "keep", 'k', POPT_ARG_STRING, &opt_keep, 0,
	  "after the take, drop what the retention policy SPEC does not keep "
	  "(as ovsnap drop --keep)", "SPEC" },
	{ "timer", 0, POPT_ARG_NONE, &opt_timer, 0,
	  "the rotation timer's take: CLASS, KEEP and SPACE_LIMIT from the volume's "
	  "ovsnap.conf(5)", NULL },
	{ "json", 'J', POPT_ARG_NONE, &opt_json, 0,
	  "print the new snapshot as a JSON object", NULL },
	{ "store", 's', POPT_ARG_STRING, &opt_store, 0,
	  "first take only: keep the store in DIR (default: .ovsnap at the root of SRC's filesystem)", "DIR" },
	{ "force", 'f', POPT_ARG_NONE, &opt_force, 0,
	  "first take only: set up even while processes use SRC", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	{ "no-wait", 0, POPT_ARG_NONE, &opt_no_wait, 0,
	  "fail at once while another take sets the same SRC up (default: wait for it)", NULL },
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

/*
 * First takes run one at a time, whatever their SRC: two of one SRC must
 * not both set it up (the second waits for the first, then takes a normal
 * snapshot, or with --no-wait says a volume is being set up), and two of
 * nested SRCs must not both pass the nesting check of rule 17 before
 * either is registered.  One lock file in the run directory, held until
 * the take that sets its volume up holds the volume's own lock: not
 * through the hooks, which may take a while or take snapshots of other
 * new volumes themselves.  Returns the fd, or -1 after printing the
 * error.
 */
static int setup_lock(const char *src)
{
	char path[PATH_MAX], note[64];
	ssize_t n;
	int fd, rc;

	rc = ovs_mkdir_run_dir();
	if (rc < 0) {
		ovs_error_lib(rc, "take %s", src);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/setup.lock", ovs_run_dir());
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		ovs_error("take %s: cannot open %s: %s", src, path, strerror(errno));
		return -1;
	}
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EWOULDBLOCK && !opt_no_wait) {
			n = pread(fd, note, sizeof(note) - 1, 0);
			note[n > 0 ? n : 0] = '\0';
			note[strcspn(note, "\n")] = '\0';
			if (!ovs_opt_quiet)
				fprintf(stderr, "%s: take %s: waiting for another take%s%s%s that "
					"sets a volume up\n", ovs_progname, src,
					*note ? " (pid " : "", note, *note ? ")" : "");
			while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
				;
			break;
		}
		if (errno == EWOULDBLOCK) {
			n = pread(fd, note, sizeof(note) - 1, 0);
			note[n > 0 ? n : 0] = '\0';
			note[strcspn(note, "\n")] = '\0';
			ovs_error("take %s: a volume is being set up by another take%s%s%s; "
				  "try again when it is done (or leave out --no-wait)", src,
				  *note ? " (pid " : "", note, *note ? ")" : "");
		} else {
			ovs_error("take %s: cannot lock %s: %s", src, path, strerror(errno));
		}
		close(fd);
		return -1;
	}
	/* Written before it is cut to length, so a waiter reads a pid (ours,
	 * or at worst the last holder's), never an empty note, unless no
	 * take ever wrote one yet: then its message names no pid. */
	snprintf(note, sizeof(note), "%d\n", (int)getpid());
	if (pwrite(fd, note, strlen(note), 0) < 0 || ftruncate(fd, (off_t)strlen(note)) < 0) {
		/* the note only names us in the message of a waiting take */
	}
	return fd;
}

/* Open the volume of src, setting it up if it is none yet (*created).
 * *waited: another take set it up while we waited for the setup lock. */
static int open_or_create(const char *src, struct ovs_volume **v, int *lockfd, bool *created,
			  bool *waited)
{
	struct ovs_volume_opts opts = { .store = opt_store };
	int rc;

	rc = ovs_volume_open(src, v);
	if (rc == -ENOENT) {
		*lockfd = setup_lock(src);
		if (*lockfd < 0)
			return EXIT_FAIL;
		/* the take we waited for may have set it up */
		rc = ovs_volume_open(src, v);
		*waited = rc == 0;
	}
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
	/* Setting a volume up stays root's (ovsnap-delegate(8)); the set-up
	 * below resolves src again, which a user could redirect. */
	if (ovs_delegated_uid() >= 0) {
		ovs_error("take %s: permission denied (not a volume)", src);
		return EXIT_FAIL;
	}
	if (check_name(NULL, src) != EXIT_OK)
		return EXIT_USAGE;
	if (opt_post) {
		ovs_error("take %s: --post: not a volume (no pre snapshot was taken of it)", src);
		return EXIT_FAIL;
	}
	/* Nesting first: another volume's daemon shows as a user of a
	 * store inside src, and the nesting is the real reason. */
	rc = ovs_check_nesting(src, NULL, NULL);
	if (rc < 0) {
		ovs_error_lib(rc, "take %s", src);
		return EXIT_FAIL;
	}
	/* The root of a filesystem needs a store elsewhere: say that, not
	 * who uses it (every process of / does). */
	if (!opt_store && ovs_is_mountpoint(src, NULL, 0) > 0) {
		ovs_error("take %s: SRC is the root of its filesystem: the store cannot live "
			  "inside it; use --store DIR on another filesystem", src);
		return EXIT_FAIL;
	}
	if (!opt_force && ovs_check_no_users("take", src) != EXIT_OK)
		return EXIT_FAIL;
	rc = ovs_volume_create(src, &opts, v);
	if (rc < 0) {
		ovs_error_lib(rc, "take %s", src);
		return EXIT_FAIL;
	}
	*created = true;
	return EXIT_OK;
}

/* SIGTERM of a hook's first process: the take died; so does the hook. */
static void kill_own_group(int sig)
{
	(void)sig;
	kill(0, SIGKILL);
}

/*
 * Run a PRE_HOOK or POST_HOOK of the volume's config with sh -c, its
 * stdout on our stderr (stdout is the new id), in a process group of its
 * own that dies with us and is killed after HOOK_TIMEOUT seconds (a
 * timeout fails the hook).  id: the new snapshot, 0 for none (the
 * pre-hook; a post-hook after a take that failed).  EXIT_OK, or
 * EXIT_FAIL after one line.
 */
static int run_hook(const char *src, const char *key, const char *cmd, uint64_t id)
{
	unsigned timeout = ovs_conf_hook_timeout(&conf);
	char ids[32] = "";
	bool timed_out = false;
	pid_t parent = getpid(), pid;
	int status, pidfd;

	if (!cmd)
		return EXIT_OK;
	if (id)
		snprintf(ids, sizeof(ids), "%" PRIu64, id);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		ovs_error("take %s: %s: fork: %s", src, key, strerror(errno));
		return EXIT_FAIL;
	}
	if (pid == 0) {
		/* A process group of its own, killed as one on timeout; this
		 * first process of it stays to kill the whole group when the
		 * take dies (a PDEATHSIG reaches only one process). */
		struct sigaction sa = { .sa_handler = kill_own_group };
		pid_t hook;

		if (setpgid(0, 0) < 0 || sigaction(SIGTERM, &sa, NULL) < 0 ||
		    prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
			_exit(127);
		if (setenv("OVSNAP_SOURCE", src, 1) < 0 || setenv("OVSNAP_HOOK", key, 1) < 0 ||
		    setenv("OVSNAP_SNAPSHOT", ids, 1) < 0 ||
		    setenv("OVSNAP_CLASS", ovs_snap_class_name(change.cls), 1) < 0 ||
		    dup2(2, 1) < 0)
			_exit(127);
		/* a hook is root's: nothing of a delegated caller's (its stdin,
		 * its cwd, its ids in the environment) reaches it */
		unsetenv("OVSNAP_DELEGATED_UID");
		unsetenv("OVSNAP_DELEGATED_TARGET_FD");
		unsetenv("OVSNAP_DELEGATED_GROUPS");
		unsetenv("OVSNAP_DELEGATED_SRC_ID");
		if (chdir("/") < 0)
			_exit(127);
		{
			int null = open("/dev/null", O_RDONLY);

			if (null < 0 || dup2(null, 0) < 0)
				_exit(127);
			if (null > 0)
				close(null);
		}
		hook = fork();
		if (hook < 0)
			_exit(127);
		if (hook == 0) {
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
			_exit(127);
		}
		while (waitpid(hook, &status, 0) < 0)
			if (errno != EINTR)
				_exit(127);
		if (WIFEXITED(status))
			_exit(WEXITSTATUS(status));
		/* the hook's signal is ours, for the take's message */
		prctl(PR_SET_PDEATHSIG, 0);
		signal(WTERMSIG(status), SIG_DFL);
		raise(WTERMSIG(status));
		_exit(128 + WTERMSIG(status));
	}
	setpgid(pid, pid);	/* before we may kill(-pid) */
	pidfd = timeout ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	if (pidfd >= 0) {
		struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
		int64_t deadline = ovs_mono_ms() + (int64_t)timeout * 1000;
		int n;

		for (;;) {
			int64_t left = deadline - ovs_mono_ms();

			if (left <= 0) {
				n = 0;
				break;
			}
			n = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
			if (n != 0 && !(n < 0 && errno == EINTR))
				break;
		}
		if (n == 0) {
			timed_out = true;
			kill(-pid, SIGKILL);
		}
		close(pidfd);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			ovs_error("take %s: %s: wait: %s", src, key, strerror(errno));
			return EXIT_FAIL;
		}
	}
	if (timed_out) {
		ovs_error("take %s: %s (%s) ran longer than HOOK_TIMEOUT=%u seconds: killed%s",
			  src, key, conf.path, timeout, id || strcmp(key, "PRE_HOOK") ? "" :
			  "; no snapshot taken");
		return EXIT_FAIL;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return EXIT_OK;
	if (WIFEXITED(status))
		ovs_error("take %s: %s (%s) failed with exit status %d%s", src, key, conf.path,
			  WEXITSTATUS(status), id || strcmp(key, "PRE_HOOK") ? "" :
			  ": no snapshot taken");
	else
		ovs_error("take %s: %s (%s) killed by signal %d%s", src, key, conf.path,
			  WTERMSIG(status), id || strcmp(key, "PRE_HOOK") ? "" :
			  ": no snapshot taken");
	return EXIT_FAIL;
}

static int take_snapshot(struct ovs_volume *v, const char *src, uint64_t *id);

/* The take between the volume's hooks: a failing PRE_HOOK takes nothing;
 * the POST_HOOK runs after every take the PRE_HOOK ran for, failed or not
 * (it undoes what the PRE_HOOK did, e.g. unfreezes a database). */
static int take_locked(struct ovs_volume *v, const char *src)
{
	uint64_t id = 0;
	int status, post;

	status = check_name(v, src);
	if (status != EXIT_OK)
		return status;
	status = run_hook(src, "PRE_HOOK", conf.pre_hook, 0);
	if (status != EXIT_OK)
		return status;
	status = take_snapshot(v, src, &id);
	post = run_hook(src, "POST_HOOK", conf.post_hook, id);
	if (status == EXIT_OK && opt_keep)
		status = ovs_drop_by_policy(v, opt_keep, change.cls, false, false);
	return status != EXIT_OK ? status : post;
}

static int take_snapshot(struct ovs_volume *v, const char *src, uint64_t *idp)
{
	uint64_t id;
	int rc, status;

	if (opt_post) {
		const struct ovs_snapshot *pre;

		rc = ovs_snapshot_resolve(v, opt_post, &pre);
		if (rc < 0) {
			ovs_error_lib(rc, "take %s: --post", src);
			return EXIT_FAIL;
		}
		if (pre->cls != OVS_CLASS_PRE) {
			ovs_error("take %s: --post %s: snapshot %" PRIu64 " is a %s snapshot, not "
				  "a pre one (take --pre)", src, opt_post, pre->id,
				  ovs_snap_class_name(pre->cls));
			return EXIT_FAIL;
		}
		change.pre = pre->id;
	}
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
	/* Rule 17: no layer switch while a detached mount serves anyone. */
	if (ovs_check_kernel_views("take", v) != EXIT_OK ||
	    ovs_check_detached("take", v, true, opt_force) != EXIT_OK)
		return EXIT_FAIL;
	rc = ovs_daemon_take(v, opt_name, &id);
	if (rc < 0) {
		ovs_error_lib(rc, "take %s", src);
		return EXIT_FAIL;
	}
	/* The daemon wrote the registry: read it again before changing it.
	 * The daemon registers the snapshot as manual, without a hold: a
	 * crash before this one rewrite leaves a snapshot that no timer rule
	 * prunes. */
	*idp = id;
	rc = ovs_registry_load(v);
	if (rc == 0 && (change.hold != -1 || change.cls > OVS_CLASS_MANUAL ||
			change.description || change.nuserdata || change.pre))
		rc = ovs_registry_change(v, &id, 1, &change);
	if (rc == 0)
		rc = print_snapshot(v, id);
	if (rc < 0) {
		ovs_error_lib(rc, "take %s: snapshot %" PRIu64 " was taken, but", src, id);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/*
 * The rules of take --timer: KEEP (or, from before ovsnap.conf(5), the
 * rotation unit's $OVSNAP_KEEP, which *legacy gets so that the file made
 * now carries it on) and SPACE_LIMIT.  *spec: free() it.
 */
static int timer_rules(const char *src, char **spec, const char **legacy)
{
	const char *keep = ovs_conf_keep(&conf), *env = getenv("OVSNAP_KEEP");
	struct ovs_keep_policy policy;
	int rc;

	if (!conf.keep && env && *env) {
		rc = ovs_keep_parse(env, &policy);
		if (rc < 0)
			return ovs_err_keep(-rc, "OVSNAP_KEEP");
		keep = env;
		if (conf.exists)
			ovs_error("take %s: OVSNAP_KEEP (/etc/ovsnap/rotate-*.conf) is deprecated; "
				  "set KEEP in %s", src, conf.path);
		else
			*legacy = env;
	}
	*spec = ovs_conf_timer_spec(&conf, keep);
	return *spec ? 0 : ovs_err(ENOMEM, "out of memory");
}

int cmd_take(int argc, const char **argv)
{
	struct ovs_volume *v = NULL;
	const char **args;
	poptContext pc;
	struct ovs_userdata *userdata = NULL;
	char *src = NULL, *timer_spec = NULL;
	const char *legacy_keep = NULL;
	int status, n, conf_rc, setup_fd = -1;
	bool created = false, waited = false;

	pc = ovs_popt_parse("take", argc, argv, take_options, "SRC", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "take", 1, 1, &n, &status);
	if (!args)
		goto out;
	/* Everything the take will record is checked before anything is
	 * done: bad text is a usage error with no snapshot taken. */
	status = ovs_snap_change_from_options("take", opt_description, opt_userdata, &change,
					      &userdata);
	if (status != EXIT_OK)
		goto out;
	change.cls = opt_keep ? OVS_CLASS_TIMELINE : OVS_CLASS_MANUAL;
	if (opt_class) {
		enum ovs_snap_class cls;

		if (ovs_snap_class_parse(opt_class, &cls) < 0 ||
		    (cls != OVS_CLASS_MANUAL && cls != OVS_CLASS_TIMELINE)) {
			ovs_error("take: bad --class '%s': manual or timeline", opt_class);
			status = EXIT_USAGE;
			goto out;
		}
		change.cls = cls;
	}
	{
		static const struct ovs_excl excl[] = { { { "--pre", "--post", "--class" } }, { { 0 } } };
		static const char *const names[] = { "--pre", "--post", "--class" };
		const int given[] = { opt_pre, opt_post != NULL, opt_class != NULL };

		status = ovs_check_exclusive("take", excl, names, given, 3);
		if (status != EXIT_OK)
			goto out;
	}
	if (opt_pre)
		change.cls = OVS_CLASS_PRE;
	if (opt_post)
		change.cls = OVS_CLASS_POST;
	if (opt_hold)
		change.hold = 1;
	if (opt_timer && (opt_keep || opt_class || opt_pre || opt_post)) {
		ovs_error("take: --timer takes its rules from ovsnap.conf(5): not with "
			  "--keep, --class, --pre or --post");
		status = EXIT_USAGE;
		goto out;
	}
	status = EXIT_FAIL;
	src = ovs_resolve_source("take", args[0]);
	if (!src)
		goto out;
	/* A bad config is refused before anything is done. */
	conf_rc = ovs_conf_load(src, &conf);
	if (conf_rc == 0 && opt_timer)
		conf_rc = timer_rules(src, &timer_spec, &legacy_keep);
	if (conf_rc < 0) {
		ovs_error_lib(conf_rc, "take %s", src);
		goto out;
	}
	/* A user deleted since, or an NSS outage: the delegation grants
	 * the name nothing; the take goes on. */
	if (ovs_conf_check_names(&conf) < 0 && !ovs_opt_quiet)
		fprintf(stderr, "%s: take %s: warning: %s\n", ovs_progname, src,
			ovs_last_error());
	if (opt_timer) {
		opt_keep = timer_spec;
		change.cls = ovs_conf_class(&conf);
	}
	status = open_or_create(src, &v, &setup_fd, &created, &waited);
	if (status != EXIT_OK)
		goto out;
	/* A take that waited for the setup of its SRC waits for the rest of
	 * that take too, as it did when the setup lock was held throughout;
	 * it said once that it waits. */
	if (waited) {
		int quiet = ovs_opt_quiet;

		ovs_opt_quiet = 1;
		status = ovs_lock_loaded("take", v, true);
		ovs_opt_quiet = quiet;
	} else {
		status = ovs_lock_loaded("take", v, opt_wait || created);
	}
	/* Registered and locked: rule 17's check sees the volume now, and
	 * the hooks must not hold up every other first take. */
	if (setup_fd >= 0) {
		close(setup_fd);
		setup_fd = -1;
	}
	if (status == EXIT_OK)
		status = take_locked(v, src);
	if (status == EXIT_OK && !conf.exists) {
		conf_rc = ovs_conf_create_default(src, legacy_keep);
		if (conf_rc < 0)
			ovs_error_lib(conf_rc, "take %s: the snapshot was taken, but its settings file "
				      "was not made", src);
	}
	if (created && !ovs_daemon_running(v)) {
		/* The setup failed half way (the snapshot mount never came
		 * up): leave nothing behind, not even the store folder.  A
		 * daemon that is only slow to answer still has its mount
		 * over SRC: then its store stays. */
		char fstype[64] = "";
		int rc = ovs_volume_lock_fd(v) >= 0 ? 0 : ovs_volume_lock(v, true, "take");

		if (rc == 0) {
			ovs_umount_dead(src);
			if (ovs_is_mountpoint(src, fstype, sizeof(fstype)) > 0 &&
			    strcmp(fstype, "fuse.ovsnap") == 0)
				rc = ovs_err(EBUSY, "a snapshot mount is still over %s", src);
			else
				rc = ovs_volume_remove_new(v);
		}
		if (rc < 0)
			ovs_error_lib(rc, "take %s: the failed setup could not be undone; "
				      "'ovsnap fsck %s' finds what is left", src, src);
	}
out:
	if (v) {
		ovs_volume_unlock(v);
		ovs_volume_unref(v);
	}
	if (setup_fd >= 0)
		close(setup_fd);
	free(src);
	free(userdata);
	if (opt_timer)
		opt_keep = NULL;
	free(timer_spec);
	ovs_conf_clear(&conf);
	ovs_free_argv(opt_userdata);
	opt_userdata = NULL;
	poptFreeContext(pc);
	return status;
}
