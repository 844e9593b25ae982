/*
 * The space a snapshot's layer holds on its own: what dropping it would
 * give back.  Copies made by reflink share their extents with the live
 * file until one side is rewritten, so a layer is not its du(1): extents
 * FIEMAP marks shared are left out, and a hard-linked inode counts once.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "ovsnap-private.h"
#include "walk.h"

#define EXTENTS_PER_CALL 128

/* The multiply-linked inodes counted already: a hash set (open
 * addressing, linear probing, at most half full), so a layer of 10^6
 * hard links costs one probe per name, not a search of every inode seen
 * (issue 13 item 3).  0 marks a free slot; an inode number 0 is kept
 * aside. */
struct usage {
	uint64_t bytes;
	ino_t *seen;
	size_t nseen, capseen;	/* capseen: a power of two, or 0 */
	bool seen_zero;
};

/* Bytes of fd's extents that no other file shares; -1 if FIEMAP cannot
 * tell (then the caller counts st_blocks). */
static int64_t unshared_bytes(int fd)
{
	size_t size = sizeof(struct fiemap) + EXTENTS_PER_CALL * sizeof(struct fiemap_extent);
	struct fiemap *fm = malloc(size);
	uint64_t start = 0;
	int64_t total = 0;

	if (!fm)
		return -1;
	for (;;) {
		bool last = false;

		memset(fm, 0, size);
		fm->fm_start = start;
		fm->fm_length = FIEMAP_MAX_OFFSET - start;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = EXTENTS_PER_CALL;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0) {
			free(fm);
			return -1;
		}
		if (fm->fm_mapped_extents == 0)
			break;
		for (unsigned i = 0; i < fm->fm_mapped_extents; i++) {
			struct fiemap_extent *e = &fm->fm_extents[i];

			if (!(e->fe_flags & FIEMAP_EXTENT_SHARED))
				total += e->fe_length;
			if (e->fe_flags & FIEMAP_EXTENT_LAST)
				last = true;
			start = e->fe_logical + e->fe_length;
		}
		if (last)
			break;
	}
	free(fm);
	return total;
}

static size_t ino_slot(ino_t ino, size_t cap)
{
	uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ULL;

	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* Insert ino (not 0, not yet there) into set of capacity cap. */
static void ino_insert(ino_t *set, size_t cap, ino_t ino)
{
	size_t i = ino_slot(ino, cap);

	while (set[i])
		i = (i + 1) & (cap - 1);
	set[i] = ino;
}

static bool seen_before(struct usage *u, const struct stat *st)
{
	size_t i;

	if (st->st_nlink < 2 || S_ISDIR(st->st_mode))
		return false;
	if (st->st_ino == 0) {
		bool was = u->seen_zero;

		u->seen_zero = true;
		return was;
	}
	if (u->capseen) {
		for (i = ino_slot(st->st_ino, u->capseen); u->seen[i]; i = (i + 1) & (u->capseen - 1))
			if (u->seen[i] == st->st_ino)
				return true;
	}
	if (2 * (u->nseen + 1) > u->capseen) {
		size_t cap = u->capseen ? u->capseen * 2 : 64;
		ino_t *p = calloc(cap, sizeof(*p));

		if (!p)
			return false;	/* counted twice rather than failing */
		for (i = 0; i < u->capseen; i++)
			if (u->seen[i])
				ino_insert(p, cap, u->seen[i]);
		free(u->seen);
		u->seen = p;
		u->capseen = cap;
	}
	ino_insert(u->seen, u->capseen, st->st_ino);
	u->nseen++;
	return false;
}

static int usage_entry(void *arg, struct ovs_walk_dir *d, const char *name, const char *path,
		       struct ovs_walk_dir *child)
{
	struct usage *u = arg;
	struct stat st;
	int fd;

	if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (seen_before(u, &st))
		return 0;
	if (S_ISDIR(st.st_mode)) {
		u->bytes += (uint64_t)st.st_blocks * 512;
		child->fd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC |
				   O_NOATIME);
		return child->fd < 0 ? 0 : OVS_WALK_DESCEND;
	}
	if (S_ISREG(st.st_mode) && st.st_blocks > 0) {
		fd = openat(d->fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
		if (fd >= 0) {
			int64_t own = unshared_bytes(fd);

			close(fd);
			if (own >= 0) {
				u->bytes += own;
				return 0;
			}
		}
	}
	u->bytes += (uint64_t)st.st_blocks * 512;
	return 0;
}

static const struct ovs_walk_ops usage_ops = { .entry = usage_entry };

/* Add up everything below the directory dfd (taken over). */
static int add_dir(struct usage *u, int dfd)
{
	struct ovs_walk_dir root = { .fd = dfd, .aux = -1 };

	return ovs_walk(&root, "", &usage_ops, u);
}

/* The space of the layer at the directory fd (taken over). */
static int layer_space_fd(int fd, const char *upper, uint64_t *bytes)
{
	struct usage u = { 0 };
	int rc;

	rc = add_dir(&u, fd);
	free(u.seen);
	if (rc < 0)
		return ovs_err(-rc, "%s: %s", upper, strerror(-rc));
	*bytes = u.bytes;
	return 0;
}

int ovs_layer_space(const char *upper, uint64_t *bytes)
{
	int fd;

	/* O_NOATIME: the atimes in a layer are the snapshot's, and reading
	 * a directory would overwrite them. */
	fd = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (fd < 0)
		return ovs_err(errno, "%s: %s", upper, strerror(errno));
	return layer_space_fd(fd, upper, bytes);
}

int ovs_snapshot_space(const struct ovs_volume *v, uint64_t id, uint64_t *bytes)
{
	char upper[PATH_MAX];
	int fd, rc;

	rc = ovs_snapshot_upper(v, id, upper, sizeof(upper));
	if (rc < 0)
		return rc;
	/* from the store's fd, no symlink followed (DESIGN.md rule 20) */
	fd = ovs_snapshot_open_upper(v, id, O_RDONLY | O_NOATIME);
	if (fd < 0)
		return fd;
	return layer_space_fd(fd, upper, bytes);
}
