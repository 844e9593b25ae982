/*
 * The data of one file into another: a reflink clone where the
 * filesystem can (FICLONE: XFS, btrfs), else a copy of the data ranges
 * only (copy_file_range, then read/write), so holes stay holes.  Used by
 * restore (the daemon's clone-into request and restore --to).
 */
#ifndef OVSNAP_CLONE_H
#define OVSNAP_CLONE_H

#include <stdbool.h>

/*
 * Make out (open for writing) hold exactly the data of in: out is
 * truncated first, so any earlier data is gone.  *cloned tells whether
 * it was a clone (may be NULL).  0 or -errno.
 */
int ovs_clone_data(int out, int in, bool *cloned);

#endif
