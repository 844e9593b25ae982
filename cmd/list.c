/*
 * ovsnap list — the registered volumes, or the snapshots of one volume, as
 * a table (libsmartcols, like lsblk and findmnt) or as JSON for tools and
 * completion scripts.
 */
#include <errno.h>
#include <inttypes.h>
#include <libsmartcols.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include <wctype.h>

#include "cmd.h"
#include "ovsnap-private.h"
#include "views.h"

static int opt_json, opt_noheadings, opt_parsable;

static struct poptOption list_options[] = {
	{ "json", 'J', POPT_ARG_NONE, &opt_json, 0,
	  "print one JSON object (the keys are documented in ovsnap-list(8))", NULL },
	{ "no-headings", 'H', POPT_ARG_NONE, &opt_noheadings, 0,
	  "print the table without its heading line", NULL },
	{ "parsable", 'p', POPT_ARG_NONE, &opt_parsable, 0,
	  "one tab between fields, no padding, sizes in bytes, times as in --json", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

static struct libscols_table *new_table(const char *const *cols, const int *flags)
{
	struct libscols_table *tb = scols_new_table();

	if (!tb)
		return NULL;
	/* set_cell escapes what the locale cannot show */
	scols_table_enable_noencoding(tb, 1);
	if (opt_noheadings)
		scols_table_enable_noheadings(tb, 1);
	/* like zfs list -Hp: raw cells, one tab between them */
	if (opt_parsable && (scols_table_enable_raw(tb, 1) < 0 ||
			     scols_table_set_column_separator(tb, "\t") < 0)) {
		scols_unref_table(tb);
		return NULL;
	}
	for (int i = 0; cols[i]; i++)
		if (!scols_table_new_column(tb, cols[i], 0, flags[i])) {
			scols_unref_table(tb);
			return NULL;
		}
	return tb;
}

/*
 * Every cell goes through here.  The table is printed without
 * libsmartcols' encoding (store folders are named with systemd-escape's
 * \xNN: show the real path, not \x5c for each backslash), and without it
 * libsmartcols' width computation never returns on a byte the locale
 * cannot show (any non-ASCII byte in the C locale, invalid UTF-8 in a
 * UTF-8 one).  So what the locale can show goes as it is, every other
 * byte and every control character as \xNN: a path or a description the
 * admin cannot type in this locale still lists.
 */
static int set_cell(struct libscols_line *ln, int col, const char *text)
{
	size_t len = strlen(text), n;
	char *buf = NULL, *out;
	mbstate_t st;
	wchar_t wc;
	int rc;

	/* an empty field is "-" in the table (a blank one would shift the
	 * columns for awk); --parsable leaves it empty between its tabs */
	if (!len && !opt_parsable)
		return scols_line_set_data(ln, col, "-") == 0 ? 0 : -ENOMEM;
	out = buf = malloc(len * 4 + 1);
	if (!buf)
		return -ENOMEM;
	memset(&st, 0, sizeof(st));
	for (size_t i = 0; i < len; i += n) {
		unsigned char c = (unsigned char)text[i];

		n = 1;
		if (c >= 0x20 && c < 0x7f) {
			*out++ = (char)c;
			continue;
		}
		if (c >= 0x80 && MB_CUR_MAX > 1) {
			n = mbrtowc(&wc, text + i, len - i, &st);
			if (n != (size_t)-1 && n != (size_t)-2 && n > 0 && iswprint((wint_t)wc)) {
				memcpy(out, text + i, n);
				out += n;
				continue;
			}
			memset(&st, 0, sizeof(st));
			n = 1;
		}
		out += sprintf(out, "\\x%02x", c);
	}
	*out = '\0';
	rc = scols_line_set_data(ln, col, buf) == 0 ? 0 : -ENOMEM;
	free(buf);
	return rc;
}

/* ---- all volumes ------------------------------------------------------------ */

static void warn_problems(struct ovs_volume **vols, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ovs_volume_problem(vols[i]))
			ovs_error("list: %s: %s", ovs_volume_source(vols[i]),
				  ovs_volume_problem(vols[i]));
}

static void print_volumes_json(struct ovs_volume **vols, size_t n)
{
	fputs("{\"volumes\": [", stdout);
	for (size_t i = 0; i < n; i++) {
		struct ovs_volume *v = vols[i];
		struct ovs_health h;

		fputs(i ? ", {\"source\": " : "{\"source\": ", stdout);
		ovs_json_string(ovs_volume_source(v));
		fputs(", \"store\": ", stdout);
		ovs_json_string(ovs_volume_store(v));
		/* "active": switched on (what activate --all restores);
		 * "state": whether that protection is in effect, as
		 * ovsnap status says. */
		ovs_volume_health(v, &h);
		if (ovs_volume_problem(v)) {
			fputs(", \"active\": null, \"snapshots\": null, \"error\": ", stdout);
			ovs_json_string(ovs_volume_problem(v));
		} else {
			printf(", \"active\": %s, \"snapshots\": %zu",
			       ovs_volume_active(v) ? "true" : "false", ovs_snapshot_count(v));
		}
		printf(", \"state\": \"%s\"", ovs_health_name(h.state));
		putchar('}');
	}
	fputs("]}\n", stdout);
}

/* on, off, or broken: switched on but not protecting (see ovsnap
 * status).  Not "active": that is the state of the newest snapshot. */
static const char *protection_cell(struct ovs_volume *v)
{
	struct ovs_health h;

	if (ovs_volume_problem(v))
		return "?";
	if (!ovs_volume_active(v))
		return "off";
	ovs_volume_health(v, &h);
	return h.state == OVS_HEALTH_BROKEN ? "broken" : "on";
}

static int print_volumes_table(struct ovs_volume **vols, size_t n)
{
	static const char *const cols[] = { "SOURCE", "STORE", "PROTECTION", "SNAPSHOTS", NULL };
	static const int flags[] = { 0, 0, 0, SCOLS_FL_RIGHT };
	struct libscols_table *tb;
	int rc = 0;

	/* no volumes, no table: like findmnt, an empty answer prints nothing */
	if (!n)
		return 0;
	tb = new_table(cols, flags);
	if (!tb)
		return -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		struct ovs_volume *v = vols[i];
		struct libscols_line *ln = scols_table_new_line(tb, NULL);
		char count[32];

		if (!ln) {
			rc = -ENOMEM;
			break;
		}
		snprintf(count, sizeof(count), "%zu", ovs_snapshot_count(v));
		rc = set_cell(ln, 0, ovs_volume_source(v));
		if (!rc)
			rc = set_cell(ln, 1, ovs_volume_store(v));
		if (!rc)
			rc = set_cell(ln, 2, protection_cell(v));
		if (!rc)
			rc = set_cell(ln, 3, ovs_volume_problem(v) ? "?" : count);
	}
	if (!rc)
		scols_print_table(tb);
	scols_unref_table(tb);
	return rc;
}

