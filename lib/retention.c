/*
 * Retention policies (retention.h): restic's --keep-* algorithm over the
 * snapshots' creation times, in UTC.
 *
 * Walking the snapshots newest first, each rule with some count left keeps
 * a snapshot whose period differs from the period of the last snapshot
 * that rule kept: that is the newest snapshot of a new period, and periods
 * with no snapshot are never seen, so they do not use up the count.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "libovsnap.h"
#include "merge.h"
#include "ovsnap-private.h"
#include "retention.h"
#include "views.h"

static const char *const rule_names[OVS_KEEP_NRULES] = {
	[OVS_KEEP_LAST] = "last",
	[OVS_KEEP_HOURLY] = "hourly",
	[OVS_KEEP_DAILY] = "daily",
	[OVS_KEEP_WEEKLY] = "weekly",
	[OVS_KEEP_MONTHLY] = "monthly",
	[OVS_KEEP_YEARLY] = "yearly",
};

/* "20%" or "10G" (1024-based K, M, G, T; plain bytes). */
static int parse_space(const char *v, struct ovs_keep_policy *p)
{
	static const char units[] = "KMGT";
	unsigned long long n;
	char *end;

	if (*v < '0' || *v > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || n == 0)
		return -EINVAL;
	if (!strcmp(end, "%")) {
		if (n > 100)
			return -EINVAL;
		p->space_percent = n;
		p->space_bytes = 0;
		return 0;
	}
	if (*end) {
		const char *u = strchr(units, *end);

		if (!u || end[1])
			return -EINVAL;
		for (int i = 0; i <= u - units; i++) {
			if (n > UINT64_MAX / 1024)
				return -EINVAL;
			n *= 1024;
		}
	}
	p->space_bytes = n;
	p->space_percent = 0;
	return 0;
}

int ovs_keep_parse(const char *spec, struct ovs_keep_policy *p)
{
	const char *s = spec;

	memset(p, 0, sizeof(*p));
	p->cls = OVS_CLASS_TIMELINE;
	if (!spec || !*spec)
		return ovs_err(EINVAL, "empty retention policy");
	while (*s) {
		const char *comma = strchr(s, ','), *eq;
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		char item[64], *end;
		unsigned long n;
		int r;

		if (len == 0 || len >= sizeof(item))
			return ovs_err(EINVAL, "retention policy '%s': bad item", spec);
		memcpy(item, s, len);
		item[len] = 0;
		eq = strchr(item, '=');
		if (!eq)
			return ovs_err(EINVAL, "retention policy '%s': '%s' is not RULE=N", spec, item);
		if (eq - item == 5 && !strncmp(item, "space", 5)) {
			if (parse_space(eq + 1, p) < 0)
				return ovs_err(EINVAL, "retention policy '%s': '%s' needs a percentage "
					       "1%%..100%% or a size (bytes, or with K, M, G, T)",
					       spec, item);
			goto next;
		}
		for (r = 0; r < OVS_KEEP_NRULES; r++)
			if (strlen(rule_names[r]) == (size_t)(eq - item) &&
			    !strncmp(item, rule_names[r], eq - item))
				break;
		if (r == OVS_KEEP_NRULES)
			return ovs_err(EINVAL, "retention policy '%s': unknown rule '%.*s' (last, "
				       "hourly, daily, weekly, monthly, yearly, space)", spec,
				       (int)(eq - item), item);
		errno = 0;
		n = strtoul(eq + 1, &end, 10);
		if (!eq[1] || *end || errno || eq[1] == '-' || eq[1] == '+' || n > 100000)
			return ovs_err(EINVAL, "retention policy '%s': '%s' needs a count 0..100000",
				       spec, item);
		p->count[r] = n;
next:
		s += len;
		if (*s == ',') {
			s++;
			if (!*s)
				return ovs_err(EINVAL, "retention policy '%s': trailing comma", spec);
		}
	}
	return 0;
}

