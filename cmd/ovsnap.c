/*
 * ovsnap — administer overlayfs-format copy-on-write snapshots of
 * directory subtrees.  This file holds the command table and the pieces
 * every subcommand shares; each subcommand lives in cmd/NAME.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "ovsnap-private.h"

const char *ovs_progname = "ovsnap";
int ovs_opt_quiet;

/* The one table: ovsnap --help, dispatch and the root check come from it. */
const struct cmd_struct ovs_commands[] = {
	{ "take",	cmd_take,	"take a snapshot of a directory (sets it up the first time)", CMD_NEEDS_ROOT | CMD_DELEGABLE },
	{ "list",	cmd_list,	"list volumes, or the snapshots of one volume", CMD_DELEGABLE },
	{ "mount",	cmd_mount,	"mount a read-only view of a snapshot", CMD_NEEDS_ROOT | CMD_DELEGABLE },
	{ "umount",	cmd_umount,	"unmount a snapshot view", CMD_NEEDS_ROOT | CMD_DELEGABLE },
	{ "merge",	cmd_merge,	"merge adjacent snapshots into the oldest of them", CMD_NEEDS_ROOT },
	{ "drop",	cmd_drop,	"delete snapshots, or prune them by a retention policy", CMD_NEEDS_ROOT },
	{ "hold",	cmd_hold,	"hold snapshots: nothing removes them without --force", CMD_NEEDS_ROOT },
	{ "release",	cmd_release,	"release the hold of snapshots", CMD_NEEDS_ROOT },
	{ "modify",	cmd_modify,	"change the description, user data or class of snapshots", CMD_NEEDS_ROOT },
	{ "run",	cmd_run,	"run a command between a pre and a post snapshot", CMD_NEEDS_ROOT },
	{ "fsck",	cmd_fsck,	"check and repair a volume and its snapshots", CMD_NEEDS_ROOT },
	{ "activate",	cmd_activate,	"switch a volume's snapshot mount on", CMD_NEEDS_ROOT },
	{ "deactivate",	cmd_deactivate,	"switch a volume's snapshot mount off", CMD_NEEDS_ROOT },
	{ "forget",	cmd_forget,	"retire a volume: deactivate it, delete its snapshots and store", CMD_NEEDS_ROOT },
	{ "diff",	cmd_diff,	"show what changed between snapshots, or since one", CMD_NEEDS_ROOT | CMD_DELEGABLE },
	{ "config",	cmd_config,	"show the settings of a volume (its ovsnap.conf(5) file)", 0 },
	{ "restore",	cmd_restore,	"make paths what they were in a snapshot", CMD_NEEDS_ROOT },
	{ "rollback",	cmd_rollback,	"make the whole live tree a snapshot again", CMD_NEEDS_ROOT },
	{ "status",	cmd_status,	"tell whether volumes are protected, and what to do if not", 0 },
	{ "help",	cmd_help,	"show the help of a command", 0 },
	{ NULL, NULL, NULL, 0 }
};

struct poptOption ovs_common_options[] = {
	{ "quiet", 'q', POPT_ARG_NONE, &ovs_opt_quiet, 0,
	  "print nothing but errors and requested output", NULL },
	POPT_TABLEEND
};

struct poptOption ovs_help_options[] = {
	{ "help", 'h', POPT_ARG_NONE, NULL, OVS_OPT_HELP, "show this help message", NULL },
	/* -? as popt's own autohelp spells it, still accepted, not shown */
	{ NULL, '?', POPT_ARG_NONE | POPT_ARGFLAG_DOC_HIDDEN, NULL, OVS_OPT_HELP, NULL, NULL },
	{ "usage", 0, POPT_ARG_NONE, NULL, OVS_OPT_USAGE, "display brief usage message", NULL },
	POPT_TABLEEND
};

/* How many bytes at s make one character shown as it is in text output:
 * printable ASCII or valid UTF-8 that is no control character (C0, DEL,
 * C1) nor bidirectional mark or override; 0 for a byte to show escaped. */