static int list_volumes(void)
{
	struct ovs_volume **vols;
	size_t n;
	int rc;

	rc = ovs_volume_list(&vols, &n);
	if (rc < 0) {
		ovs_error_lib(rc, "list");
		return EXIT_FAIL;
	}
	if (opt_json)
		print_volumes_json(vols, n);
	else
		rc = print_volumes_table(vols, n);
	if (rc < 0)
		ovs_error("list: %s", strerror(-rc));
	warn_problems(vols, n);
	for (size_t i = 0; i < n; i++)
		if (ovs_volume_problem(vols[i]))
			rc = -EUCLEAN;
	ovs_volume_list_free(vols, n);
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}

/* ---- one volume -------------------------------------------------------------- */

/* What dropping the snapshot would free (its layer's own extents). */
static int snapshot_space(struct ovs_volume *v, uint64_t id, uint64_t *bytes)
{
	return ovs_snapshot_space(v, id, bytes);
}

/* 1024-based with one decimal, as lsblk and du -h: "0B", "4K", "1.5G". */
static void format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "BKMGTPE";
	double v = bytes;
	int u = 0;

	while (v >= 1024 && units[u + 1]) {
		v /= 1024;
		u++;
	}
	if (u == 0 || v >= 10)
		snprintf(buf, len, "%.0f%c", v, units[u]);
	else
		snprintf(buf, len, "%.1f%c", v, units[u]);
}

/* Where a snapshot is mounted as a view: "/a, /b (kernel)" or "". */
static int set_mounts_cell(struct libscols_line *ln, int col, uint64_t id,
			   const struct ovs_view_mount *views, size_t nviews)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	bool first = true;
	int rc;

	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < nviews; i++) {
		if (views[i].id != id)
			continue;
		fprintf(f, "%s%s%s", first ? "" : ", ", views[i].target,
			views[i].kernel ? " (kernel)" : "");
		first = false;
	}
	fclose(f);
	rc = set_cell(ln, col, text ? text : "");
	free(text);
	return rc;
}

