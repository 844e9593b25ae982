/*
 * Unit tests of snapshot references (id, name, @latest, @oldest, @-N) and
 * of snapshot names.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ovsnap-private.h"

#include "check.h"

static const char registry[] =
	"ovsnap-registry 1\n"
	"source /srv/data\n"
	"fstype xfs\nfsuuid u\nclone 1\nnext-id 10\nactive 0\ndeactivated-ns 0\n"
	"snapshot 2 - 1000 frozen 0\n"
	"snapshot 3 daily 2000 frozen 0\n"
	"snapshot 7 v1.0_rc-2 3000 frozen 0\n"
	"snapshot 9 - 4000 active 0\n"
	"end\n";

static void expect(struct ovs_volume *v, const char *ref, long id)
{
	const struct ovs_snapshot *s = NULL;
	int rc = ovs_snapshot_resolve(v, ref, &s);

	if (id < 0) {
		CHECK(rc == (int)id, "'%s': rc %d, want %ld", ref, rc, id);
		CHECK(*ovs_last_error(), "'%s': no message", ref);
	} else {
		CHECK(rc == 0 && s && s->id == (uint64_t)id, "'%s': rc %d id %llu, want %ld (%s)",
		      ref, rc, s ? (unsigned long long)s->id : 0ULL, id, ovs_last_error());
	}
}

int main(void)
{
	struct ovs_volume v = { .refcount = 1, .dirfd = -1, .lockfd = -1,
				.source = "/srv/data" };
	struct ovs_volume empty = { .refcount = 1, .dirfd = -1, .lockfd = -1,
				    .source = "/srv/empty", .reg = { .next_id = 1 } };

	if (ovs_registry_parse("t", registry, strlen(registry), &v.reg) < 0) {
		fprintf(stderr, "FAIL: %s\n", ovs_last_error());
		return 1;
	}
	expect(&v, "3", 3);
	expect(&v, "9", 9);
	expect(&v, "4", -ENOENT);
	expect(&v, "0", -ENOENT);
	expect(&v, "daily", 3);
	expect(&v, "v1.0_rc-2", 7);
	expect(&v, "weekly", -ENOENT);
	expect(&v, "@latest", 9);
	expect(&v, "@oldest", 2);
	expect(&v, "@-0", 9);
	expect(&v, "@-1", 7);
	expect(&v, "@-3", 2);
	expect(&v, "@-4", -ENOENT);
	expect(&v, "@-", -EINVAL);
	expect(&v, "@-x", -EINVAL);
	expect(&v, "@-+1", -EINVAL);
	expect(&v, "@newest", -EINVAL);
	expect(&v, "", -EINVAL);
	/* -N is @-N (a reference such as -1 given after --, issue 11 item 20) */
	expect(&v, "-1", 7);
	expect(&v, "-3", 2);
	expect(&v, "-4", -ENOENT);
	expect(&v, "-x", -EINVAL);
	expect(&v, "a/b", -EINVAL);
	expect(&v, "99999999999999999999999", -EINVAL);
	expect(&empty, "@latest", -ENOENT);
	CHECK(strstr(ovs_last_error(), "/srv/empty has no snapshots"), "empty: '%s'",
	      ovs_last_error());
	expect(&empty, "@oldest", -ENOENT);
	expect(&empty, "1", -ENOENT);

	CHECK(ovs_snapshot_name_valid("nightly"), "nightly");
	CHECK(ovs_snapshot_name_valid("2026-12-02"), "date");
	CHECK(ovs_snapshot_name_valid("a.b_c-d"), "punctuation");
	CHECK(!ovs_snapshot_name_valid("123"), "all digits");
	CHECK(!ovs_snapshot_name_valid("@x"), "@");
	CHECK(!ovs_snapshot_name_valid(".x"), "leading dot");
	CHECK(!ovs_snapshot_name_valid("-x"), "leading dash");
	CHECK(!ovs_snapshot_name_valid(""), "empty");
	CHECK(!ovs_snapshot_name_valid("a b"), "space");
	CHECK(!ovs_snapshot_name_valid("a/b"), "slash");
	CHECK(ovs_snapshot_name_valid("x234567890123456789012345678901234567890123456789012345678901234"),
	      "64 chars");
	CHECK(!ovs_snapshot_name_valid("x2345678901234567890123456789012345678901234567890123456789012345"),
	      "65 chars");

	/* escaping of sources for store folder and index names */
	{
		char buf[256], back[256];
		static const char *const paths[] = { "/", "/srv/data", "/a-b/c d/.e/\\x",
						     "/srv/ünï", NULL };

		for (int i = 0; paths[i]; i++) {
			CHECK(ovs_path_escape(paths[i], buf, sizeof(buf)) == 0, "escape %s", paths[i]);
			CHECK(!strchr(buf, '/') && buf[0] != '.', "escaped %s has '/' or a leading dot: %s",
			      paths[i], buf);
			CHECK(ovs_path_unescape(buf, back, sizeof(back)) == 0 &&
			      strcmp(back, paths[i]) == 0, "unescape(%s) = %s, want %s", buf, back,
			      paths[i]);
		}
		ovs_path_escape("/a-b/c d", buf, sizeof(buf));
		CHECK(strcmp(buf, "a%2db-c%20d") == 0, "escape: %s", buf);
		ovs_path_escape("/x:y,z\\", buf, sizeof(buf));
		CHECK(strcmp(buf, "x%3ay%2cz%5c") == 0, "escape keeps overlay separators: %s", buf);
		CHECK(ovs_path_escape("rel", buf, sizeof(buf)) == -EINVAL, "relative path escaped");
	}

	free(v.reg.snaps);
	free(v.reg.source);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("ref: all checks passed\n");
	return 0;
}
