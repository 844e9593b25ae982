/*
 * ovs_clone_data(): see clone.h.
 */
#include <errno.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "clone.h"
#include "preserve-int.h"

/* The clone failed because this file cannot be cloned here: copy it.
 * Per file, not per volume (rule 16): EXDEV, EOPNOTSUPP, EINVAL
 * (unaligned tail on some filesystems) and the like. */
static bool copy_instead(int err)
{
	return err == EXDEV || err == EOPNOTSUPP || err == ENOTTY || err == EINVAL ||
	       err == ENOSYS || err == EPERM || err == EBADF || err == ETXTBSY;
}

/* Room for size bytes in out's filesystem once out's own blocks are
 * freed (bfree for root, who may use the reserve): checked before the
 * copy truncates out, so a full filesystem leaves out as it was.  A
 * filesystem that cannot tell is given the benefit of the doubt. */
static int room_for(int out, const struct stat *ost, off_t size)
{
	struct statfs sf;
	unsigned long long avail;

	if (fstatfs(out, &sf) < 0 || sf.f_bsize <= 0 || sf.f_blocks == 0)
		return 0;
	avail = (unsigned long long)(geteuid() == 0 ? sf.f_bfree : sf.f_bavail) * sf.f_bsize +
		(unsigned long long)ost->st_blocks * 512;
	return (unsigned long long)size > avail ? -ENOSPC : 0;
}

static int clone_data(int out, int in, bool *cloned, bool may_copy)
{
	struct stat st, ost;
	int rc;

	if (cloned)
		*cloned = false;
	if (fstat(in, &st) < 0 || fstat(out, &ost) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || !S_ISREG(ost.st_mode))
		return -EINVAL;
	if (st.st_size > 0) {
		rc = ioctl(out, FICLONE, in) == 0 ? 0 : -errno;
		/* an unaligned tail may be cloned only to the end of out */
		if (rc == -EINVAL && ost.st_size > st.st_size) {
			if (ftruncate(out, st.st_size) < 0)
				return -errno;
			ost.st_size = st.st_size;
			rc = ioctl(out, FICLONE, in) == 0 ? 0 : -errno;
		}
		if (rc == 0) {
			/* FICLONE replaces the data of in's length and keeps
			 * what lies beyond it */
			if (ost.st_size > st.st_size && ftruncate(out, st.st_size) < 0)
				return -errno;
			if (cloned)
				*cloned = true;
			return 0;
		}
		if (!copy_instead(-rc))
			return rc;	/* ENOSPC, EIO, ...: out as it was */
		if (!may_copy)
			return -EXDEV;	/* out as it was, or cut to in's size */
		/* the data ranges only, but a sparse file's size is an upper
		 * bound its blocks stay below */
		rc = room_for(out, &ost, (off_t)st.st_blocks * 512 < st.st_size ?
						 (off_t)st.st_blocks * 512 : st.st_size);
		if (rc < 0)
			return rc;
	}
	/* Holes stay holes only in an empty file, so the copy starts from
	 * one (see clone.h). */
	if (ftruncate(out, 0) < 0)
		return -errno;
	if (st.st_size == 0)
		return 0;
	/* out is a live file (restore): its pages stay cached for users */
	return ovs_copy_data_ranges(in, out, st.st_size, false, NULL);
}

int ovs_clone_data(int out, int in, bool *cloned)
{
	return clone_data(out, in, cloned, true);
}

int ovs_clone_only(int out, int in)
{
	return clone_data(out, in, NULL, false);
}