/* Text users wrote (descriptions, user data: UTF-8 without control
 * characters): set_cell shows what the locale cannot as \xNN. */
static int set_user_text_cell(struct libscols_line *ln, int col, const char *text)
{
	return set_cell(ln, col, text ? text : "");
}

/* "key=value, key2=value2" (list --json is the exact form). */
static int set_userdata_cell(struct libscols_line *ln, int col, const struct ovs_snapshot *s)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int rc;

	if (!f)
		return -ENOMEM;
	for (unsigned u = 0; u < s->nuserdata; u++) {
		fprintf(f, "%s%s=", u ? ", " : "", s->userdata[u].key);
		fputs(s->userdata[u].value, f);
	}
	fclose(f);
	rc = set_cell(ln, col, text ? text : "");
	free(text);
	return rc;
}

static void print_mounts_json(uint64_t id, const struct ovs_view_mount *views, size_t nviews)
{
	bool first = true;

	fputs(", \"mounts\": [", stdout);
	for (size_t i = 0; i < nviews; i++) {
		if (views[i].id != id)
			continue;
		fputs(first ? "{\"target\": " : ", {\"target\": ", stdout);
		ovs_json_string(views[i].target);
		printf(", \"kernel\": %s}", views[i].kernel ? "true" : "false");
		first = false;
	}
	putchar(']');
}

static int print_snapshots_json(struct ovs_volume *v, const struct ovs_view_mount *views,
				size_t nviews)
{
	size_t n = ovs_snapshot_count(v);

	fputs("{\"source\": ", stdout);
	ovs_json_string(ovs_volume_source(v));
	fputs(", \"store\": ", stdout);
	ovs_json_string(ovs_volume_store(v));
	fputs(", \"fstype\": ", stdout);
	ovs_json_string(ovs_volume_fstype(v));
	fputs(", \"fsuuid\": ", stdout);
	ovs_json_string(ovs_volume_fsuuid(v));
	printf(", \"active\": %s, \"snapshots\": [", ovs_volume_active(v) ? "true" : "false");
	for (size_t i = 0; i < n; i++) {
		const struct ovs_snapshot *s = ovs_snapshot_at(v, i);
		char created[64], upper[PATH_MAX];
		uint64_t space;
		int rc = ovs_snapshot_upper(v, s->id, upper, sizeof(upper));

		if (rc < 0)
			return rc;
		ovs_format_time_utc(s->created_ns, created, sizeof(created));
		printf("%s{\"id\": %" PRIu64 ", \"name\": ", i ? ", " : "", s->id);
		if (s->name[0])
			ovs_json_string(s->name);
		else
			fputs("null", stdout);
		printf(", \"created\": \"%s\", \"upper\": ", created);
		ovs_json_string(upper);
		fputs(", \"state\": ", stdout);
		ovs_json_string(ovs_snap_state_name(s->state));
		printf(", \"hold\": %s, \"class\": \"%s\", \"pre\": ",
		       s->hold ? "true" : "false", ovs_snap_class_name(s->cls));
		if (s->pre)
			printf("%" PRIu64, s->pre);
		else
			fputs("null", stdout);
		fputs(", \"description\": ", stdout);
		if (s->description[0])
			ovs_json_string(s->description);
		else
			fputs("null", stdout);
		fputs(", \"userdata\": {", stdout);
		for (unsigned u = 0; u < s->nuserdata; u++) {
			fputs(u ? ", " : "", stdout);
			ovs_json_string(s->userdata[u].key);
			fputs(": ", stdout);
			ovs_json_string(s->userdata[u].value);
		}
		putchar('}');
		rc = snapshot_space(v, s->id, &space);
		if (rc < 0)
			return rc;
		printf(", \"space\": %" PRIu64, space);
		print_mounts_json(s->id, views, nviews);
		putchar('}');
	}
	fputs("]}\n", stdout);
	return 0;
}

