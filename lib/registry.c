/*
 * The registry of a volume's snapshots: a small versioned text file that is
 * parsed strictly (a hand-edited or truncated file is refused with its line
 * number, never half-used) and only ever replaced atomically.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "ovsnap-private.h"
#include "preserve.h"

const char *ovs_snap_state_name(enum ovs_snap_state s)
{
	switch (s) {
	case OVS_SNAP_ACTIVE:
		return "active";
	case OVS_SNAP_FROZEN:
		return "frozen";
	}
	return "?";
}

static const char *const class_names[OVS_CLASS_COUNT] = {
	[OVS_CLASS_MANUAL] = "manual",
	[OVS_CLASS_TIMELINE] = "timeline",
	[OVS_CLASS_PRE] = "pre",
	[OVS_CLASS_POST] = "post",
};

const char *ovs_snap_class_name(enum ovs_snap_class c)
{
	return (unsigned)c < OVS_CLASS_COUNT ? class_names[c] : "?";
}

int ovs_snap_class_parse(const char *name, enum ovs_snap_class *out)
{
	for (int c = 0; c < OVS_CLASS_COUNT; c++)
		if (strcmp(name, class_names[c]) == 0) {
			*out = c;
			return 0;
		}
	return ovs_err(EINVAL, "unknown class '%s' (manual, timeline, pre, post)", name);
}

/*
 * Text users give (descriptions, user data values): valid UTF-8 without
 * control characters (C0, DEL, C1), so that it stays one line in the
 * registry, in tables and in terminals.  Returns the reason or NULL.
 */
static const char *text_problem(const char *text, size_t max)
{
	const unsigned char *p = (const unsigned char *)text;

	if (strlen(text) > max)
		return "too long";
	while (*p) {
		unsigned cp, len;

		if (*p < 0x80) {
			if (*p < 0x20 || *p == 0x7f)
				return "a control character (newline, tab...)";
			p++;
			continue;
		}
		if ((*p & 0xe0) == 0xc0) {
			cp = *p & 0x1f;
			len = 2;
		} else if ((*p & 0xf0) == 0xe0) {
			cp = *p & 0x0f;
			len = 3;
		} else if ((*p & 0xf8) == 0xf0) {
			cp = *p & 0x07;
			len = 4;
		} else {
			return "not UTF-8";
		}
		for (unsigned i = 1; i < len; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return "not UTF-8";
			cp = cp << 6 | (p[i] & 0x3f);
		}
		/* overlong forms, surrogates, beyond Unicode */
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) ||
		    cp > 0x10ffff)
			return "not UTF-8";
		if (cp >= 0x80 && cp <= 0x9f)
			return "a control character";
		p += len;
	}
	return NULL;
}

int ovs_description_check(const char *text)
{
	const char *why = text_problem(text, OVS_DESCRIPTION_MAX);

	if (why)
		return ovs_err(EINVAL, "bad description: %s (at most %d bytes of UTF-8 text "
			       "on one line)", why, OVS_DESCRIPTION_MAX);
	return 0;
}

static bool userdata_key_valid(const char *key, size_t len)
{
	if (len == 0 || len > OVS_USERDATA_KEY_MAX || key[0] == '.' || key[0] == ':' ||
	    key[0] == '-')
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = key[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' || c == '-'))
			return false;
	}
	return true;
}

int ovs_userdata_parse(const char *arg, struct ovs_userdata *out)
{
	const char *eq = strchr(arg, '=');
	const char *why;

	memset(out, 0, sizeof(*out));
	if (!eq)
		return ovs_err(EINVAL, "bad user data '%s': not KEY=VALUE", arg);
	if (!userdata_key_valid(arg, eq - arg))
		return ovs_err(EINVAL, "bad user data key '%.*s': use 1 to %d letters, digits, "
			       "'_', '.', ':' or '-', not starting with '.', ':' or '-'",
			       (int)(eq - arg), arg, OVS_USERDATA_KEY_MAX);
	why = text_problem(eq + 1, OVS_USERDATA_VALUE_MAX);
	if (why)
		return ovs_err(EINVAL, "bad user data value for %.*s: %s (at most %d bytes of "
			       "UTF-8 text on one line)", (int)(eq - arg), arg, why,
			       OVS_USERDATA_VALUE_MAX);
	memcpy(out->key, arg, eq - arg);
	strcpy(out->value, eq + 1);
	return 0;
}

bool ovs_snapshot_name_valid(const char *name)
{
	size_t n = strlen(name);
	bool digits_only = true;

	if (n == 0 || n > OVS_NAME_MAX || name[0] == '.' || name[0] == '-')
		return false;
	for (const char *p = name; *p; p++) {
		char c = *p;

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
		if (c < '0' || c > '9')
			digits_only = false;
	}
	/* an all-digit name would read as an id */
	return !digits_only;
}

void ovs_registry_clear(struct ovs_registry *reg)
{
	free(reg->source);
	free(reg->snaps);
	memset(reg, 0, sizeof(*reg));
}

int ovs_registry_copy(struct ovs_registry *dst, const struct ovs_registry *src)
{
	*dst = *src;
	dst->source = NULL;
	dst->snaps = NULL;
	if (src->source && !(dst->source = strdup(src->source)))
		goto nomem;
	if (src->nsnaps) {
		/* one spare slot for add_snapshot */
		dst->snaps = calloc(src->nsnaps + 1, sizeof(*dst->snaps));
		if (!dst->snaps)
			goto nomem;
		memcpy(dst->snaps, src->snaps, src->nsnaps * sizeof(*dst->snaps));
	}
	return 0;
nomem:
	ovs_registry_clear(dst);
	return ovs_err(ENOMEM, "out of memory");
}