static size_t utf8_shown(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t cp;
	size_t n;

	if (p[0] < 0x80)
		return p[0] >= 0x20 && p[0] != 0x7f;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		n = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		cp = p[0] & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* overlong, surrogates, beyond U+10FFFF */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	/* C1 controls (a terminal takes U+009B for ESC [), and the marks
	 * and overrides that reorder what follows them on screen */
	if (cp <= 0x9f || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
	    (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
		return 0;
	return n;
}

void ovs_put_shown(FILE *f, const char *s, bool backslash)
{
	while (*s) {
		size_t n = backslash && *s == '\\' ? 0 : utf8_shown(s);

		if (n) {
			fwrite(s, 1, n, f);
			s += n;
		} else {
			fprintf(f, "\\%03o", (unsigned char)*s++);
		}
	}
}

static void verror(const char *fmt, va_list ap, const char *tail)
{
	char *msg = NULL;

	fflush(stdout);
	fprintf(stderr, "%s: ", ovs_progname);
	/* a path in a message (a user's name for a file) must not move the
	 * cursor, erase the line or print a line of its own */
	if (vasprintf(&msg, fmt, ap) >= 0) {
		ovs_put_shown(stderr, msg, false);
		free(msg);
	}
	if (tail) {
		fputs(": ", stderr);
		ovs_put_shown(stderr, tail, false);
	}
	fputc('\n', stderr);
}

void ovs_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verror(fmt, ap, NULL);
	va_end(ap);
}

void ovs_error_lib(int err, const char *fmt, ...)
{
	const char *msg = ovs_last_error();
	va_list ap;

	if (!msg || !*msg)
		msg = strerror(err < 0 ? -err : err);
	va_start(ap, fmt);
	verror(fmt, ap, msg);
	va_end(ap);
}

int ovs_not_built(const char *cmd)
{
	ovs_error("%s: not implemented in this version yet", cmd);
	return EXIT_FAIL;
}

static const struct cmd_struct *find_command(const char *name)
{
	for (const struct cmd_struct *c = ovs_commands; c->name; c++)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

/*
 * Snapshot references such as -1 (the same as @-1) are arguments, never
 * options: popt would read "-1" as the short option '1'.  They go to popt
 * behind NEGATIVE_MARK, a byte that makes them plain arguments, and
 * ovs_popt_args() takes it off again.
 */
#define NEGATIVE_MARK '\x1f'

/* Whether the option of table named by arg ("--name", "-n", "-fn") wants
 * the next word as its argument. */
static bool option_takes_next(const struct poptOption *table, const char *arg)
{
	bool lng = arg[1] == '-';
	char c = arg[strlen(arg) - 1];

	if (arg[0] != '-' || !arg[1] || (lng && strchr(arg, '=')))
		return false;
	for (const struct poptOption *o = table; o->longName || o->shortName || o->argInfo ||
	     o->arg; o++) {
		unsigned type = o->argInfo & POPT_ARG_MASK;

		if (type == POPT_ARG_INCLUDE_TABLE) {
			if (option_takes_next(o->arg, arg))
				return true;
			continue;
		}
		if (type == POPT_ARG_NONE || type == POPT_ARG_VAL)
			continue;
		if (lng ? o->longName && strcmp(o->longName, arg + 2) == 0 :
			  o->shortName == c)
			return true;
	}
	return false;
}

/* The one-line note for a deprecated letter (see OVS_OPT_DEPRECATED). */
static void note_deprecated(const char *cmd, const struct poptOption *table, int val)
{
	for (const struct poptOption *o = table; o->longName || o->shortName || o->argInfo ||
	     o->arg; o++) {
		if ((o->argInfo & POPT_ARG_MASK) == POPT_ARG_INCLUDE_TABLE)
			continue;
		if (o->val != val)
			continue;
		if (!ovs_opt_quiet)
			fprintf(stderr, "%s: %s: -%c is deprecated, use %s (-%c goes in the next "
				"release)\n", ovs_progname, cmd, o->shortName, o->descrip,
				o->shortName);
		return;
	}
}

poptContext ovs_popt_parse(const char *cmd, int argc, const char **argv,
			   const struct poptOption *table, const char *args_help,
			   int *status)
{
	static char name[64];
	const char **pargv;
	poptContext pc;
	int rc;

	/* popt names the program after argv[0]: make it "ovsnap take".  The
	 * copy lives as long as the process (one command per process). */
	snprintf(name, sizeof(name), "%s %s", ovs_progname, cmd);
	pargv = calloc(argc + 1, sizeof(*pargv));
	if (!pargv) {
		ovs_error("%s: %s", cmd, strerror(ENOMEM));
		*status = EXIT_FAIL;
		return NULL;
	}
	memcpy(pargv, argv, argc * sizeof(*pargv));
	pargv[0] = name;
	for (int i = 1; i < argc; i++) {
		char *marked;

		if (strcmp(argv[i], "--") == 0)
			break;
		if (!ovs_negative_number(argv[i]) || option_takes_next(table, argv[i - 1]))
			continue;
		/* lives as long as the process, like name */
		if (asprintf(&marked, "%c%s", NEGATIVE_MARK, argv[i]) >= 0)
			pargv[i] = marked;
	}
	pc = poptGetContext(name, argc, pargv, table, 0);
	if (args_help)
		poptSetOtherOptionHelp(pc, args_help);
	while ((rc = poptGetNextOpt(pc)) > 0) {
		if (rc >= OVS_OPT_DEPRECATED && rc < OVS_OPT_DEPRECATED + 16) {
			note_deprecated(cmd, table, rc);
			continue;
		}
		if (rc == OVS_OPT_HELP || rc == OVS_OPT_USAGE) {
			if (rc == OVS_OPT_HELP)
				poptPrintHelp(pc, stdout, 0);
			else
				poptPrintUsage(pc, stdout, 0);
			printf("\nSee %s-%s(8).\n", ovs_progname, cmd);
			poptFreeContext(pc);
			*status = EXIT_OK;
			return NULL;
		}
	}
	if (rc < -1) {
		const char *bad = poptBadOption(pc, POPT_BADOPTION_NOALIAS);

		if (bad[0] == '-' && bad[1] >= '0' && bad[1] <= '9')
			ovs_error("%s: %s: %s (an argument that starts with '-' goes after "
				  "'--': %s %s ... -- %s)", cmd, bad, poptStrerror(rc), ovs_progname,
				  cmd, bad);
		else
			ovs_error("%s: %s: %s", cmd, bad, poptStrerror(rc));
		fprintf(stderr, "Try '%s %s --help' for more information.\n", ovs_progname, cmd);
		poptFreeContext(pc);
		*status = EXIT_USAGE;
		return NULL;
	}
	*status = EXIT_OK;
	return pc;
}

const char **ovs_popt_args(poptContext pc, const char *cmd, int min, int max,
			   int *nargs, int *status)
{
	const char **args = poptGetArgs(pc);
	int n = 0;

	while (args && args[n]) {
		/* in place: popt frees what it handed out (its own copy, or
		 * the marked string made above: writable either way) */
		if (args[n][0] == NEGATIVE_MARK)
			memmove((char *)args[n], args[n] + 1, strlen(args[n]));
		n++;
	}
	if (n < min || (max >= 0 && n > max)) {
		ovs_error("%s: %s", cmd, n < min ? "missing argument" :
			  "too many arguments");
		fprintf(stderr, "Try '%s %s --help' for more information.\n", ovs_progname, cmd);
		*status = EXIT_USAGE;
		return NULL;
	}
	*nargs = n;
	*status = EXIT_OK;
	return args;
}

int ovs_check_exclusive(const char *cmd, const struct ovs_excl *rows,
			const char *const *names, const int *given, size_t n)
{
	for (const struct ovs_excl *r = rows; r->opts[0]; r++) {
		const char *first = NULL;

		for (int j = 0; j < 4 && r->opts[j]; j++) {
			for (size_t i = 0; i < n; i++) {
				if (!given[i] || strcmp(names[i], r->opts[j]) != 0)
					continue;
				if (first) {
					ovs_error("%s: %s and %s cannot be used together",
						  cmd, first, names[i]);
					return EXIT_USAGE;
				}
				first = names[i];
			}
		}
	}
	return EXIT_OK;
}

/* arg made absolute against the working directory (not resolved), with
 * trailing slashes removed; NULL on ENOMEM or a lost cwd. */
static char *absolute_path(const char *arg)
{
	char *abs = NULL, *cwd;
	size_t n;

	if (arg[0] == '/') {
		abs = strdup(arg);
	} else {
		cwd = getcwd(NULL, 0);
		if (!cwd)
			return NULL;
		if (asprintf(&abs, "%s/%s", strcmp(cwd, "/") ? cwd : "", arg) < 0)
			abs = NULL;
		free(cwd);
	}
	for (n = abs ? strlen(abs) : 0; n > 1 && abs[n - 1] == '/'; n--)
		abs[n - 1] = 0;
	return abs;
}

static char *resolve_absolute_source(const char *cmd, const char *arg);

char *ovs_resolve_source(const char *cmd, const char *given)
{
	char *real, *arg;

	/* Relative is fine: what is recorded is the absolute path. */
	arg = absolute_path(given);
	if (!arg) {
		ovs_error("%s %s: %s", cmd, given, strerror(errno));
		return NULL;
	}
	real = resolve_absolute_source(cmd, arg);
	free(arg);
	return real;
}

static char *resolve_absolute_source(const char *cmd, const char *arg)
{
	bool delegated = ovs_delegated_uid() >= 0;
	char *real, *slash;
	struct stat st;

	real = realpath(arg, NULL);
	if (!real && (errno == ENOTCONN || errno == EIO) && !delegated) {
		/* SRC under the mount of a dead daemon, or of one whose
		 * filesystem was shut down: still a volume's source; resolve
		 * its parent instead. */
		char *dup = strdup(arg), *parent;
		int err = errno;

		slash = dup ? strrchr(dup, '/') : NULL;
		if (slash && slash[1]) {
			*slash = 0;
			parent = realpath(*dup ? dup : "/", NULL);
			if (parent && asprintf(&real, "%s/%s", strcmp(parent, "/") ? parent : "",
					       slash + 1) < 0)
				real = NULL;
			free(parent);
		}
		free(dup);
		if (real)
			return real;
		errno = err;
	}
	if (!real) {
		ovs_error("%s %s: %s", cmd, arg, strerror(errno));
		return NULL;
	}
	if (stat(real, &st) < 0) {
		if ((errno == ENOTCONN || errno == EIO) && !delegated)
			return real;
		ovs_error("%s %s: %s", cmd, arg, strerror(errno));
		free(real);
		return NULL;
	}
	if (!S_ISDIR(st.st_mode)) {
		ovs_error("%s %s: not a directory", cmd, arg);
		free(real);
		return NULL;
	}
	if (delegated) {
		/* ovsnap-delegate checked the directory it found as the
		 * caller: this must be that one (ovsnap-delegate(8)). */
		const char *e = getenv("OVSNAP_DELEGATED_SRC_ID");
		char id[64];

		snprintf(id, sizeof(id), "%ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
		if (!e || strcmp(e, id) != 0) {
			ovs_error("%s %s: permission denied (not the directory that was checked: "
				  "changed meanwhile)", cmd, arg);
			free(real);
			return NULL;
		}
	}
	return real;
}

/* JSON string with the escapes RFC 8259 requires; other bytes pass as they
 * are (paths are bytes, most of them UTF-8). */
void ovs_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = *s;

		switch (c) {
		case '"':
			fputs("\\\"", stdout);
			break;
		case '\\':
			fputs("\\\\", stdout);
			break;
		case '\n':
			fputs("\\n", stdout);
			break;
		case '\t':
			fputs("\\t", stdout);
			break;
		default:
			if (c < 0x20)
				printf("\\u%04x", c);
			else
				putchar(c);
		}
	}
	putchar('"');
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: %s [--version] [--help] COMMAND [ARGS]\n\n", ovs_progname);
	fprintf(out, "File-level copy-on-write snapshots of directory subtrees.\n\n");
	fprintf(out, "Commands:\n");
	for (const struct cmd_struct *c = ovs_commands; c->name; c++)
		if (!(c->flags & CMD_HIDDEN))
			fprintf(out, "  %-11s %s\n", c->name, c->summary);
	fprintf(out, "\nRun '%s COMMAND --help' for the options of a command.\n", ovs_progname);
	fprintf(out, "See ovsnap(8).\n");
}

int cmd_help(int argc, const char **argv)
{
	const struct cmd_struct *c;
	const char *hargv[] = { NULL, "--help", NULL };

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return EXIT_OK;
	}
	c = find_command(argv[1]);
	if (!c || c->fn == cmd_help) {
		ovs_error("help: unknown command '%s'", argv[1]);
		fprintf(stderr, "Try '%s --help' for more information.\n", ovs_progname);
		return EXIT_USAGE;
	}
	hargv[0] = c->name;
	return c->fn(2, hargv);
}