/* The period of t under a rule, as a number that differs between periods. */
static int64_t period_of(int rule, int64_t ns, uint64_t id)
{
	time_t t = ns / 1000000000;
	struct tm tm;
	char week[16];

	if (ns < 0 && ns % 1000000000)
		t--;
	gmtime_r(&t, &tm);
	switch (rule) {
	case OVS_KEEP_HOURLY:
		return ((int64_t)(tm.tm_year + 1900) * 400 + tm.tm_yday) * 24 + tm.tm_hour;
	case OVS_KEEP_DAILY:
		return (int64_t)(tm.tm_year + 1900) * 400 + tm.tm_yday;
	case OVS_KEEP_WEEKLY:
		/* ISO 8601 week-based year and week: %G%V */
		strftime(week, sizeof(week), "%G%V", &tm);
		return strtoll(week, NULL, 10);
	case OVS_KEEP_MONTHLY:
		return (int64_t)(tm.tm_year + 1900) * 12 + tm.tm_mon;
	case OVS_KEEP_YEARLY:
		return tm.tm_year + 1900;
	default:	/* last: every snapshot is its own period */
		return (int64_t)id;
	}
}

int ovs_keep_plan(const struct ovs_volume *v, const struct ovs_keep_policy *p,
		  const uint64_t *mounted, size_t nmounted, uint64_t kernel_from,
		  struct ovs_keep_verdict **plan, size_t *n)
{
	size_t count = ovs_snapshot_count(v), i;
	struct ovs_keep_verdict *out;
	unsigned left[OVS_KEEP_NRULES];
	int64_t last[OVS_KEEP_NRULES];
	bool seen[OVS_KEEP_NRULES] = { false };
	bool kernel_seen = false;

	out = calloc(count ? count : 1, sizeof(*out));
	if (!out)
		return ovs_err(ENOMEM, "retention: out of memory");
	memcpy(left, p->count, sizeof(left));

	/* Oldest first for the kernel views: kernel_from and all newer. */
	for (i = 0; i < count; i++) {
		const struct ovs_snapshot *s = ovs_snapshot_at(v, i);

		out[i].id = s->id;
		if (kernel_from && s->id == kernel_from)
			kernel_seen = true;
		if (kernel_seen)
			out[i].reasons |= OVS_KEEP_BY_VIEW;
		for (size_t m = 0; m < nmounted; m++)
			if (mounted[m] == s->id)
				out[i].reasons |= OVS_KEEP_BY_VIEW;
		if (s->hold)
			out[i].reasons |= OVS_KEEP_BY_HOLD;
		if (s->cls != p->cls)
			out[i].reasons |= OVS_KEEP_BY_CLASS;
	}
	if (count)
		out[count - 1].reasons |= OVS_KEEP_BY_NEWEST;

	/* The rules, newest first. */
	for (i = count; i-- > 0;) {
		const struct ovs_snapshot *s = ovs_snapshot_at(v, i);

		/* a rule counts only the snapshots of its class */
		if (s->cls != p->cls)
			continue;
		for (int r = 0; r < OVS_KEEP_NRULES; r++) {
			int64_t per;

			if (!left[r])
				continue;
			per = period_of(r, s->created_ns, s->id);
			if (seen[r] && per == last[r])
				continue;
			seen[r] = true;
			last[r] = per;
			left[r]--;
			out[i].reasons |= 1u << r;
		}
	}
	/* A space rule alone keeps what fits (ovs_keep_limit_space). */
	if (p->space_percent || p->space_bytes) {
		bool counts = false;

		for (int r = 0; r < OVS_KEEP_NRULES; r++)
			counts |= p->count[r] != 0;
		for (i = 0; i < count && !counts; i++)
			if (ovs_snapshot_at(v, i)->cls == p->cls)
				out[i].reasons |= OVS_KEEP_BY_SPACE;
	}
	for (i = 0; i < count; i++)
		out[i].keep = out[i].reasons != 0;
	*plan = out;
	*n = count;
	return 0;
}

static int plan_space(const struct ovs_volume *v, const struct ovs_keep_policy *p,
		      struct ovs_keep_verdict *plan, size_t n);

int ovs_keep_plan_volume(const struct ovs_volume *v, const struct ovs_keep_policy *p,
			 struct ovs_keep_verdict **plan, size_t *n)
{
	struct ovs_view_mount *views = NULL;
	size_t nviews = 0, i, nm = 0, count = ovs_snapshot_count(v);
	uint64_t *mounted, kernel_from = 0;
	int rc;

