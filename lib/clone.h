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
 * Make out (open for writing) hold exactly the data of in.  The clone
 * is tried first and touches out only when it works (a longer out is cut
 * to in's size after it); where it fails with EINVAL only because out is
 * longer and in's size is not block-aligned, out is cut to in's size and
 * the clone tried again.  A clone that fails for want of space or on an
 * I/O error returns that error with out as it was; one that cannot clone
 * this file falls back to a copy, which first checks that the filesystem
 * has room for in's data (ENOSPC, out as it was) and then truncates out
 * to empty and writes: an error part way through it (a racing writer
 * took the room, EIO) leaves out partly written (restore writes a live
 * file only after the daemon has preserved it, and a second run
 * finishes).  *cloned tells whether it was a clone (may be NULL).  0 or
 * -errno.
 */
int ovs_clone_data(int out, int in, bool *cloned);
/* The same without the copy: -EXDEV where ovs_clone_data would copy (a
 * daemon request must not copy gigabytes while it holds up takes). */
int ovs_clone_only(int out, int in);

#endif