/* Protect stdout (util-linux closestream): a full disk or a closed pipe
 * must turn into a failure, not a silent exit 0. */
static int close_stdout(int status)
{
	if (ferror(stdout) || fflush(stdout) != 0 || fclose(stdout) != 0) {
		if (errno == EPIPE)
			return status;
		fprintf(stderr, "%s: write error: %s\n", ovs_progname,
			errno ? strerror(errno) : "I/O error");
		return status ? status : EXIT_FAIL;
	}
	return status;
}

static bool asks_help(int argc, const char **argv)
{
	for (int i = 2; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ||
		    strcmp(argv[i], "-?") == 0)
			return true;
	return false;
}

long ovs_delegated_uid(void)
{
	const char *e = getenv("OVSNAP_DELEGATED_UID");
	unsigned long uid;
	char *end;

	if (!e || !*e || getuid() != 0 || geteuid() != 0)
		return -1;
	errno = 0;
	uid = strtoul(e, &end, 10);
	return errno || *end || uid == 0 || uid >= (unsigned long)(uid_t)-1 ? -1 : (long)uid;
}

/* Whether a user's `ovsnap list ARGS` names a volume: only then is it
 * delegated (listing the volumes stays as it is). */
static bool names_volume(int argc, const char **argv)
{
	for (int i = 2; i < argc; i++)
		if (argv[i][0] != '-' || strcmp(argv[i], "--") == 0)
			return true;
	return false;
}

