/*
 * The manifest of a directory tree: one canonical line per entry, sorted
 * by path, so that two trees with the same content (as the consistency
 * oracle defines it) give byte-identical output.  Shared by ovs-manifest
 * and ovs-workload; plain libc.
 */
#ifndef OVS_TEST_MANIFEST_H
#define OVS_TEST_MANIFEST_H

#include <stdbool.h>
#include <stdio.h>

struct manifest_opts {
	/* Directory mtimes change whenever an entry is created in a layer;
	 * some comparisons must leave them out. */
	bool no_dir_mtime;
	/* Top-level names to skip (e.g. a store kept inside the tree). */
	const char **exclude;
	int nexclude;
};

/* Write the manifest of root to out.  Returns 0, or -1 after printing
 * what went wrong on stderr. */
int manifest_write(const char *root, const struct manifest_opts *opts, FILE *out);

#endif
