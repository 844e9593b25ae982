/*
 * Unit tests of retention policies: SPEC parsing and the exact sets kept
 * for last/hourly/daily/weekly/monthly/yearly rules across month and year
 * boundaries (UTC, ISO weeks), gaps that do not use up a count, and the
 * snapshots always kept (newest, held, mounted).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ovsnap-private.h"
#include "retention.h"

#include "check.h"

/* "2025-01-28T06:00:00" (UTC) in ns. */
static int64_t utc(const char *s)
{
	struct tm tm = { 0 };

	if (!strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) {
		fprintf(stderr, "bad time %s\n", s);
		exit(2);
	}
	return (int64_t)timegm(&tm) * 1000000000;
}

static struct ovs_snapshot snaps[256];

/* A volume whose snapshots (ids 1..n) were created at times[]. */
static void volume_at(struct ovs_volume *v, const int64_t *times, size_t n)
{
	memset(v, 0, sizeof(*v));
	v->refcount = 1;
	v->dirfd = v->lockfd = -1;
	v->source = "/srv/data";
	for (size_t i = 0; i < n; i++) {
		memset(&snaps[i], 0, sizeof(snaps[i]));
		snaps[i].id = i + 1;
		snaps[i].created_ns = times[i];
		snaps[i].state = i + 1 == n ? OVS_SNAP_ACTIVE : OVS_SNAP_FROZEN;
		snaps[i].cls = OVS_CLASS_TIMELINE;
	}
	v->reg.snaps = snaps;
	v->reg.nsnaps = n;
	v->reg.next_id = n + 1;
}

/* The kept ids as "1 4 7" (oldest first). */
static void kept(struct ovs_volume *v, const char *spec, const uint64_t *mounted, size_t nm,
		 char *out, size_t len)
{
	struct ovs_keep_verdict *plan;
	struct ovs_keep_policy p;
	size_t n, used = 0;

	out[0] = 0;
	if (ovs_keep_parse(spec, &p) < 0 || ovs_keep_plan(v, &p, mounted, nm, 0, &plan, &n) < 0) {
		snprintf(out, len, "error: %s", ovs_last_error());
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (plan[i].keep)
			used += snprintf(out + used, len - used, "%s%llu", used ? " " : "",
					 (unsigned long long)plan[i].id);
	free(plan);
}

static void expect_kept(struct ovs_volume *v, const char *spec, const char *want)
{
	char got[1024];

	kept(v, spec, NULL, 0, got, sizeof(got));
	CHECK(!strcmp(got, want), "%s: kept '%s', want '%s'", spec, got, want);
}

static void test_parse(void)
{
	static const char *const bad[] = {
		"", "daily", "daily=", "daily=-1", "daily=x", "dayly=3", "daily=3,",
		",daily=3", "daily=3,,weekly=1", "daily=3x", "daily=+3", "daily=1000000",
	};
	struct ovs_keep_policy p;

	CHECK(ovs_keep_parse("last=3,hourly=24,daily=7,weekly=4,monthly=12,yearly=2", &p) == 0,
	      "full spec: %s", ovs_last_error());
	CHECK(p.count[OVS_KEEP_LAST] == 3 && p.count[OVS_KEEP_HOURLY] == 24 &&
	      p.count[OVS_KEEP_DAILY] == 7 && p.count[OVS_KEEP_WEEKLY] == 4 &&
	      p.count[OVS_KEEP_MONTHLY] == 12 && p.count[OVS_KEEP_YEARLY] == 2, "counts");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(ovs_keep_parse(bad[i], &p) == -EINVAL, "'%s' accepted", bad[i]);
		CHECK(*ovs_last_error(), "'%s': no message", bad[i]);
	}
}