	rc = ovs_volume_views(v, &views, &nviews);
	if (rc < 0)
		return rc;
	mounted = calloc(nviews ? nviews : 1, sizeof(*mounted));
	if (!mounted) {
		ovs_views_free(views, nviews);
		return ovs_err(ENOMEM, "retention: out of memory");
	}
	for (i = 0; i < nviews; i++)
		mounted[nm++] = views[i].id;
	/* The oldest snapshot a kernel view uses (its layer and all newer). */
	for (size_t k = 0; k < count && !kernel_from; k++)
		for (i = 0; i < nviews; i++)
			if (views[i].kernel && views[i].id == ovs_snapshot_at(v, k)->id)
				kernel_from = views[i].id;
	rc = ovs_keep_plan(v, p, mounted, nm, kernel_from, plan, n);
	free(mounted);
	ovs_views_free(views, nviews);
	if (rc == 0 && (p->space_percent || p->space_bytes)) {
		rc = plan_space(v, p, *plan, *n);
		if (rc < 0)
			free(*plan);
	}
	return rc;
}

void ovs_keep_limit_space(const struct ovs_keep_policy *p, struct ovs_keep_verdict *plan,
			  size_t n, const uint64_t *space, uint64_t limit)
{
	const unsigned fixed = OVS_KEEP_BY_NEWEST | OVS_KEEP_BY_HOLD | OVS_KEEP_BY_VIEW |
			       OVS_KEEP_BY_CLASS;
	uint64_t used = 0;

	(void)p;
	for (size_t i = 0; i < n; i++)
		if (plan[i].keep)
			used += space[i];
	for (size_t i = 0; i < n && used > limit; i++) {
		if (!plan[i].keep || (plan[i].reasons & fixed))
			continue;
		plan[i].keep = false;
		plan[i].reasons = OVS_DROP_BY_SPACE;
		used -= space[i];
	}
}

/* The space rule of a volume: each layer's own space, and the size of
 * the filesystem of the store for a percentage. */
static int plan_space(const struct ovs_volume *v, const struct ovs_keep_policy *p,
		      struct ovs_keep_verdict *plan, size_t n)
{
	uint64_t *space = calloc(n ? n : 1, sizeof(*space)), limit = p->space_bytes;
	int rc = 0;

	if (!space)
		return ovs_err(ENOMEM, "retention: out of memory");
	if (p->space_percent) {
		struct statvfs st;

		if (fstatvfs(ovs_volume_dirfd(v), &st) < 0) {
			rc = ovs_err(errno, "%s: statvfs: %m", ovs_volume_store(v));
			goto out;
		}
		limit = (uint64_t)st.f_blocks * st.f_frsize / 100 * p->space_percent;
	}
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = ovs_snapshot_space(v, plan[i].id, &space[i]);
	if (rc == 0)
		ovs_keep_limit_space(p, plan, n, space, limit);
out:
	free(space);
	return rc;
}

void ovs_keep_reasons_format(unsigned reasons, char *buf, size_t len)
{
	static const struct {
		unsigned bit;
		const char *name;
	} extra[] = {
		{ OVS_KEEP_BY_NEWEST, "newest" },
		{ OVS_KEEP_BY_HOLD, "hold" },
		{ OVS_KEEP_BY_VIEW, "mounted" },
		{ OVS_KEEP_BY_CLASS, "class" },
		{ OVS_KEEP_BY_SPACE, "space" },
	};
	size_t used = 0;

	if (len)
		buf[0] = 0;
	for (int r = 0; r < OVS_KEEP_NRULES; r++)
		if (reasons & (1u << r))
			used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
					 used ? "," : "", rule_names[r]);
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
		if (reasons & extra[i].bit)
			used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
					 used ? "," : "", extra[i].name);
}

int ovs_keep_apply(struct ovs_volume *v, const struct ovs_keep_verdict *plan, size_t n,
		   ovs_progress_fn progress, void *arg, size_t *dropped)
{
	*dropped = 0;
	for (size_t i = 0; i < n; i++) {
		int rc;

		if (plan[i].keep)
			continue;
		rc = ovs_drop_snapshot(v, plan[i].id, progress, arg);
		if (rc < 0)
			return rc;
		(*dropped)++;
	}
	return 0;
}
