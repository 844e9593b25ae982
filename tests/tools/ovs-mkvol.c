/*
 * ovs-mkvol — the library's own test helper: set up a volume and register
 * snapshots directly through libovsnap, without the snapshot mount, so that
 * the store, the registry and `ovsnap list` can be tested on their own.
 *
 *   ovs-mkvol SRC [--store DIR] [--snapshots N] [--name NAME]...
 *
 * SRC that is a volume already only gets the snapshots added.  Each --name
 * names the next snapshot taken.  Prints nothing; errors like ovsnap does.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libovsnap.h"

static int usage(void)
{
	fprintf(stderr, "usage: ovs-mkvol SRC [--store DIR] [--snapshots N] [--name NAME]...\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct ovs_volume_opts opts = { 0 };
	const char *src = NULL, *names[64];
	struct ovs_volume *v;
	int nnames = 0, count = 0, rc, rootfd;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--store") == 0 && i + 1 < argc)
			opts.store = argv[++i];
		else if (strcmp(argv[i], "--snapshots") == 0 && i + 1 < argc)
			count = atoi(argv[++i]);
		else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc && nnames < 64)
			names[nnames++] = argv[++i];
		else if (argv[i][0] == '-' || src)
			return usage();
		else
			src = argv[i];
	}
	if (!src)
		return usage();
	if (count < nnames)
		count = nnames;

	rc = ovs_volume_create(src, &opts, &v);
	if (rc == -EEXIST)
		rc = ovs_volume_open(src, &v);
	if (rc < 0) {
		fprintf(stderr, "ovs-mkvol: %s: %s\n", src, ovs_last_error());
		return 1;
	}
	rc = ovs_volume_lock(v, false, "ovs-mkvol");
	if (rc < 0)
		goto fail;
	rootfd = open(ovs_volume_source(v), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		rc = ovs_err(errno, "%s: %m", ovs_volume_source(v));
		goto fail;
	}
	for (int i = 0; i < count && rc == 0; i++)
		rc = ovs_registry_add_snapshot(v, i < nnames ? names[i] : NULL, rootfd, NULL);
	close(rootfd);
	if (rc < 0)
		goto fail;
	ovs_volume_unref(v);
	return 0;
fail:
	fprintf(stderr, "ovs-mkvol: %s: %s\n", src, ovs_last_error());
	ovs_volume_unref(v);
	return 1;
}
