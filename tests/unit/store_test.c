/*
 * Unit tests of the trust checks of DESIGN.md rule 20 (lib/store.c): which
 * directories ovs_safe_dir_open accepts as a store or a parent, how it
 * follows symlinks, what its one-line refusals say, and that
 * ovs_store_open_beneath follows no symlink.  Needs root (ownership); skips
 * (77) otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ovsnap-private.h"

#include "check.h"

static char top[] = "/var/tmp/ovsnap-store-test.XXXXXX";

static void mkdir_mode(const char *name, mode_t mode, uid_t uid)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", top, name);
	if (mkdir(path, 0700) < 0 || chmod(path, mode) < 0 || chown(path, uid, 0) < 0) {
		perror(path);
		exit(99);
	}
}

static void symlink_at(const char *target, const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", top, name);
	if (symlink(target, path) < 0) {
		perror(path);
		exit(99);
	}
}

/* ovs_safe_dir_open of top/name: 0 when accepted, else -errno and the
 * message in msg. */
static int try_open(const char *name, unsigned flags, char *msg, size_t len)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", top, name);
	fd = ovs_safe_dir_open(path, "store", flags);
	snprintf(msg, len, "%s", fd < 0 ? ovs_last_error() : "");
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

static void expect_refused(const char *name, unsigned flags, const char *why)
{
	char msg[1024], want[1024];
	int rc = try_open(name, flags, msg, sizeof(msg));

	snprintf(want, sizeof(want), "store is unsafe: %s", why);
	CHECK(rc == -EPERM, "%s: rc %d, want -EPERM (%s)", name, rc, msg);
	CHECK(strcmp(msg, want) == 0, "%s: message '%s', want '%s'", name, msg, want);
}

static void expect_accepted(const char *name, unsigned flags)
{
	char msg[1024];
	int rc = try_open(name, flags, msg, sizeof(msg));

	CHECK(rc == 0, "%s: refused: %s", name, msg);
}

int main(void)
{
	char why[512], path[256];
	int fd;

	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: needs root\n");
		return 77;
	}
	if (!mkdtemp(top) || chmod(top, 0755) < 0) {
		perror(top);
		return 99;
	}
	mkdir_mode("ok", 0755, 0);
	mkdir_mode("ok/sub", 0700, 0);
	mkdir_mode("ww", 0777, 0);
	mkdir_mode("ww/sub", 0755, 0);
	mkdir_mode("gw", 0775, 0);
	mkdir_mode("sticky", 01777, 0);
	mkdir_mode("sticky/sub", 0700, 0);
	mkdir_mode("user", 0755, 65534);
	mkdir_mode("user/sub", 0755, 0);
	symlink_at("ok/sub", "link");		/* in a safe dir, to a safe dir */
	symlink_at("../ok", "ww/link");		/* a link users could replace */
	symlink_at("ww/link", "via-ww");
	symlink_at("sticky/sub", "to-sticky-sub");

	expect_accepted("ok", 0);
	expect_accepted("ok/sub", 0);
	expect_accepted("sticky/sub", 0);
	expect_accepted("link", 0);
	expect_accepted("to-sticky-sub", 0);
	expect_accepted("ok/../ok/./sub", 0);
	/* where a store will be made: held to the parents' rule */
	expect_accepted("sticky", OVS_SAFE_PARENT);

	snprintf(why, sizeof(why), "%s/ww is writable by others (mode 0777)", top);
	expect_refused("ww", 0, why);
	snprintf(why, sizeof(why), "%s/ww is writable by others (mode 0777, not sticky)", top);
	expect_refused("ww/sub", 0, why);
	expect_refused("via-ww", 0, why);
	expect_refused("ww", OVS_SAFE_PARENT, why);
	snprintf(why, sizeof(why), "%s/gw is writable by its group (mode 0775)", top);
	expect_refused("gw", 0, why);
	snprintf(why, sizeof(why),
		 "%s/sticky is writable by others (mode 1777; sticky is not enough here)", top);
	expect_refused("sticky", 0, why);
	snprintf(why, sizeof(why), "%s/user is owned by uid 65534, not root", top);
	expect_refused("user", 0, why);
	expect_refused("user/sub", 0, why);

	/* below a checked directory: no symlink is followed */
	snprintf(path, sizeof(path), "%s", top);
	fd = open(path, O_RDONLY | O_DIRECTORY);
	CHECK(ovs_store_open_beneath(fd, "link", O_RDONLY | O_DIRECTORY, 0) == -ELOOP,
	      "ovs_store_open_beneath followed a symlink");
	CHECK(ovs_store_open_beneath(fd, "ok/../../", O_RDONLY | O_DIRECTORY, 0) == -EXDEV,
	      "ovs_store_open_beneath left its directory");
	{
		int ok = ovs_store_open_beneath(fd, "ok/sub", O_RDONLY | O_DIRECTORY, 0);

		CHECK(ok >= 0, "ovs_store_open_beneath of a plain directory: %s", strerror(-ok));
		if (ok >= 0)
			close(ok);
	}
	close(fd);

	snprintf(path, sizeof(path), "rm -rf '%s'", top);
	if (system(path) != 0)
		fprintf(stderr, "cannot remove %s\n", top);
	return failures ? 1 : 0;
}
