/*
 * Snapshot views in the mount table.  The mount table itself is the record
 * of which views exist: nothing to keep in sync, nothing left behind by a
 * crashed view process or a reboot.
 */
#include <errno.h>
#include <inttypes.h>
#include <libmount.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ovsnap-private.h"
#include "views.h"

char *ovs_view_source(const char *src, uint64_t id)
{
	char *s;

	if (asprintf(&s, "%s%s:%" PRIu64, OVS_VIEW_SOURCE_PREFIX, src, id) < 0)
		return NULL;
	return s;
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
	if (strcmp(type, OVS_VIEW_FSTYPE) == 0)
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
		if (only_src && strcmp(one.source, only_src) != 0) {
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