/* ---- text escaping of the source path ------------------------------------ */

static bool needs_escape(unsigned char c)
{
	return c < 0x20 || c == 0x7f || c == '\\';
}

static char *escape_value(const char *s)
{
	char *out = malloc(strlen(s) * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		if (needs_escape(*s))
			o += sprintf(o, "\\x%02x", (unsigned char)*s);
		else
			*o++ = *s;
	}
	*o = '\0';
	return out;
}

static int hexdigit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* In place; -EINVAL on a malformed escape or a byte that should have been
 * escaped. */
static int unescape_value(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (*s == '\\') {
			int hi, lo;

			if (s[1] != 'x' || (hi = hexdigit(s[2])) < 0 || (lo = hexdigit(s[3])) < 0)
				return -EINVAL;
			char c = (char)(hi << 4 | lo);

			if (!needs_escape(c) || c == '\0')
				return -EINVAL;
			*o++ = c;
			s += 3;
		} else if (needs_escape(*s)) {
			return -EINVAL;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
	return 0;
}

/* ---- the parser ------------------------------------------------------------ */

struct parser {
	const char *where;
	unsigned line;
	unsigned version;
	struct ovs_registry *reg;
	unsigned seen;		/* bit per header key */
	bool in_snapshots;
	size_t alloc;
};

enum {
	KEY_SOURCE, KEY_FSTYPE, KEY_FSUUID, KEY_CLONE, KEY_NEXT_ID, KEY_ACTIVE,
	KEY_DEACTIVATED_NS, KEY_ACTIVATED_NS, NKEYS
};
/* Keys added after version 1 was in use: a registry written before them
 * lacks them and reads as their zero value (activated-ns 0: unknown, so
 * fsck takes every change since the deactivation as unprotected). */
#define OPTIONAL_KEYS	(1u << KEY_ACTIVATED_NS)

static const char *const header_keys[NKEYS] = {
	[KEY_SOURCE] = "source",
	[KEY_FSTYPE] = "fstype",
	[KEY_FSUUID] = "fsuuid",
	[KEY_CLONE] = "clone",
	[KEY_NEXT_ID] = "next-id",
	[KEY_ACTIVE] = "active",
	[KEY_DEACTIVATED_NS] = "deactivated-ns",
	[KEY_ACTIVATED_NS] = "activated-ns",
};

static int bad(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct parser *p, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ovs_err(EUCLEAN, "registry %s line %u: %s", p->where, p->line, what);
}

static int parse_bool(struct parser *p, const char *key, const char *val, bool *out)
{
	if (strcmp(val, "0") == 0)
		*out = false;
	else if (strcmp(val, "1") == 0)
		*out = true;
	else
		return bad(p, "%s must be 0 or 1, not '%s'", key, val);
	return 0;
}

static int parse_num(struct parser *p, const char *key, const char *val, uint64_t *out)
{
	if (ovs_parse_u64(val, out) < 0)
		return bad(p, "bad number '%s' for %s", val, key);
	return 0;
}

static int parse_header(struct parser *p, char *key, char *val)
{
	struct ovs_registry *r = p->reg;
	uint64_t num;
	int k, rc = 0;

	for (k = 0; k < NKEYS; k++)
		if (strcmp(key, header_keys[k]) == 0)
			break;
	if (k == NKEYS)
		return bad(p, "unknown key '%s'", key);
	if (p->in_snapshots)
		return bad(p, "'%s' after the snapshots", key);
	if (p->seen & (1u << k))
		return bad(p, "duplicate key '%s'", key);
	p->seen |= 1u << k;
	if (!val)
		return bad(p, "%s without a value", key);

	switch (k) {
	case KEY_SOURCE:
		if (unescape_value(val) < 0)
			return bad(p, "bad escape in the source path");
		if (val[0] != '/')
			return bad(p, "source is not an absolute path");
		r->source = strdup(val);
		if (!r->source)
			return ovs_err(ENOMEM, "out of memory");
		break;
	case KEY_FSTYPE:
	case KEY_FSUUID: {
		char *dst = k == KEY_FSTYPE ? r->fstype : r->fsuuid;
		size_t max = k == KEY_FSTYPE ? sizeof(r->fstype) : sizeof(r->fsuuid);

		if (strlen(val) >= max || strpbrk(val, " \\"))
			return bad(p, "bad %s '%s'", key, val);
		strcpy(dst, val);
		break;
	}
	case KEY_CLONE:
		rc = parse_bool(p, key, val, &r->can_clone);
		break;
	case KEY_ACTIVE:
		rc = parse_bool(p, key, val, &r->active);
		break;
	case KEY_NEXT_ID:
		rc = parse_num(p, key, val, &r->next_id);
		if (!rc && r->next_id == 0)
			rc = bad(p, "next-id must be at least 1");
		break;
	case KEY_DEACTIVATED_NS:
	case KEY_ACTIVATED_NS:
		rc = parse_num(p, key, val, &num);
		if (!rc && num > INT64_MAX)
			rc = bad(p, "bad number '%s' for %s", val, key);
		if (k == KEY_DEACTIVATED_NS)
			r->deactivated_ns = (int64_t)num;
		else
			r->activated_ns = (int64_t)num;
		break;
	}
	return rc;
}

static int parse_snapshot(struct parser *p, char *rest)
{
	struct ovs_registry *r = p->reg;
	struct ovs_snapshot s = { 0 };
	char *f[7];
	int nf = 0;
	uint64_t num;

	if ((p->seen | OPTIONAL_KEYS) != (1u << NKEYS) - 1) {
		for (int k = 0; k < NKEYS; k++)
			if (!((p->seen | OPTIONAL_KEYS) & (1u << k)))
				return bad(p, "snapshot before the header key '%s'", header_keys[k]);
	}
	p->in_snapshots = true;
	/* exactly one space between fields: the file is only ever written
	 * by ovs_registry_format, anything else was edited by hand */
	for (char *tok = rest; tok && nf < 7;) {
		char *sp = strchr(tok, ' ');

		if (sp)
			*sp++ = '\0';
		if (!*tok)
			return bad(p, "empty field in a snapshot line");
		f[nf++] = tok;
		tok = sp;
	}
	if (p->version == 1 && nf != 5)
		return bad(p, "a snapshot needs 5 fields (id name created state hold), found %d", nf);
	if (p->version > 1 && nf != 6)
		return bad(p, "a snapshot needs 6 fields (id name created state hold class), "
			   "found %d", nf);

	if (parse_num(p, "the snapshot id", f[0], &s.id) < 0)
		return -EUCLEAN;
	if (s.id == 0)
		return bad(p, "snapshot id 0");
	if (r->nsnaps && s.id == r->snaps[r->nsnaps - 1].id)
		return bad(p, "duplicate snapshot id %llu", (unsigned long long)s.id);
	if (r->nsnaps && s.id < r->snaps[r->nsnaps - 1].id)
		return bad(p, "snapshot id %llu out of order (after %llu)",
			   (unsigned long long)s.id,
			   (unsigned long long)r->snaps[r->nsnaps - 1].id);
	if (s.id >= r->next_id)
		return bad(p, "snapshot id %llu is not below next-id %llu",
			   (unsigned long long)s.id, (unsigned long long)r->next_id);

	if (strcmp(f[1], "-") != 0) {
		if (!ovs_snapshot_name_valid(f[1]))
			return bad(p, "bad snapshot name '%s'", f[1]);
		for (size_t i = 0; i < r->nsnaps; i++)
			if (strcmp(r->snaps[i].name, f[1]) == 0)
				return bad(p, "duplicate snapshot name '%s'", f[1]);
		strcpy(s.name, f[1]);
	}

	if (parse_num(p, "the creation time", f[2], &num) < 0)
		return -EUCLEAN;
	if (num > INT64_MAX)
		return bad(p, "bad number '%s' for the creation time", f[2]);
	s.created_ns = (int64_t)num;

	if (strcmp(f[3], "active") == 0)
		s.state = OVS_SNAP_ACTIVE;
	else if (strcmp(f[3], "frozen") == 0)
		s.state = OVS_SNAP_FROZEN;
	else
		return bad(p, "unknown snapshot state '%s'", f[3]);
	if (r->nsnaps && r->snaps[r->nsnaps - 1].state == OVS_SNAP_ACTIVE)
		return bad(p, "snapshot %llu is active but not the newest",
			   (unsigned long long)r->snaps[r->nsnaps - 1].id);

	if (parse_bool(p, "hold", f[4], &s.hold) < 0)
		return -EUCLEAN;
	/* version 1 knew no classes: manual, which no timer rule prunes */
	if (nf > 5 && ovs_snap_class_parse(f[5], &s.cls) < 0)
		return bad(p, "unknown snapshot class '%s'", f[5]);

	if (r->nsnaps == OVS_MAX_SNAPSHOTS)
		return bad(p, "more than %d snapshots", OVS_MAX_SNAPSHOTS);
	if (r->nsnaps + 1 >= p->alloc) {
		size_t na = p->alloc ? p->alloc * 2 : 16;
		struct ovs_snapshot *ns = realloc(r->snaps, na * sizeof(*ns));

		if (!ns)
			return ovs_err(ENOMEM, "out of memory");
		r->snaps = ns;
		p->alloc = na;
	}
	r->snaps[r->nsnaps++] = s;
	return 0;
}

/* snapshot-description ID TEXT, snapshot-userdata ID KEY VALUE: about
 * the snapshot of the line before. */
static int parse_snapshot_attr(struct parser *p, const char *key, char *rest)
{
	struct ovs_registry *r = p->reg;
	struct ovs_snapshot *s;
	char *text, *sp;
	const char *why;
	uint64_t id;

	if (p->version < 2)
		return bad(p, "'%s' in a version 1 registry", key);
	if (!r->nsnaps)
		return bad(p, "'%s' before any snapshot", key);
	s = &r->snaps[r->nsnaps - 1];
	sp = rest ? strchr(rest, ' ') : NULL;
	if (!sp)
		return bad(p, "%s needs an id and a value", key);
	*sp = '\0';
	text = sp + 1;
	if (parse_num(p, key, rest, &id) < 0)
		return -EUCLEAN;
	if (id != s->id)
		return bad(p, "%s of snapshot %llu after snapshot %llu", key,
			   (unsigned long long)id, (unsigned long long)s->id);
	if (strcmp(key, "snapshot-pre") == 0) {
		uint64_t pre;

		if (s->pre)
			return bad(p, "a second pre of snapshot %llu", (unsigned long long)id);
		if (parse_num(p, key, text, &pre) < 0)
			return -EUCLEAN;
		if (pre == 0 || pre >= id)
			return bad(p, "the pre snapshot %llu of %llu is not older", (unsigned long long)pre,
				   (unsigned long long)id);
		s->pre = pre;
		return 0;
	}
	if (strcmp(key, "snapshot-description") == 0) {
		if (s->description[0])
			return bad(p, "a second description of snapshot %llu",
				   (unsigned long long)id);
		if (unescape_value(text) < 0)
			return bad(p, "bad escape in a description");
		if (!*text || (why = text_problem(text, OVS_DESCRIPTION_MAX)))
			return bad(p, "bad description of snapshot %llu: %s",
				   (unsigned long long)id, *text ? why : "empty");
		strcpy(s->description, text);
		return 0;
	}
	/* snapshot-userdata */
	sp = strchr(text, ' ');
	if (!sp)
		return bad(p, "%s needs an id, a key and a value", key);
	*sp++ = '\0';
	if (!userdata_key_valid(text, strlen(text)))
		return bad(p, "bad user data key '%s'", text);
	if (s->nuserdata && strcmp(s->userdata[s->nuserdata - 1].key, text) >= 0)
		return bad(p, "user data key '%s' out of order or repeated", text);
	if (s->nuserdata == OVS_USERDATA_NMAX)
		return bad(p, "more than %d user data keys", OVS_USERDATA_NMAX);
	if (unescape_value(sp) < 0)
		return bad(p, "bad escape in user data");
	if (!*sp || (why = text_problem(sp, OVS_USERDATA_VALUE_MAX)))
		return bad(p, "bad user data value for %s: %s", text, *sp ? why : "empty");
	strcpy(s->userdata[s->nuserdata].key, text);
	strcpy(s->userdata[s->nuserdata].value, sp);
	s->nuserdata++;
	return 0;
}

static int parse_end(struct parser *p)
{
	struct ovs_registry *r = p->reg;

	for (int k = 0; k < NKEYS; k++)
		if (!((p->seen | OPTIONAL_KEYS) & (1u << k)))
			return bad(p, "missing key '%s'", header_keys[k]);
	if (r->nsnaps && r->snaps[r->nsnaps - 1].state != OVS_SNAP_ACTIVE)
		return bad(p, "the newest snapshot %llu is not active",
			   (unsigned long long)r->snaps[r->nsnaps - 1].id);
	return 0;
}

int ovs_registry_parse(const char *where, const char *text, size_t len,
		       struct ovs_registry *reg)
{
	struct parser p = { .where = where, .reg = reg };
	const char *pos = text, *end = text + len;
	bool ended = false;
	char *line = NULL;
	int rc = 0;

	memset(reg, 0, sizeof(*reg));
	while (pos < end) {
		const char *nl = memchr(pos, '\n', end - pos);
		size_t n;
		char *key, *val;

		p.line++;
		if (!nl) {
			rc = bad(&p, "truncated (no newline at the end)");
			goto fail;
		}
		n = nl - pos;
		free(line);
		line = strndup(pos, n);
		if (!line) {
			rc = ovs_err(ENOMEM, "out of memory");
			goto fail;
		}
		pos = nl + 1;
		if (strlen(line) != n) {
			rc = bad(&p, "NUL byte");
			goto fail;
		}
		if (ended) {
			rc = bad(&p, "text after the end line");
			goto fail;
		}
		if (p.line == 1) {
			uint64_t ver;

			if (strncmp(line, OVS_REGISTRY_MAGIC " ", sizeof(OVS_REGISTRY_MAGIC)) != 0 ||
			    ovs_parse_u64(line + sizeof(OVS_REGISTRY_MAGIC), &ver) < 0) {
				rc = bad(&p, "not an ovsnap registry");
				goto fail;
			}
			if (ver < 1 || ver > OVS_REGISTRY_VERSION) {
				rc = bad(&p, "unsupported registry version %llu (this ovsnap reads "
					 "1 to %d)", (unsigned long long)ver, OVS_REGISTRY_VERSION);
				goto fail;
			}
			p.version = ver;
			continue;
		}
		if (n == 0) {
			rc = bad(&p, "empty line");
			goto fail;
		}
		key = line;
		val = strchr(line, ' ');
		if (val)
			*val++ = '\0';
		if (strcmp(key, "end") == 0) {
			if (val) {
				rc = bad(&p, "text after 'end'");
				goto fail;
			}
			rc = parse_end(&p);
			ended = true;
		} else if (strcmp(key, "snapshot") == 0) {
			rc = parse_snapshot(&p, val);
		} else if (strcmp(key, "snapshot-description") == 0 ||
			   strcmp(key, "snapshot-userdata") == 0 ||
			   strcmp(key, "snapshot-pre") == 0) {
			rc = parse_snapshot_attr(&p, key, val);
		} else {
			rc = parse_header(&p, key, val);
		}
		if (rc < 0)
			goto fail;
	}
	if (!ended) {
		p.line++;
		rc = bad(&p, p.line == 1 ? "empty file" : "truncated (no end line)");
		goto fail;
	}
	free(line);
	return 0;
fail:
	free(line);
	ovs_registry_clear(reg);
	return rc;
}

int ovs_registry_format(const struct ovs_registry *r, char **text, size_t *len)
{
	char *src = escape_value(r->source ? r->source : "");
	char *buf = NULL;
	size_t size = 0;
	FILE *f;

	if (!src)
		return ovs_err(ENOMEM, "out of memory");
	f = open_memstream(&buf, &size);
	if (!f) {
		free(src);
		return ovs_err(ENOMEM, "out of memory");
	}
	fprintf(f, "%s %d\n", OVS_REGISTRY_MAGIC, OVS_REGISTRY_VERSION);
	fprintf(f, "source %s\n", src);
	fprintf(f, "fstype %s\n", r->fstype);
	fprintf(f, "fsuuid %s\n", r->fsuuid);
	fprintf(f, "clone %d\n", r->can_clone);
	fprintf(f, "next-id %llu\n", (unsigned long long)r->next_id);
	fprintf(f, "active %d\n", r->active);
	fprintf(f, "deactivated-ns %lld\n", (long long)r->deactivated_ns);
	fprintf(f, "activated-ns %lld\n", (long long)r->activated_ns);
	for (size_t i = 0; i < r->nsnaps; i++) {
		const struct ovs_snapshot *s = &r->snaps[i];

		fprintf(f, "snapshot %llu %s %lld %s %d %s\n", (unsigned long long)s->id,
			s->name[0] ? s->name : "-", (long long)s->created_ns,
			ovs_snap_state_name(s->state), s->hold, ovs_snap_class_name(s->cls));
		if (s->pre)
			fprintf(f, "snapshot-pre %llu %llu\n", (unsigned long long)s->id,
				(unsigned long long)s->pre);
		if (s->description[0]) {
			char *d = escape_value(s->description);

			if (!d)
				goto nomem;
			fprintf(f, "snapshot-description %llu %s\n", (unsigned long long)s->id, d);
			free(d);
		}
		for (unsigned u = 0; u < s->nuserdata; u++) {
			char *val = escape_value(s->userdata[u].value);

			if (!val)
				goto nomem;
			fprintf(f, "snapshot-userdata %llu %s %s\n", (unsigned long long)s->id,
				s->userdata[u].key, val);
			free(val);
		}
	}
	fprintf(f, "end\n");
	free(src);
	if (fclose(f) != 0) {
		free(buf);
		return ovs_err(ENOMEM, "out of memory");
	}
	*text = buf;
	*len = size;
	return 0;
nomem:
	free(src);
	fclose(f);
	free(buf);
	return ovs_err(ENOMEM, "out of memory");
}

int ovs_registry_store(int dirfd, const char *where, const struct ovs_registry *reg)
{
	char *text;
	size_t len;
	int rc;

	rc = ovs_registry_format(reg, &text, &len);
	if (rc < 0)
		return rc;
	rc = ovs_write_file_atomic(dirfd, OVS_REGISTRY_FILE, text, len, 0600);
	free(text);
	if (rc < 0)
		return ovs_err_keep(rc, "cannot write the registry of %s", where);
	return 0;
}

/* ---- the volume's registry ---------------------------------------------- */

int ovs_registry_load(struct ovs_volume *v)
{
	struct ovs_registry reg;
	char where[PATH_MAX + 16];
	char *text;
	size_t len;
	int rc;

	if (v->dirfd < 0)
		return ovs_err(ENOENT, "store %s of %s is missing", v->store, v->source);
	snprintf(where, sizeof(where), "%s/%s", v->store, OVS_REGISTRY_FILE);
	rc = ovs_read_file_at(v->dirfd, OVS_REGISTRY_FILE, &text, &len, OVS_REGISTRY_MAX_BYTES);
	if (rc < 0)
		return ovs_err(rc, "cannot read %s: %s", where, strerror(-rc));
	rc = ovs_registry_parse(where, text, len, &reg);
	free(text);
	if (rc < 0)
		return rc;
	if (v->source && strcmp(reg.source, v->source) != 0) {
		rc = ovs_err(EUCLEAN, "registry %s belongs to %s, not %s", where,
			     reg.source, v->source);
		ovs_registry_clear(&reg);
		return rc;
	}
	ovs_registry_clear(&v->reg);
	v->reg = reg;
	return 0;
}

size_t ovs_snapshot_count(const struct ovs_volume *v)
{
	return v->reg.nsnaps;
}

const struct ovs_snapshot *ovs_snapshot_at(const struct ovs_volume *v, size_t i)
{
	return i < v->reg.nsnaps ? &v->reg.snaps[i] : NULL;
}

uint64_t ovs_registry_next_id(const struct ovs_volume *v)
{
	return v->reg.next_id;
}

static int layer_path(const struct ovs_volume *v, uint64_t id, const char *what,
		      char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/%s/%llu/%s", v->store, OVS_LAYERS_DIR,
			     (unsigned long long)id, what) >= len)
		return ovs_err(ENAMETOOLONG, "%s: path too long", v->store);
	return 0;
}

