/*
 * ovs-manifest — print the manifest of a directory tree (see manifest.c
 * for the format).  Two trees with the same content give byte-identical
 * output, so `diff` of two manifests is the consistency oracle's check.
 *
 * Usage: ovs-manifest [--no-dir-mtime] [--exclude NAME]... DIR
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

static void usage(FILE *out, int status)
{
	fputs("Usage: ovs-manifest [--no-dir-mtime] [--exclude NAME]... DIR\n"
	      "Print one canonical line per entry of DIR, sorted by path.\n"
	      "  --no-dir-mtime   leave directory mtimes out\n"
	      "  --exclude NAME   skip the top-level entry NAME (repeatable)\n"
	      "  --no-atime       accepted; atime is never shown\n", out);
	exit(status);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "no-dir-mtime", no_argument, NULL, 'D' },
		{ "exclude", required_argument, NULL, 'x' },
		{ "no-atime", no_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct manifest_opts opts = { 0 };
	int c, rc;

	opts.exclude = calloc(argc, sizeof(*opts.exclude));
	if (!opts.exclude)
		return 99;
	while ((c = getopt_long(argc, argv, "Dx:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'D':
			opts.no_dir_mtime = true;
			break;
		case 'x':
			opts.exclude[opts.nexclude++] = optarg;
			break;
		case 'A':
			break;
		case 'h':
			usage(stdout, 0);
			break;
		default:
			usage(stderr, 2);
		}
	}
	if (optind != argc - 1)
		usage(stderr, 2);
	rc = manifest_write(argv[optind], &opts, stdout);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "ovs-manifest: write error: %s\n", strerror(errno));
		rc = -1;
	}
	free(opts.exclude);
	return rc < 0 ? 1 : 0;
}
