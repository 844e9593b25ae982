/*
 * ovsnap restore — make paths of the live tree what they were in a
 * snapshot, or (--to) write the snapshot's version somewhere else.  The
 * work is in cmd/restore-apply.c, shared with ovsnap rollback.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "ovsnap-private.h"
#include "restore.h"
#include "views.h"

static char *opt_to;
static int opt_wait;

static struct poptOption restore_options[] = {
	{ "to", 't', POPT_ARG_STRING, &opt_to, 0,
	  "write the snapshot's version to DEST instead of PATH", "DEST" },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

/*
 * PATH (absolute inside src, or relative to it) as a path relative to
 * src: no ".", ".." or empty components, no trailing '/'; "" is SRC
 * itself.  NULL after printing the error.
 */
static char *relative_path(const char *src, const char *arg)
{
	size_t n = strlen(src);
	const char *p = arg;
	char *out, *o;

	if (*arg == '/' && strcmp(src, "/") != 0) {
		if (strncmp(arg, src, n) != 0 || (arg[n] != '/' && arg[n] != '\0')) {
			ovs_error("restore %s: %s is not inside %s", src, arg, src);
			return NULL;
		}
		p = arg + n;
	}
	out = o = malloc(strlen(p) + 1);
	if (!out) {
		ovs_error("restore %s: %s", src, strerror(ENOMEM));
		return NULL;
	}
	while (*p) {
		const char *e;
		size_t len;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		e = strchrnul(p, '/');
		len = e - p;
		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) {
			ovs_error("restore %s: %s: '.' and '..' are not allowed in a path", src,
				  arg);
			free(out);
			return NULL;
		}
		if (o != out)
			*o++ = '/';
		memcpy(o, p, len);
		o += len;
		p = e;
	}
	*o = '\0';
	return out;
}

/* DEST's canonical parent is inside a mounted snapshot view. */
static bool inside_view(const char *dir)
{
	struct ovs_view_mount *views;
	bool inside = false;
	size_t n;

	if (ovs_views_all(&views, &n) < 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(views[i].target);

		if (strncmp(dir, views[i].target, len) == 0 &&
		    (dir[len] == '\0' || dir[len] == '/'))
			inside = true;
	}
	ovs_views_free(views, n);
	return inside;
}

static int restore_to(struct ovs_volume *v, uint64_t snap, const char *path,
		      struct restore_stats *st)
{
	const char *src = ovs_volume_source(v), *slash, *name;
	char *dest = strdup(opt_to), *parent, *real;
	struct stat sb;
	int dirfd, status;

	if (!dest) {
		ovs_error("restore %s: %s", src, strerror(ENOMEM));
		return EXIT_FAIL;
	}
	while (strlen(dest) > 1 && dest[strlen(dest) - 1] == '/')
		dest[strlen(dest) - 1] = '\0';
	/* an existing directory receives the path under its own name */
	if (stat(dest, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		const char *base = strrchr(path, '/');
		char *d;

		base = base ? base + 1 : path;
		if (!*base) {
			ovs_error("restore %s: --to %s: exists (give a new name for the whole tree)",
				  src, opt_to);
			free(dest);
			return EXIT_FAIL;
		}
		if (asprintf(&d, "%s/%s", dest, base) < 0) {
			free(dest);
			return EXIT_FAIL;
		}
		free(dest);
		dest = d;
	}
	if (lstat(dest, &sb) == 0) {
		ovs_error("restore %s: --to %s: exists", src, dest);
		free(dest);
		return EXIT_FAIL;
	}
	slash = strrchr(dest, '/');
	name = slash ? slash + 1 : dest;
	parent = slash ? strndup(dest, slash == dest ? 1 : (size_t)(slash - dest)) : strdup(".");
	real = parent ? realpath(parent, NULL) : NULL;
	if (!real) {
		ovs_error("restore %s: --to %s: %s", src, opt_to, strerror(errno));
		free(parent);
		free(dest);
		return EXIT_FAIL;
	}
	if (inside_view(real)) {
		ovs_error("restore %s: --to %s: inside a read-only snapshot view", src, opt_to);
		status = EXIT_FAIL;
		goto out;
	}
	dirfd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		ovs_error("restore %s: --to %s: %s", src, opt_to, strerror(errno));
		status = EXIT_FAIL;
		goto out;
	}
	status = restore_copy_out("restore", v, snap, path, dirfd, name, st);
	close(dirfd);
out:
	free(real);
	free(parent);
	free(dest);
	return status;
}

static int run_restore(struct ovs_volume *v, const char **args, int nargs)
{
	const char *src = ovs_volume_source(v);
	const struct ovs_snapshot *s;
	struct restore_stats st = { 0 };
	char **paths;
	int rc, status = EXIT_FAIL, n = 0;

	rc = ovs_snapshot_resolve(v, args[1], &s);
	if (rc < 0) {
		ovs_error_lib(rc, "restore %s %s", src, args[1]);
		return EXIT_FAIL;
	}
	paths = calloc(nargs, sizeof(*paths));
	if (!paths)
		return EXIT_FAIL;
	for (n = 0; n < nargs - 2; n++) {
		paths[n] = relative_path(src, args[n + 2]);
		if (!paths[n])
			goto out;
	}
	if (opt_to) {
		if (n != 1) {
			ovs_error("restore %s: --to takes one PATH", src);
			goto out;
		}
		status = restore_to(v, s->id, paths[0], &st);
	} else {
		status = restore_check_active("restore", v);
		if (status == EXIT_OK)
			status = restore_paths("restore", v, s->id, (const char *const *)paths, n,
					       &st);
	}
	if (status == EXIT_OK && !opt_to)
		ovs_log(v, "snapshot=%" PRIu64 " restore paths=%d changed=%" PRIu64
			" cloned=%" PRIu64 " copied=%" PRIu64, s->id, n, st.changed, st.cloned,
			st.copied);
	if (status == EXIT_OK && !ovs_opt_quiet)
		fprintf(stderr, "restored %" PRIu64 " paths from snapshot %" PRIu64
			" (%" PRIu64 " files cloned, %" PRIu64 " copied)\n",
			st.changed, s->id, st.cloned, st.copied);
out:
	for (int i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return status;
}

int cmd_restore(int argc, const char **argv)
{
	struct ovs_volume *v = NULL;
	const char **args;
	poptContext pc;
	int status, nargs;

	pc = ovs_popt_parse("restore", argc, argv, restore_options, "SRC SNAP PATH...", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "restore", 3, -1, &nargs, &status);
	if (!args)
		goto out;
	status = ovs_open_locked("restore", args[0], opt_wait, &v);
	if (status != EXIT_OK)
		goto out;
	status = run_restore(v, args, nargs);
	ovs_volume_unlock(v);
	ovs_volume_unref(v);
out:
	poptFreeContext(pc);
	return status;
}