/*
 * A user's command that a volume's settings may allow: re-executed
 * through the setuid-root ovsnap-delegate, which checks them
 * (ovsnap-delegate(8)).  Returns only when that cannot be done: the
 * exit status, or -1 for a command that then runs with the user's rights.
 */
static int run_delegated(const struct cmd_struct *c, int argc, const char **argv)
{
	const char *helper = ovs_helper_path("ovsnap-delegate", "OVSNAP_DELEGATE");
	const char **hargv;
	struct stat st;

	if (stat(helper, &st) < 0 || st.st_uid != 0 || !(st.st_mode & S_ISUID)) {
		/* list is no root's command: it runs with the user's rights */
		if (!(c->flags & CMD_NEEDS_ROOT))
			return -1;
		ovs_error("%s: must be run as root (%s, which lets users a volume's settings "
			  "allow run it, is not installed setuid root)", c->name, helper);
		return EXIT_FAIL;
	}
	hargv = calloc(argc + 1, sizeof(*hargv));
	if (!hargv) {
		ovs_error("%s: %s", c->name, strerror(ENOMEM));
		return EXIT_FAIL;
	}
	hargv[0] = "ovsnap-delegate";
	for (int i = 1; i < argc; i++)
		hargv[i] = argv[i];
	fflush(stdout);
	execv(helper, (char *const *)hargv);
	ovs_error("%s: cannot run %s: %s", c->name, helper, strerror(errno));
	free(hargv);
	return EXIT_FAIL;
}

