/*
 * ovs_clone_data(): see clone.h.
 */
#include <errno.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clone.h"
#include "preserve-int.h"

int ovs_clone_data(int out, int in, bool *cloned)
{
	struct stat st;

	if (cloned)
		*cloned = false;
	if (fstat(in, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	/* FICLONE does not shrink a longer file: start from an empty one. */
	if (ftruncate(out, 0) < 0)
		return -errno;
	if (st.st_size == 0)
		return 0;
	if (ioctl(out, FICLONE, in) == 0) {
		if (cloned)
			*cloned = true;
		return 0;
	}
	/* Per file, not per volume (rule 16): EXDEV, EOPNOTSUPP, EINVAL
	 * (unaligned tail on some filesystems) all mean "copy this one". */
	return ovs_copy_data_ranges(in, out, st.st_size);
}
