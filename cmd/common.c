/*
 * What the commands that change a volume share: opening it for the change
 * (lock, registry, recovery of an interrupted merge or drop) and the
 * progress line of long operations.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "merge.h"
#include "ovsnap-private.h"

static const char *waiting_cmd;

/* --wait that waits says so: a command that seems to hang is waiting. */
static void say_waiting(const struct ovs_volume *v, const char *holder)
{
	if (!ovs_opt_quiet)
		fprintf(stderr, "%s: %s %s: waiting for %s to finish\n", ovs_progname,
			waiting_cmd, ovs_volume_source(v), holder);
}

int ovs_lock_loaded(const char *cmd, struct ovs_volume *v, bool wait)
{
	const char *src = ovs_volume_source(v);
	int rc;

	waiting_cmd = cmd;
	ovs_lock_wait_hook = say_waiting;
	rc = ovs_volume_lock(v, wait, cmd);
	ovs_lock_wait_hook = NULL;
	if (rc == 0)
		rc = ovs_registry_load(v);
	if (rc == 0) {
		rc = ovs_recover(v);
		if (rc > 0 && !ovs_opt_quiet)
			fprintf(stderr, "%s: %s %s: finished an interrupted merge or drop\n",
				ovs_progname, cmd, src);
	}
	if (rc < 0) {
		ovs_error_lib(rc, "%s %s", cmd, src);
		ovs_volume_unlock(v);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Shown only once a merge has run for a second, on a terminal. */
void ovs_progress_show(void *arg, uint64_t done, uint64_t total)
{
	struct ovs_progress *p = arg;

	if (ovs_opt_quiet || !isatty(STDERR_FILENO))
		return;
	if (!p->start_ns)
		p->start_ns = mono_ns();
	if (!p->shown && mono_ns() - p->start_ns < 1000000000)
		return;
	p->shown = true;
	if (total)
		fprintf(stderr, "\r%s: %" PRIu64 "/%" PRIu64 " entries (%d%%)", p->what, done,
			total, (int)(done * 100 / total));
	else
		fprintf(stderr, "\r%s: %" PRIu64 " entries", p->what, done);
}

void ovs_progress_end(struct ovs_progress *p)
{
	if (p->shown)
		fputc('\n', stderr);
	p->shown = false;
	p->start_ns = 0;
}

int ovs_open_locked(const char *cmd, const char *arg, bool wait, struct ovs_volume **out)
{
	struct ovs_volume *v;
	char *src;
	int rc;

	src = ovs_resolve_source(cmd, arg);
	if (!src)
		return EXIT_FAIL;
	rc = ovs_volume_open(src, &v);
	if (rc < 0) {
		if (rc == -ENOENT)
			ovs_error("%s %s: not a volume (no snapshot was ever taken of it)", cmd, src);
		else
			ovs_error_lib(rc, "%s %s", cmd, src);
		free(src);
		return EXIT_FAIL;
	}
	free(src);
	if (ovs_lock_loaded(cmd, v, wait) != EXIT_OK) {
		ovs_volume_unref(v);
		return EXIT_FAIL;
	}
	*out = v;
	return EXIT_OK;
}

void ovs_snapshot_label(const struct ovs_snapshot *s, char *buf, size_t len)
{
	if (s && s->name[0])
		snprintf(buf, len, "snapshot %" PRIu64 " (%s)", s->id, s->name);
	else
		snprintf(buf, len, "snapshot %" PRIu64, s ? s->id : 0);
}

int ovs_snap_change_from_options(const char *cmd, const char *description,
				 const char **userdata, struct ovs_snap_change *change,
				 struct ovs_userdata **ud_out)
{
	struct ovs_userdata *ud = NULL;
	size_t n = 0;

	*ud_out = NULL;
	if (description) {
		if (ovs_description_check(description) < 0) {
			ovs_error("%s: %s", cmd, ovs_last_error());
			return EXIT_USAGE;
		}
		change->description = description;
	}
	while (userdata && userdata[n])
		n++;
	if (!n)
		return EXIT_OK;
	ud = calloc(n, sizeof(*ud));
	if (!ud) {
		ovs_error("%s: %s", cmd, strerror(ENOMEM));
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < n; i++) {
		if (ovs_userdata_parse(userdata[i], &ud[i]) < 0) {
			ovs_error("%s: %s", cmd, ovs_last_error());
			free(ud);
			return EXIT_USAGE;
		}
	}
	if (n > OVS_USERDATA_NMAX) {
		ovs_error("%s: at most %d --userdata options", cmd, OVS_USERDATA_NMAX);
		free(ud);
		return EXIT_USAGE;
	}
	change->userdata = ud;
	change->nuserdata = n;
	*ud_out = ud;
	return EXIT_OK;
}

void ovs_json_snapshot_ref(uint64_t id, const char *name)
{
	printf("{\"id\": %" PRIu64 ", \"name\": ", id);
	if (name && *name)
		ovs_json_string(name);
	else
		fputs("null", stdout);
	putchar('}');
}

void ovs_free_argv(const char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free((char *)argv[i]);
	free(argv);
}

bool ovs_spool_tmp_full(int err)
{
	return err == ENOSPC || err == EDQUOT || err == EROFS;
}

int ovs_spool_file(const char *name, bool *in_memory)
{
	int fd = ovs_scratch_file(name, in_memory);

	if (fd < 0)
		return ovs_err(-fd, "spool for the changes in /tmp or in memory: %s", strerror(-fd));
	return fd;
}
