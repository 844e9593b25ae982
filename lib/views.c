/*
 * Snapshot views in the mount table.  The mount table itself is the record
 * of which views exist: nothing to keep in sync, nothing left behind by a
 * crashed view process or a reboot.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libmount.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ovsnap-private.h"
#include "views.h"

char *ovs_view_source(const char *src, uint64_t id)
{
	char *s;

	if (asprintf(&s, "%s%s:%" PRIu64, OVS_VIEW_SOURCE_PREFIX, src, id) < 0)
		return NULL;
	return s;
}

/*
 * Anyone can make a FUSE mount whose source and type read like a view
 * (fusermount3 -o fsname=ovsnap-view:SRC:ID,subtype=ovsnap-view), and such
 * a mount must not hold a snapshot against drop and retention.  fusermount3
 * records the real uid of whoever mounts as user_id: only root makes a
 * user_id=0 FUSE mount.
 */
static bool made_by_root(struct libmnt_fs *fs)
{
	char *value = NULL;
	size_t len = 0;

	if (mnt_fs_get_option(fs, "user_id", &value, &len) != 0 || !value)
		return false;
	return len == 1 && value[0] == '0';
}

/* The real uid of process pid is 0 and its name is ovsnap-viewd. */
static bool is_root_viewd(pid_t pid)
{
	char path[64], line[256];
	bool comm_ok = false, uid_ok = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long uid;

		/* comm is cut at 15 characters */
		if (strncmp(line, "Name:\t", 6) == 0)
			comm_ok = strncmp(line + 6, "ovsnap-viewd", 12) == 0;
		else if (strncmp(line, "State:\t", 7) == 0 && (line[7] == 'Z' || line[7] == 'X'))
			break;
		else if (sscanf(line, "Uid: %lu", &uid) == 1)
			uid_ok = uid == 0;
	}
	fclose(f);
	return comm_ok && uid_ok;
}

pid_t ovs_view_daemon(const char *target, dev_t *dev)
{
	char pidfile[PATH_MAX], *text = NULL;
	unsigned int maj, min;
	size_t len;
	int pid;
	bool ok;

	if (ovs_view_run_file(target, "pid", pidfile, sizeof(pidfile)) < 0 ||
	    ovs_read_file_at(AT_FDCWD, pidfile, &text, &len, 64) < 0)
		return 0;
	ok = sscanf(text, "%d %u:%u", &pid, &maj, &min) == 3 && pid > 0 && is_root_viewd(pid);
	free(text);
	if (!ok)
		return 0;
	if (dev)
		*dev = makedev(maj, min);
	return pid;
}

/*
 * Whether the ovsnap-viewd that `ovsnap mount` recorded for the view's
 * target is alive and serves this very mount: the device number of a FUSE
 * mount is its connection's, so a view remounted, or a dead daemon's pid
 * reused, does not match.
 */
static bool served_by_viewd(struct libmnt_fs *fs)
{
	dev_t dev;

	return mnt_fs_get_target(fs) && ovs_view_daemon(mnt_fs_get_target(fs), &dev) > 0 &&
	       dev == mnt_fs_get_devno(fs);
}

/* Parse one mount-table entry: 1 if it is a view (out filled). */
static int parse_view(struct libmnt_fs *fs, struct ovs_view_mount *out)
{
	const char *type = mnt_fs_get_fstype(fs), *src = mnt_fs_get_source(fs);
	const char *colon, *path;
	uint64_t id;
	bool kernel;

	if (!type || !src || strncmp(src, OVS_VIEW_SOURCE_PREFIX, strlen(OVS_VIEW_SOURCE_PREFIX)))
		return 0;
	/* overlay mounts in this mount namespace are root's */
	if (strcmp(type, OVS_VIEW_FSTYPE) == 0 && made_by_root(fs))
		kernel = false;
	else if (strcmp(type, "overlay") == 0)
		kernel = true;
	else
		return 0;
	path = src + strlen(OVS_VIEW_SOURCE_PREFIX);
	colon = strrchr(path, ':');
	if (!colon || colon == path || ovs_parse_u64(colon + 1, &id) < 0)
		return 0;
	memset(out, 0, sizeof(*out));
	out->source = strndup(path, colon - path);
	out->target = strdup(mnt_fs_get_target(fs) ?: "");
	out->id = id;
	out->kernel = kernel;
	out->served = kernel || served_by_viewd(fs);
	if (!out->source || !out->target) {
		free(out->source);
		free(out->target);
		return ovs_err(ENOMEM, "out of memory");
	}
	return 1;
}

static int collect(const char *only_src, struct ovs_view_mount **views, size_t *n)
{
	struct ovs_view_mount *v = NULL, one;
	struct libmnt_table *tb;
	struct libmnt_iter *itr;
	struct libmnt_fs *fs;
	size_t cnt = 0;
	int rc;

	rc = ovs_mount_table_iter(&tb, &itr, MNT_ITER_FORWARD);
	if (rc < 0)
		return rc;
	while (mnt_table_next_fs(tb, itr, &fs) == 0) {
		struct ovs_view_mount *nv;

		rc = parse_view(fs, &one);
		if (rc < 0)
			break;
		if (rc == 0)
			continue;
		rc = 0;
		/* a view whose daemon is gone shows nothing: it holds nothing */
		if (!one.served || (only_src && strcmp(one.source, only_src) != 0)) {
			free(one.source);
			free(one.target);
			continue;
		}
		nv = realloc(v, (cnt + 1) * sizeof(*v));
		if (!nv) {
			free(one.source);
			free(one.target);
			rc = ovs_err(ENOMEM, "out of memory");
			break;
		}
		v = nv;
		v[cnt++] = one;
	}
	mnt_free_iter(itr);
	mnt_unref_table(tb);
	if (rc < 0) {
		ovs_views_free(v, cnt);
		return rc;
	}
	*views = v;
	*n = cnt;
	return 0;
}

int ovs_volume_views(const struct ovs_volume *v, struct ovs_view_mount **views, size_t *n)
{
	return collect(ovs_volume_source(v), views, n);
}

int ovs_views_all(struct ovs_view_mount **views, size_t *n)
{
	return collect(NULL, views, n);
}

void ovs_views_free(struct ovs_view_mount *views, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(views[i].source);
		free(views[i].target);
	}
	free(views);
}

int ovs_view_at(const char *target, struct ovs_view_mount *out)
{
	struct libmnt_table *tb;
	struct libmnt_iter *itr;
	struct libmnt_fs *fs, *top = NULL;
	int rc;

	/* mountinfo lists mounts in mount order: the last one at target is
	 * the one a path lookup sees */
	rc = ovs_mount_table_iter(&tb, &itr, MNT_ITER_BACKWARD);
	if (rc < 0)
		return rc;
	while (mnt_table_next_fs(tb, itr, &fs) == 0) {
		const char *t = mnt_fs_get_target(fs);

		if (t && strcmp(t, target) == 0) {
			top = fs;
			break;
		}
	}
	rc = top ? parse_view(top, out) : 0;
	mnt_free_iter(itr);
	mnt_unref_table(tb);
	return rc;
}

int ovs_view_run_file(const char *target, const char *ext, char *buf, size_t len)
{
	char esc[PATH_MAX];
	int rc = ovs_path_escape(target, esc, sizeof(esc));

	if (rc < 0)
		return rc;
	if (snprintf(buf, len, "%s/view-%s.%s", ovs_run_dir(), esc, ext) >= (int)len)
		return ovs_err(ENAMETOOLONG, "%s: path too long", target);
	return 0;
}