static int print_snapshots_table(struct ovs_volume *v, const struct ovs_view_mount *views,
				 size_t nviews)
{
	static const char *const cols[] = { "ID", "NAME", "CREATED", "CLASS", "STATE", "SPACE",
					    "MOUNTS", "DESCRIPTION", "USERDATA", NULL };
	static const int flags[] = { SCOLS_FL_RIGHT, 0, 0, 0, 0, SCOLS_FL_RIGHT, SCOLS_FL_WRAP,
				     0, 0 };
	size_t n = ovs_snapshot_count(v);
	struct libscols_table *tb;
	int rc = 0;

	/* the heading even without snapshots (the volume exists), which
	 * libsmartcols does not print for a table without lines */
	if (!n) {
		for (int i = 0; cols[i] && !opt_noheadings; i++)
			printf("%s%s", cols[i], cols[i + 1] ? (opt_parsable ? "\t" : " ") : "\n");
		return 0;
	}
	tb = new_table(cols, flags);
	if (!tb)
		return -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		const struct ovs_snapshot *s = ovs_snapshot_at(v, i);
		struct libscols_line *ln = scols_table_new_line(tb, NULL);
		char id[32], created[64], state[32], size[32], cls[48];
		uint64_t space;

		if (!ln) {
			rc = -ENOMEM;
			break;
		}
		snprintf(id, sizeof(id), "%" PRIu64, s->id);
		if (opt_parsable)
			ovs_format_time_utc(s->created_ns, created, sizeof(created));
		else
			ovs_format_time_local(s->created_ns, created, sizeof(created));
		rc = set_cell(ln, 0, id);
		if (!rc)
			rc = set_cell(ln, 1, s->name);
		if (!rc)
			rc = set_cell(ln, 2, created);
		/* a post snapshot names its pre one: "post:3" */
		snprintf(cls, sizeof(cls), s->pre ? "%s:%" PRIu64 : "%s", ovs_snap_class_name(s->cls),
			 s->pre);
		if (!rc)
			rc = set_cell(ln, 3, cls);
		snprintf(state, sizeof(state), "%s%s", ovs_snap_state_name(s->state),
			 s->hold ? ",held" : "");
		if (!rc)
			rc = set_cell(ln, 4, state);
		if (!rc)
			rc = snapshot_space(v, s->id, &space);
		if (!rc) {
			if (opt_parsable)
				snprintf(size, sizeof(size), "%" PRIu64, space);
			else
				format_size(space, size, sizeof(size));
			rc = set_cell(ln, 5, size);
		}
		if (!rc)
			rc = set_mounts_cell(ln, 6, s->id, views, nviews);
		if (!rc)
			rc = set_user_text_cell(ln, 7, s->description);
		if (!rc)
			rc = set_userdata_cell(ln, 8, s);
	}
	if (!rc)
		scols_print_table(tb);
	scols_unref_table(tb);
	return rc;
}

static int list_snapshots(const char *arg)
{
	struct ovs_view_mount *views = NULL;
	size_t nviews = 0;
	struct ovs_volume *v;
	char *src;
	int rc;

	src = ovs_resolve_source("list", arg);
	if (!src)
		return EXIT_FAIL;
	rc = ovs_volume_open(src, &v);
	free(src);
	if (rc < 0) {
		ovs_error_lib(rc, "list %s", arg);
		return EXIT_FAIL;
	}
	rc = ovs_volume_views(v, &views, &nviews);
	if (rc == 0)
		rc = opt_json ? print_snapshots_json(v, views, nviews) :
				print_snapshots_table(v, views, nviews);
	if (rc < 0)
		ovs_error_lib(rc, "list %s", arg);
	ovs_views_free(views, nviews);
	ovs_volume_unref(v);
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}

int cmd_list(int argc, const char **argv)
{
	const char **args;
	poptContext pc;
	int status, nargs;

	/* the width of descriptions in the table: what the terminal shows */
	setlocale(LC_CTYPE, "");
	pc = ovs_popt_parse("list", argc, argv, list_options, "[SRC]", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "list", 0, 1, &nargs, &status);
	if (status == EXIT_OK && opt_json && (opt_noheadings || opt_parsable)) {
		ovs_error("list: --json and --%s do not go together",
			  opt_parsable ? "parsable" : "no-headings");
		fprintf(stderr, "Try '%s list --help' for more information.\n", ovs_progname);
		status = EXIT_USAGE;
	}
	if (status == EXIT_OK)
		status = nargs ? list_snapshots(args[0]) : list_volumes();
	poptFreeContext(pc);
	return status;
}