int ovs_snapshot_upper(const struct ovs_volume *v, uint64_t id, char *buf, size_t len)
{
	return layer_path(v, id, "upper", buf, len);
}

int ovs_snapshot_work(const struct ovs_volume *v, uint64_t id, char *buf, size_t len)
{
	return layer_path(v, id, "work", buf, len);
}

/* ---- references ----------------------------------------------------------- */

int ovs_snapshot_resolve(const struct ovs_volume *v, const char *ref,
			 const struct ovs_snapshot **out)
{
	const struct ovs_registry *r = &v->reg;
	char at[32];
	uint64_t num;

	/* -N is @-N: names never start with '-', ids are plain digits */
	if (ref[0] == '-' && ovs_parse_u64(ref + 1, &num) == 0 &&
	    (size_t)snprintf(at, sizeof(at), "@%s", ref) < sizeof(at))
		ref = at;
	if (ref[0] == '@') {
		size_t idx;

		if (strcmp(ref, "@latest") == 0 || strcmp(ref, "@oldest") == 0 ||
		    strncmp(ref, "@-", 2) == 0) {
			if (!r->nsnaps)
				return ovs_err(ENOENT, "%s has no snapshots", v->source);
		}
		if (strcmp(ref, "@latest") == 0) {
			idx = r->nsnaps - 1;
		} else if (strcmp(ref, "@oldest") == 0) {
			idx = 0;
		} else if (strncmp(ref, "@-", 2) == 0 && ovs_parse_u64(ref + 2, &num) == 0) {
			if (num >= r->nsnaps)
				return ovs_err(ENOENT, "%s: %s has only %zu snapshot%s", ref,
					       v->source, r->nsnaps, r->nsnaps == 1 ? "" : "s");
			idx = r->nsnaps - 1 - num;
		} else {
			return ovs_err(EINVAL, "bad snapshot reference '%s' "
				       "(use an id, a name, @latest, @oldest, @-N or -N)", ref);
		}
		*out = &r->snaps[idx];
		return 0;
	}
	if (ovs_parse_u64(ref, &num) == 0) {
		for (size_t i = 0; i < r->nsnaps; i++)
			if (r->snaps[i].id == num) {
				*out = &r->snaps[i];
				return 0;
			}
		return ovs_err(ENOENT, "%s has no snapshot %s", v->source, ref);
	}
	if (!ovs_snapshot_name_valid(ref))
		return ovs_err(EINVAL, "bad snapshot reference '%s' "
			       "(use an id, a name, @latest, @oldest, @-N or -N)", ref);
	for (size_t i = 0; i < r->nsnaps; i++)
		if (strcmp(r->snaps[i].name, ref) == 0) {
			*out = &r->snaps[i];
			return 0;
		}
	return ovs_err(ENOENT, "%s has no snapshot named %s", v->source, ref);
}

