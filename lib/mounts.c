/*
 * Mount-table queries (libmount) and filesystem identity (libblkid).
 *
 * SRC may be covered by ovsnap's own FUSE mount: every query about "the
 * filesystem of SRC" looks through that mount to the filesystem below,
 * where the data and the store really are.
 */
#include <blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ovsnap-private.h"

int ovs_mount_table_load(struct libmnt_table **out)
{
	struct libmnt_table *tb = mnt_new_table();
	int rc;

	if (!tb)
		return ovs_err(ENOMEM, "cannot allocate the mount table");
	rc = mnt_table_parse_mtab(tb, NULL);
	if (rc < 0) {
		mnt_unref_table(tb);
		return ovs_err(-rc, "cannot read the mount table: %s", strerror(-rc));
	}
	*out = tb;
	return 0;
}

int ovs_mount_devno_mounted(dev_t devno)
{
	struct libmnt_table *tb;
	int rc = ovs_mount_table_load(&tb);

	if (rc < 0)
		return rc;
	rc = mnt_table_find_devno(tb, devno, MNT_ITER_FORWARD) != NULL;
	mnt_unref_table(tb);
	return rc;
}

int ovs_mount_table_iter(struct libmnt_table **tb, struct libmnt_iter **itr, int direction)
{
	int rc = ovs_mount_table_load(tb);

	if (rc < 0)
		return rc;
	*itr = mnt_new_iter(direction);
	if (!*itr) {
		mnt_unref_table(*tb);
		return ovs_err(ENOMEM, "out of memory");
	}
	return 0;
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

static int fill_mountinfo(struct libmnt_fs *fs, struct ovs_mountinfo *mi)
{
	unsigned long fl = 0;
	const char *vfs = mnt_fs_get_vfs_options(fs);

	memset(mi, 0, sizeof(*mi));
	mi->target = dup_or_empty(mnt_fs_get_target(fs));
	mi->source = dup_or_empty(mnt_fs_get_srcpath(fs) ? mnt_fs_get_srcpath(fs)
							  : mnt_fs_get_source(fs));
	mi->fstype = dup_or_empty(mnt_fs_get_fstype(fs));
	mi->fsroot = dup_or_empty(mnt_fs_get_root(fs));
	if (!mi->target || !mi->source || !mi->fstype || !mi->fsroot) {
		ovs_mountinfo_clear(mi);
		return ovs_err(ENOMEM, "out of memory");
	}
	mi->devno = mnt_fs_get_devno(fs);
	if (vfs && mnt_optstr_get_flags(vfs, &fl, mnt_get_builtin_optmap(MNT_LINUX_MAP)) == 0) {
		mi->nosuid = fl & MS_NOSUID;
		mi->nodev = fl & MS_NODEV;
		mi->noexec = fl & MS_NOEXEC;
		mi->readonly = fl & MS_RDONLY;
	}
	return 0;
}

void ovs_mountinfo_clear(struct ovs_mountinfo *mi)
{
	free(mi->target);
	free(mi->source);
	free(mi->fstype);
	free(mi->fsroot);
	memset(mi, 0, sizeof(*mi));
}

static bool is_ovsnap_fuse(struct libmnt_fs *fs)
{
	const char *t = mnt_fs_get_fstype(fs);

	return t && strcmp(t, OVS_FUSE_FSTYPE) == 0;
}

/* The topmost mount whose target is exactly path and that is not ovsnap's
 * FUSE shim (mountinfo lists mounts in mount order: search backwards). */
static struct libmnt_fs *top_mount_at(struct libmnt_table *tb, const char *path,
				      bool skip_ovsnap)
{
	struct libmnt_iter *itr = mnt_new_iter(MNT_ITER_BACKWARD);
	struct libmnt_fs *fs, *found = NULL;

	if (!itr)
		return NULL;
	while (mnt_table_next_fs(tb, itr, &fs) == 0) {
		const char *t = mnt_fs_get_target(fs);

		if (!t || strcmp(t, path) != 0)
			continue;
		if (skip_ovsnap && is_ovsnap_fuse(fs))
			continue;
		found = fs;
		break;
	}
	mnt_free_iter(itr);
	return found;
}

int ovs_mount_find(const char *path, struct ovs_mountinfo *mi)
{
	struct libmnt_table *tb;
	struct libmnt_fs *fs;
	char *walk;
	int rc;

	if (path[0] != '/')
		return ovs_err(EINVAL, "%s: not an absolute path", path);
	rc = ovs_mount_table_load(&tb);
	if (rc < 0)
		return rc;
	walk = strdup(path);
	if (!walk) {
		mnt_unref_table(tb);
		return ovs_err(ENOMEM, "out of memory");
	}
	/*
	 * Walk up from path (canonical: callers pass realpath()s) to the
	 * first ancestor that is a mount point, by name only: no stat(), so
	 * a hung FUSE mount cannot hang us.  ovsnap's FUSE mounts are looked
	 * through wherever they are: they only ever cover a SRC.
	 */
	for (;;) {
		fs = top_mount_at(tb, walk, true);
		if (fs)
			break;
		char *slash = strrchr(walk, '/');

		if (!slash || walk[1] == '\0')
			break;
		if (slash == walk)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	if (!fs)
		rc = ovs_err(ENOENT, "%s: no mount holds it", path);
	else
		rc = fill_mountinfo(fs, mi);
	free(walk);
	mnt_unref_table(tb);
	return rc;
}

void ovs_strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int ovs_mounts_below(const char *path, char ***targets, size_t *n)
{
	struct libmnt_table *tb;
	struct libmnt_iter *itr;
	struct libmnt_fs *fs;
	char **v = NULL;
	size_t cnt = 0;
	int rc;

	rc = ovs_mount_table_iter(&tb, &itr, MNT_ITER_FORWARD);
	if (rc < 0)
		return rc;
	while (mnt_table_next_fs(tb, itr, &fs) == 0) {
		const char *t = mnt_fs_get_target(fs);
		char **nv;

		if (!t || strcmp(t, path) == 0 || !ovs_path_inside(t, path))
			continue;
		nv = realloc(v, (cnt + 1) * sizeof(*v));
		if (!nv || !(nv[cnt] = strdup(t))) {
			v = nv ? nv : v;
			ovs_strv_free(v, cnt);
			rc = ovs_err(ENOMEM, "out of memory");
			goto out;
		}
		v = nv;
		cnt++;
	}
	*targets = v;
	*n = cnt;
out:
	mnt_free_iter(itr);
	mnt_unref_table(tb);
	return rc;
}

int ovs_is_mountpoint(const char *path, char *fstype, size_t len)
{
	struct libmnt_table *tb;
	struct libmnt_fs *fs;
	int rc;

	rc = ovs_mount_table_load(&tb);
	if (rc < 0)
		return rc;
	fs = top_mount_at(tb, path, false);
	if (fs && fstype)
		snprintf(fstype, len, "%s", mnt_fs_get_fstype(fs) ?: "");
	mnt_unref_table(tb);
	return fs ? 1 : 0;
}

int ovs_mount_flags(const char *path, unsigned long *flags)
{
	struct ovs_mountinfo mi;
	int rc = ovs_mount_find(path, &mi);

	if (rc < 0)
		return rc;
	*flags = (mi.nosuid ? MS_NOSUID : 0) | (mi.nodev ? MS_NODEV : 0) |
		 (mi.noexec ? MS_NOEXEC : 0);
	ovs_mountinfo_clear(&mi);
	return 0;
}

/* Ask libblkid for the UUID of the superblock on dev (a block device:
 * a disk partition, a loop device, one device of a btrfs). */
static int blkid_uuid(const char *dev, char *buf, size_t len)
{
	blkid_probe pr;
	const char *uuid = NULL;
	int rc = -ENOENT;

	if (dev[0] != '/')
		return -ENOENT;
	pr = blkid_new_probe_from_filename(dev);
	if (!pr)
		return -errno ? -errno : -ENOENT;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_UUID | BLKID_SUBLKS_TYPE);
	if (blkid_do_safeprobe(pr) == 0 &&
	    blkid_probe_lookup_value(pr, "UUID", &uuid, NULL) == 0 && uuid && *uuid) {
		snprintf(buf, len, "%s", uuid);
		rc = 0;
	}
	blkid_free_probe(pr);
	return rc;
}

int ovs_fs_uuid(const struct ovs_mountinfo *mi, const char *path, char *buf, size_t len)
{
	struct statfs sfs;
	unsigned int v[2];

	if (mi && blkid_uuid(mi->source, buf, len) == 0)
		return 0;
	/* No readable device (not root, a network or virtual fs): the
	 * kernel's fsid is stable for the mounted filesystem at least. */
	if (statfs(path, &sfs) < 0)
		return ovs_err(errno, "statfs %s: %m", path);
	memcpy(v, &sfs.f_fsid, sizeof(v));
	snprintf(buf, len, "fsid-%08x%08x", v[0], v[1]);
	return 0;
}

bool ovs_fstype_supported(const char *fstype)
{
	static const char *const ok[] = { "xfs", "ext4", "btrfs", "ext3", "ext2", NULL };

	for (int i = 0; ok[i]; i++)
		if (strcmp(fstype, ok[i]) == 0)
			return true;
	return false;
}

int ovs_umount_lazy(const char *target)
{
	struct libmnt_context *cxt = mnt_new_context();
	int rc;

	if (!cxt)
		return ovs_err(ENOMEM, "out of memory");
	mnt_context_set_target(cxt, target);
	mnt_context_enable_lazy(cxt, 1);
	rc = mnt_context_umount(cxt);
	if (rc != 0) {
		char msg[256] = "";

		mnt_context_get_excode(cxt, rc, msg, sizeof(msg));
		mnt_free_context(cxt);
		return ovs_err(EIO, "cannot unmount %s: %s", target, *msg ? msg : "unknown error");
	}
	mnt_free_context(cxt);
	return 0;
}

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif

int ovs_open_real_source(const char *src)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV,
	};
	struct ovs_mountinfo mi;
	const char *rel;
	size_t tlen;
	int treefd, fd, rc;

	rc = ovs_mount_find(src, &mi);
	if (rc < 0)
		return rc;
	tlen = strlen(mi.target);
	if (strcmp(mi.target, "/") == 0) {
		rel = src + 1;
	} else if (strncmp(src, mi.target, tlen) == 0 && (src[tlen] == '/' || !src[tlen])) {
		rel = src + tlen + (src[tlen] == '/');
	} else {
		rc = ovs_err(EINVAL, "%s is not below its mount point %s", src, mi.target);
		ovs_mountinfo_clear(&mi);
		return rc;
	}
	if (!*rel) {
		/* SRC is the root of its filesystem: nothing above it to
		 * clone; what its path shows is all there is */
		ovs_mountinfo_clear(&mi);
		fd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		return fd < 0 ? ovs_err(errno, "cannot open %s: %m", src) : fd;
	}
	treefd = syscall(SYS_open_tree, AT_FDCWD, mi.target, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (treefd < 0) {
		rc = ovs_err(errno, "cannot clone the mount %s: %m", mi.target);
		ovs_mountinfo_clear(&mi);
		return rc;
	}
	ovs_mountinfo_clear(&mi);
	fd = syscall(SYS_openat2, treefd, rel, &how, sizeof(how));
	rc = errno;
	close(treefd);
	if (fd < 0)
		return ovs_err(rc, "cannot open %s below its snapshot mount: %s", src, strerror(rc));
	return fd;
}