int main(void)
{
	struct ovs_volume v;
	int64_t t[64];
	size_t n = 0;
	char got[1024];

	test_parse();

	/* Every 6 hours from Jan 28 to Feb 3 2025: a month boundary.
	 * ids: Jan 28 00h=1 ... Feb 3 18h=28. */
	for (int64_t s = utc("2025-01-28T00:00:00"); s <= utc("2025-02-03T18:00:00");
	     s += 6 * 3600LL * 1000000000)
		t[n++] = s;
	volume_at(&v, t, n);
	CHECK(n == 28, "n %zu", n);
	expect_kept(&v, "daily=3", "20 24 28");			/* Feb 1, 2, 3 at 18h */
	expect_kept(&v, "daily=5", "12 16 20 24 28");		/* Jan 30, 31 too */
	expect_kept(&v, "monthly=2", "16 28");			/* Jan 31 18h, Feb 3 18h */
	expect_kept(&v, "last=3", "26 27 28");
	expect_kept(&v, "hourly=2", "27 28");
	expect_kept(&v, "last=1,daily=2", "24 28");
	/* ISO weeks: Jan 27-Feb 2 is 2025-W05, Feb 3 starts W06. */
	expect_kept(&v, "weekly=2", "24 28");
	expect_kept(&v, "weekly=5", "24 28");			/* no older week has one */
	expect_kept(&v, "yearly=5", "28");
	expect_kept(&v, "daily=0", "28");			/* the newest, always */

	/* Daily at noon from Dec 20 2025 to Jan 10 2026: a year boundary.
	 * Dec 20 = id 1, Dec 28 = 9, Dec 31 = 12, Jan 4 = 16, Jan 10 = 22. */
	n = 0;
	for (int64_t s = utc("2025-12-20T12:00:00"); s <= utc("2026-01-10T12:00:00");
	     s += 24 * 3600LL * 1000000000)
		t[n++] = s;
	volume_at(&v, t, n);
	CHECK(n == 22, "n %zu", n);
	/* W02 (Jan 5-11) -> Jan 10; W01 (Dec 29-Jan 4) -> Jan 4; W52 -> Dec 28. */
	expect_kept(&v, "weekly=3", "9 16 22");
	expect_kept(&v, "monthly=3", "12 22");
	expect_kept(&v, "yearly=2", "12 22");
	expect_kept(&v, "daily=2,weekly=2", "16 21 22");

	/* Gaps do not use up a count. */
	n = 0;
	t[n++] = utc("2024-11-15T08:00:00");	/* 1 */
	t[n++] = utc("2024-12-31T23:59:59");	/* 2 */
	t[n++] = utc("2025-01-01T00:00:00");	/* 3 */
	t[n++] = utc("2025-03-05T10:05:00");	/* 4 */
	t[n++] = utc("2025-03-05T10:45:00");	/* 5 */
	t[n++] = utc("2025-03-05T13:10:00");	/* 6 */
	volume_at(&v, t, n);
	expect_kept(&v, "monthly=2", "3 6");		/* March, then January: no Feb */
	expect_kept(&v, "monthly=3", "2 3 6");
	expect_kept(&v, "yearly=2", "2 6");
	expect_kept(&v, "hourly=2", "5 6");		/* 13h, then 10h: 11h, 12h had none */
	expect_kept(&v, "daily=2", "3 6");

	/* A rule judges and counts its own class only: a manual snapshot
	 * survives it, and does not use up its count. */
	snaps[4].cls = OVS_CLASS_MANUAL;
	expect_kept(&v, "last=2", "4 5 6");
	{
		struct ovs_keep_verdict *plan;
		struct ovs_keep_policy p;
		char why[128];

		ovs_keep_parse("last=1", &p);
		p.cls = OVS_CLASS_MANUAL;
		ovs_keep_plan(&v, &p, NULL, 0, 0, &plan, &n);
		ovs_keep_reasons_format(plan[0].reasons, why, sizeof(why));
		CHECK(!strcmp(why, "class") && plan[4].keep && !(plan[4].reasons & ~1u),
		      "--class manual: 1 kept as '%s', 5 by last", why);
		free(plan);
	}
	snaps[4].cls = OVS_CLASS_TIMELINE;

	/* space: oldest first until what is kept fits, never the newest, a
	 * held one or another class; counts first, then the space rule. */
	{
		uint64_t space[] = { 40, 30, 20, 10, 5, 0 };
		struct ovs_keep_verdict *plan;
		struct ovs_keep_policy p;
		char ids[64];
		size_t used;

		CHECK(ovs_keep_parse("space=20%", &p) == 0 && p.space_percent == 20, "space=20%%");
		CHECK(ovs_keep_parse("space=3G", &p) == 0 && p.space_bytes == 3ull << 30, "space=3G");
		CHECK(ovs_keep_parse("space=0", &p) < 0 && ovs_keep_parse("space=101%", &p) < 0 &&
		      ovs_keep_parse("space=1X", &p) < 0 && ovs_keep_parse("space=", &p) < 0,
		      "bad space values accepted");
		for (int round = 0; round < 3; round++) {
			const char *spec[] = { "space=60", "space=60", "last=3,space=60" };
			const char *want[] = { "3 4 5 6", "2 3 5 6", "4 5 6" };

			snaps[1].hold = round == 1;
			snaps[2].cls = round == 1 ? OVS_CLASS_MANUAL : OVS_CLASS_TIMELINE;
			ovs_keep_parse(spec[round], &p);
			ovs_keep_plan(&v, &p, NULL, 0, 0, &plan, &n);
			ovs_keep_limit_space(&p, plan, n, space, 60);
			used = 0;
			ids[0] = 0;
			for (size_t i = 0; i < n; i++)
				if (plan[i].keep)
					used += snprintf(ids + used, sizeof(ids) - used, "%s%llu",
							 used ? " " : "",
							 (unsigned long long)plan[i].id);
			CHECK(!strcmp(ids, want[round]), "%s round %d: kept '%s', want '%s'",
			      spec[round], round, ids, want[round]);
			free(plan);
		}
		snaps[1].hold = false;
		snaps[2].cls = OVS_CLASS_TIMELINE;
	}

	/* Held and mounted snapshots are kept whatever the policy says. */
	snaps[0].hold = true;
	expect_kept(&v, "last=1", "1 6");
	{
		uint64_t mounted[] = { 3 };

		kept(&v, "last=1", mounted, 1, got, sizeof(got));
		CHECK(!strcmp(got, "1 3 6"), "mounted: kept '%s'", got);
	}
	{
		struct ovs_keep_verdict *plan;
		struct ovs_keep_policy p;
		char why[128];

		ovs_keep_parse("last=1,daily=1", &p);
		ovs_keep_plan(&v, &p, NULL, 0, 4, &plan, &n);
		ovs_keep_reasons_format(plan[5].reasons, why, sizeof(why));
		CHECK(!strcmp(why, "last,daily,newest,mounted"), "reasons of 6: '%s'", why);
		ovs_keep_reasons_format(plan[0].reasons, why, sizeof(why));
		CHECK(!strcmp(why, "hold"), "reasons of 1: '%s'", why);
		CHECK(plan[3].keep && plan[4].keep && !plan[1].keep && !plan[2].keep,
		      "a kernel view of 4 keeps 4 and all newer");
		free(plan);
	}
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