/* ---- mutations ------------------------------------------------------------ */

/* Replace the volume's registry by next, durably; takes next over. */
static int commit(struct ovs_volume *v, struct ovs_registry *next)
{
	int rc = ovs_registry_store(v->dirfd, v->source, next);

	if (rc < 0) {
		ovs_registry_clear(next);
		return rc;
	}
	ovs_registry_clear(&v->reg);
	v->reg = *next;
	return 0;
}

static int need_store(struct ovs_volume *v)
{
	if (v->dirfd < 0)
		return ovs_err(ENOENT, "store %s of %s is missing", v->store, v->source);
	return 0;
}

static int make_layer(struct ovs_volume *v, uint64_t id, int rootfd)
{
	char idname[32], upper[PATH_MAX];
	int layersfd = -1, idfd = -1, upperfd = -1, rc;

	snprintf(idname, sizeof(idname), "%llu", (unsigned long long)id);
	ovs_snapshot_upper(v, id, upper, sizeof(upper));

	if (mkdirat(v->dirfd, OVS_LAYERS_DIR, 0700) < 0 && errno != EEXIST)
		return ovs_err(errno, "%s/%s: %m", v->store, OVS_LAYERS_DIR);
	layersfd = openat(v->dirfd, OVS_LAYERS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (layersfd < 0)
		return ovs_err(errno, "%s/%s: %m", v->store, OVS_LAYERS_DIR);
	/* left over by a crash after mkdir and before the registry named it */
	rc = ovs_remove_tree_at(layersfd, idname);
	if (rc < 0)
		goto out;
	if (mkdirat(layersfd, idname, 0700) < 0) {
		rc = ovs_err(errno, "%s/%s/%s: %m", v->store, OVS_LAYERS_DIR, idname);
		goto out;
	}
	idfd = openat(layersfd, idname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (idfd < 0) {
		rc = ovs_err(errno, "%s/%s/%s: %m", v->store, OVS_LAYERS_DIR, idname);
		goto out;
	}
	if (mkdirat(idfd, "upper", 0755) < 0 || mkdirat(idfd, "work", 0700) < 0) {
		rc = ovs_err(errno, "%s/%s/%s: %m", v->store, OVS_LAYERS_DIR, idname);
		goto out;
	}
	upperfd = openat(idfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (upperfd < 0) {
		rc = ovs_err(errno, "%s: %m", upper);
		goto out;
	}
	if (rootfd >= 0) {
		/* the engine's copy of a directory's metadata: owner, mode,
		 * escaped xattrs, origin, times (rule 7) */
		rc = ovs_copy_root_metadata(rootfd, upperfd);
		if (rc < 0) {
			rc = ovs_err_keep(-rc, "%s", upper);
			goto out;
		}
	}
	if (fsync(upperfd) < 0 || fsync(idfd) < 0 || fsync(layersfd) < 0) {
		rc = ovs_err(errno, "%s: fsync: %m", upper);
		goto out;
	}
	rc = ovs_fsync_dir(idfd, "work");
	if (rc == 0)
		rc = ovs_fsync_dir(v->dirfd, ".");
out:
	if (upperfd >= 0)
		close(upperfd);
	if (idfd >= 0)
		close(idfd);
	if (rc < 0)
		ovs_remove_tree_at(layersfd, idname);
	close(layersfd);
	return rc;
}

void (*ovs_test_hook_layer_made)(void);

int ovs_registry_add_snapshot(struct ovs_volume *v, const char *name, int rootfd,
			      uint64_t *id_out)
{
	struct ovs_registry next;
	struct ovs_snapshot *s;
	uint64_t id;
	int rc;

	rc = need_store(v);
	if (rc < 0)
		return rc;
	if (v->reg.nsnaps >= OVS_MAX_SNAPSHOTS)
		return ovs_err(EMLINK, "%s has %d snapshots, the most overlayfs can stack; "
			       "remove some with 'ovsnap drop' or a retention policy (--keep)",
			       v->source, OVS_MAX_SNAPSHOTS);
	if (name && *name) {
		if (!ovs_snapshot_name_valid(name))
			return ovs_err(EINVAL, "bad snapshot name '%s': use letters, digits, "
				       "'.', '_' and '-', not all digits, not starting with "
				       "'.' or '-', at most %d characters", name, OVS_NAME_MAX);
		for (size_t i = 0; i < v->reg.nsnaps; i++)
			if (strcmp(v->reg.snaps[i].name, name) == 0)
				return ovs_err(EEXIST, "%s already has a snapshot named %s "
					       "(id %llu)", v->source, name,
					       (unsigned long long)v->reg.snaps[i].id);
	}
	id = v->reg.next_id;
	rc = make_layer(v, id, rootfd);
	if (rc < 0)
		return rc;
	if (ovs_test_hook_layer_made)
		ovs_test_hook_layer_made();

	rc = ovs_registry_copy(&next, &v->reg);
	if (rc < 0)
		goto undo;
	if (!next.snaps) {
		next.snaps = calloc(1, sizeof(*next.snaps));
		if (!next.snaps) {
			ovs_registry_clear(&next);
			rc = ovs_err(ENOMEM, "out of memory");
			goto undo;
		}
	}
	if (next.nsnaps)
		next.snaps[next.nsnaps - 1].state = OVS_SNAP_FROZEN;
	s = &next.snaps[next.nsnaps++];
	memset(s, 0, sizeof(*s));
	s->id = id;
	if (name)
		snprintf(s->name, sizeof(s->name), "%s", name);
	s->created_ns = ovs_now_ns();
	s->state = OVS_SNAP_ACTIVE;
	next.next_id = id + 1;
	rc = commit(v, &next);
	if (rc < 0)
		goto undo;
	ovs_log(v, "snapshot=%llu take name=%s", (unsigned long long)id,
		name && *name ? name : "-");
	if (id_out)
		*id_out = id;
	return 0;
undo:
	ovs_layer_remove(v, id);
	return rc;
}

int ovs_layer_remove(struct ovs_volume *v, uint64_t id)
{
	char idname[32];
	int layersfd, rc;

	snprintf(idname, sizeof(idname), "%llu", (unsigned long long)id);
	layersfd = openat(v->dirfd, OVS_LAYERS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (layersfd < 0)
		return errno == ENOENT ? 0 : ovs_err(errno, "%s/%s: %m", v->store, OVS_LAYERS_DIR);
	rc = ovs_remove_tree_at(layersfd, idname);
	if (rc == 0 && fsync(layersfd) < 0)
		rc = ovs_err(errno, "%s/%s: fsync: %m", v->store, OVS_LAYERS_DIR);
	close(layersfd);
	return rc;
}

static ssize_t find_index(const struct ovs_volume *v, uint64_t id)
{
	for (size_t i = 0; i < v->reg.nsnaps; i++)
		if (v->reg.snaps[i].id == id)
			return i;
	return ovs_err(ENOENT, "%s has no snapshot %llu", v->source, (unsigned long long)id);
}

int ovs_registry_remove_snapshot(struct ovs_volume *v, uint64_t id)
{
	struct ovs_registry next;
	ssize_t idx;
	int rc;

	rc = need_store(v);
	if (rc < 0)
		return rc;
	idx = find_index(v, id);
	if (idx < 0)
		return idx;
	rc = ovs_registry_copy(&next, &v->reg);
	if (rc < 0)
		return rc;
	memmove(&next.snaps[idx], &next.snaps[idx + 1],
		(next.nsnaps - idx - 1) * sizeof(*next.snaps));
	next.nsnaps--;
	/* dropping the newest makes the one before it receive the copy-ups */
	if (next.nsnaps)
		next.snaps[next.nsnaps - 1].state = OVS_SNAP_ACTIVE;
	rc = commit(v, &next);
	if (rc < 0)
		return rc;
	/* The registry no longer names the layer: a crash from here on
	 * leaves a stray directory that fsck removes, never a lost one. */
	return ovs_layer_remove(v, id);
}

/*
 * The instant of a deactivation as the filesystem stamps ctimes: the ctime
 * of OVS_DEACTIVATED_FILE in the store, set now.  fsck compares it with
 * the ctimes in SRC; ovs_now_ns() would not do, since filesystems stamp
 * from a coarse clock that lags it by up to a tick, and a change made
 * right after the deactivation would look older than it.
 *
 * The fstat before the update asks for the ctime, so that a multigrain
 * filesystem (XFS, ext4, btrfs since Linux 6.13) stamps the update with
 * the fine clock and raises its floor: the stamp is then later than the
 * volume's every take (created_ns, from the same fine clock), and every
 * ctime stamped after it, on any multigrain filesystem, is at least as
 * large.  On another filesystem it is a coarse stamp, still never later
 * than a ctime that follows it.
 */
int ovs_registry_deactivation_stamp(struct ovs_volume *v, int64_t *ns)
{
	const char *fake = getenv("OVSNAP_TEST_NOW");
	struct stat st;
	int fd;

	if (fake && *fake) {
		*ns = ovs_now_ns();
		return 0;
	}
	fd = openat(v->dirfd, OVS_DEACTIVATED_FILE,
		    O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
	if (fd < 0)
		return ovs_err(errno, "%s/%s: %m", v->store, OVS_DEACTIVATED_FILE);
	if (fstat(fd, &st) < 0 || futimens(fd, NULL) < 0 || fstat(fd, &st) < 0) {
		int err = errno;

		close(fd);
		return ovs_err(err, "%s/%s: %s", v->store, OVS_DEACTIVATED_FILE, strerror(err));
	}
	close(fd);
	*ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	return 0;
}

int ovs_registry_set_active(struct ovs_volume *v, bool active)
{
	return ovs_registry_set_inactive_since(v, active, 0);
}

int ovs_registry_set_inactive_since(struct ovs_volume *v, bool active, int64_t since_ns)
{
	struct ovs_registry next;
	int rc;

	rc = need_store(v);
	if (rc < 0)
		return rc;
	rc = ovs_registry_copy(&next, &v->reg);
	if (rc < 0)
		return rc;
	/* deactivated-ns keeps the last switch-off and activated-ns the
	 * last switch-on: changes made between the two were not preserved
	 * in the snapshots taken before (fsck reports them); those after
	 * the switch-on were.  The caller switches on once the snapshot
	 * mount is up, so the recorded window can only be too wide. */
	if (next.active && !active && since_ns > 0) {
		next.deactivated_ns = since_ns;
	} else if (next.active && !active) {
		rc = ovs_registry_deactivation_stamp(v, &next.deactivated_ns);
		if (rc < 0) {
			ovs_registry_clear(&next);
			return rc;
		}
	} else if (!next.active && active)
		next.activated_ns = ovs_now_ns();
	next.active = active;
	return commit(v, &next);
}

int ovs_registry_set_hold(struct ovs_volume *v, uint64_t id, bool hold)
{
	struct ovs_registry next;
	ssize_t idx;
	int rc;

	rc = need_store(v);
	if (rc < 0)
		return rc;
	idx = find_index(v, id);
	if (idx < 0)
		return idx;
	rc = ovs_registry_copy(&next, &v->reg);
	if (rc < 0)
		return rc;
	next.snaps[idx].hold = hold;
	return commit(v, &next);
}

/* Set (or, with an empty value, remove) one user data key of s, keeping
 * the keys sorted. */
static int userdata_set(struct ovs_snapshot *s, const struct ovs_userdata *ud)
{
	unsigned i;

	for (i = 0; i < s->nuserdata; i++) {
		int cmp = strcmp(s->userdata[i].key, ud->key);

		if (cmp == 0) {
			if (ud->value[0]) {
				strcpy(s->userdata[i].value, ud->value);
			} else {
				memmove(&s->userdata[i], &s->userdata[i + 1],
					(s->nuserdata - i - 1) * sizeof(*s->userdata));
				s->nuserdata--;
			}
			return 0;
		}
		if (cmp > 0)
			break;
	}
	if (!ud->value[0])
		return 0;
	if (s->nuserdata == OVS_USERDATA_NMAX)
		return ovs_err(E2BIG, "snapshot %llu would have more than %d user data keys",
			       (unsigned long long)s->id, OVS_USERDATA_NMAX);
	memmove(&s->userdata[i + 1], &s->userdata[i], (s->nuserdata - i) * sizeof(*s->userdata));
	s->userdata[i] = *ud;
	s->nuserdata++;
	return 0;
}

int ovs_registry_change(struct ovs_volume *v, const uint64_t *ids, size_t n,
			const struct ovs_snap_change *c)
{
	struct ovs_registry next;
	int rc;

	rc = need_store(v);
	if (rc < 0)
		return rc;
	if (c->description && (rc = ovs_description_check(c->description)) < 0)
		return rc;
	if (c->cls != -1 && (c->cls < 0 || c->cls >= OVS_CLASS_COUNT))
		return ovs_err(EINVAL, "unknown class %d", c->cls);
	for (size_t u = 0; u < c->nuserdata; u++) {
		const struct ovs_userdata *ud = &c->userdata[u];
		const char *why;

		if (!userdata_key_valid(ud->key, strlen(ud->key)))
			return ovs_err(EINVAL, "bad user data key '%s'", ud->key);
		if ((why = text_problem(ud->value, OVS_USERDATA_VALUE_MAX)))
			return ovs_err(EINVAL, "bad user data value for %s: %s", ud->key, why);
	}
	for (size_t i = 0; i < n; i++) {
		ssize_t idx = find_index(v, ids[i]);

		if (idx < 0)
			return idx;
	}
	rc = ovs_registry_copy(&next, &v->reg);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		struct ovs_snapshot *s = &next.snaps[find_index(v, ids[i])];

		if (c->hold != -1)
			s->hold = c->hold;
		if (c->cls != -1)
			s->cls = c->cls;
		if (c->description)
			strcpy(s->description, c->description);
		if (c->pre) {
			if (c->pre >= s->id) {
				ovs_registry_clear(&next);
				return ovs_err(EINVAL, "the pre snapshot %llu is not older than %llu",
					       (unsigned long long)c->pre,
					       (unsigned long long)s->id);
			}
			s->pre = c->pre;
		}
		for (size_t u = 0; u < c->nuserdata; u++) {
			rc = userdata_set(s, &c->userdata[u]);
			if (rc < 0) {
				ovs_registry_clear(&next);
				return rc;
			}
		}
	}
	rc = commit(v, &next);
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (c->hold != -1)
			ovs_log(v, "snapshot=%llu %s", (unsigned long long)ids[i],
				c->hold ? "hold" : "release");
		if (c->cls != -1 || c->description || c->nuserdata || c->pre)
			ovs_log(v, "snapshot=%llu modify%s%s%s%s%s", (unsigned long long)ids[i],
				c->cls != -1 ? " class=" : "",
				c->cls != -1 ? ovs_snap_class_name(c->cls) : "",
				c->description ? " description" : "",
				c->nuserdata ? " userdata" : "", c->pre ? " pre" : "");
	}
	return rc;
}
