/*
 * ovsnap run — bracket a command with a pre and a post snapshot (snapper's
 * pre/post pairs, as its APT and zypper plugins take them) and exit with
 * the command's status.  The snapshots are taken by this same program's
 * "take --pre" and "take --post PRE", so that they are exactly what those
 * commands make, and no volume lock is held while the command runs (it may
 * well call ovsnap itself).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "ovsnap-private.h"

static char *opt_description;
static const char **opt_userdata;

static struct poptOption run_options[] = {
	{ "description", 'd', POPT_ARG_STRING, &opt_description, 0,
	  "describe both snapshots (one line of text)", "TEXT" },
	{ "userdata", 'u', POPT_ARG_ARGV, &opt_userdata, 0,
	  "record KEY=VALUE with both snapshots (repeatable)", "KEY=VALUE" },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

/* The exit status a shell gives: the code, or 128 + the signal. */
static int exit_status_of(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return EXIT_FAIL;
}

/* Wait for pid, not interrupted by the signals we ignore meanwhile. */
static int wait_for(pid_t pid)
{
	int ws;

	while (waitpid(pid, &ws, 0) < 0)
		if (errno != EINTR)
			return -1;
	return exit_status_of(ws);
}

/*
 * Run "ovsnap take ARGS..." (this very program), its stderr ours, and read
 * the id it prints.  Returns 0 and *id, or -1 (the take said why).
 */
static int take(const char *const *extra, size_t nextra, const char *src, uint64_t *id)
{
	const char *argv[16 + 2 * OVS_USERDATA_NMAX + 8];
	char self[PATH_MAX], out[64];
	size_t n = 0, got = 0;
	int pfd[2], status;
	ssize_t r;
	pid_t pid;

	r = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (r <= 0) {
		ovs_error("run %s: cannot find this program: %s", src, strerror(errno));
		return -1;
	}
	self[r] = '\0';
	argv[n++] = "ovsnap";
	argv[n++] = "take";
	for (size_t i = 0; i < nextra; i++)
		argv[n++] = extra[i];
	/* waits for the lock: a rotation take at that moment is no error */
	argv[n++] = "--wait";
	if (opt_description) {
		argv[n++] = "--description";
		argv[n++] = opt_description;
	}
	for (size_t i = 0; opt_userdata && opt_userdata[i]; i++) {
		argv[n++] = "--userdata";
		argv[n++] = opt_userdata[i];
	}
	if (ovs_opt_quiet)
		argv[n++] = "--quiet";
	argv[n++] = "--";
	argv[n++] = src;
	argv[n] = NULL;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		ovs_error("run %s: pipe: %s", src, strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		ovs_error("run %s: fork: %s", src, strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		dup2(pfd[1], STDOUT_FILENO);
		execv(self, (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	while ((r = read(pfd[0], out + got, sizeof(out) - 1 - got)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		got += r;
		if (got == sizeof(out) - 1)
			break;
	}
	out[got] = '\0';
	close(pfd[0]);
	status = wait_for(pid);
	if (status != 0)
		return -1;
	out[strcspn(out, "\n")] = '\0';
	if (ovs_parse_u64(out, id) < 0) {
		ovs_error("run %s: take printed '%s', not an id", src, out);
		return -1;
	}
	return 0;
}

int cmd_run(int argc, const char **argv)
{
	struct ovs_snap_change check = OVS_SNAP_CHANGE_INIT;
	struct ovs_userdata *userdata = NULL;
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_quit;
	const char *pre_args[1] = { "--pre" };
	const char *post_args[2];
	char pre_ref[32];
	const char **args;
	uint64_t pre, post;
	poptContext pc;
	int status, nargs, cmd_status;
	pid_t pid;

	pc = ovs_popt_parse("run", argc, argv, run_options, "SRC -- COMMAND [ARG...]", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "run", 2, -1, &nargs, &status);
	if (!args)
		goto out;
	/* Bad text is refused before anything is taken or run. */
	status = ovs_snap_change_from_options("run", opt_description, opt_userdata, &check,
					      &userdata);
	if (status != EXIT_OK)
		goto out;

	if (take(pre_args, 1, args[0], &pre) < 0) {
		ovs_error("run %s: no pre snapshot: the command was not run", args[0]);
		status = EXIT_FAIL;
		goto out;
	}
	/* Like system(3): a Ctrl-C stops the command, and we still take
	 * the post snapshot. */
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGQUIT, &old_quit, NULL);
		execvp(args[1], (char *const *)(args + 1));
		fprintf(stderr, "%s: run %s: %s: %s\n", ovs_progname, args[0], args[1],
			strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	if (pid < 0) {
		ovs_error("run %s: fork: %s", args[0], strerror(errno));
		cmd_status = EXIT_FAIL;
	} else {
		cmd_status = wait_for(pid);
		if (cmd_status < 0)
			cmd_status = EXIT_FAIL;
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);

	snprintf(pre_ref, sizeof(pre_ref), "%" PRIu64, pre);
	post_args[0] = "--post";
	post_args[1] = pre_ref;
	if (take(post_args, 2, args[0], &post) < 0) {
		ovs_error("run %s: the command exited with %d, but no post snapshot was taken "
			  "(pre snapshot %" PRIu64 ")", args[0], cmd_status, pre);
		status = cmd_status ? cmd_status : EXIT_FAIL;
		goto out;
	}
	if (!ovs_opt_quiet)
		fprintf(stderr, "%s: run %s: pre snapshot %" PRIu64 ", post snapshot %" PRIu64
			", the command exited with %d\n", ovs_progname, args[0], pre, post,
			cmd_status);
	status = cmd_status;
out:
	free(userdata);
	ovs_free_argv(opt_userdata);
	opt_userdata = NULL;
	poptFreeContext(pc);
	return status;
}