/*
 * A delegated list or diff writes to a memory file while it holds the
 * volume lock, and only after, so that a user whose stdout blocks (a
 * full pipe, a stopped reader) cannot hold the lock for ever (issue 14
 * item 7).  Returns the real stdout's fd, or -1 where nothing changed.
 */
static int buffer_stdout(void)
{
	int saved, mfd;

	fflush(stdout);
	mfd = memfd_create("ovsnap-out", MFD_CLOEXEC);
	if (mfd < 0)
		return -1;
	saved = fcntl(1, F_DUPFD_CLOEXEC, 3);
	if (saved < 0 || dup2(mfd, 1) < 0) {
		if (saved >= 0)
			close(saved);
		close(mfd);
		return -1;
	}
	close(mfd);
	return saved;
}

/* What buffer_stdout() kept, written to the real stdout; the status. */
static int flush_buffered(int saved, int status)
{
	char buf[65536];
	ssize_t n;
	bool bad = ferror(stdout) || fflush(stdout) != 0;

	if (lseek(1, 0, SEEK_SET) < 0)
		bad = true;
	while (!bad && (n = read(1, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(saved, buf + off, n - off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				if (errno != EPIPE)
					fprintf(stderr, "%s: write error: %s\n", ovs_progname,
						strerror(errno));
				return status ? status : (errno == EPIPE ? status : EXIT_FAIL);
			}
			off += w;
		}
	}
	if (bad) {
		fprintf(stderr, "%s: write error\n", ovs_progname);
		return status ? status : EXIT_FAIL;
	}
	return status;
}

int main(int argc, const char **argv)
{
	const struct cmd_struct *c;
	int status, saved = -1;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return close_stdout(EXIT_OK);
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("%s %s\n", ovs_progname, PACKAGE_VERSION);
		return close_stdout(EXIT_OK);
	}
	if (argv[1][0] == '-') {
		ovs_error("unrecognized option '%s'", argv[1]);
		fprintf(stderr, "Try '%s --help' for more information.\n", ovs_progname);
		return EXIT_USAGE;
	}
	c = find_command(argv[1]);
	if (!c) {
		ovs_error("'%s' is not an ovsnap command", argv[1]);
		fprintf(stderr, "Try '%s --help' for more information.\n", ovs_progname);
		return EXIT_USAGE;
	}
	if ((c->flags & CMD_DELEGABLE) && geteuid() != 0 && !asks_help(argc, argv) &&
	    ((c->flags & CMD_NEEDS_ROOT) || names_volume(argc, argv))) {
		status = run_delegated(c, argc, argv);
		if (status >= 0)
			return status;
	}
	if ((c->flags & CMD_NEEDS_ROOT) && !asks_help(argc, argv)) {
		if (geteuid() != 0) {
			ovs_error("%s: must be run as root", c->name);
			return EXIT_FAIL;
		}
		/* Root's commands trust the run directory's sockets and pid
		 * files and write there (DESIGN.md rule 20); a missing one
		 * is made, and checked, when needed. */
		if (ovs_run_dir_check(0) == -EPERM) {
			ovs_error("%s: %s", c->name, ovs_last_error());
			return EXIT_FAIL;
		}
	}
	umask(022);
	/* no core dump of root's memory where a user can reach it */
	if (ovs_delegated_uid() >= 0)
		prctl(PR_SET_DUMPABLE, 0);
	if (ovs_delegated_uid() >= 0 &&
	    (strcmp(c->name, "diff") == 0 || strcmp(c->name, "list") == 0))
		saved = buffer_stdout();
	status = c->fn(argc - 1, argv + 1);
	if (saved >= 0)
		return flush_buffered(saved, status);
	return close_stdout(status);
}
