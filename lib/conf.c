/*
 * Per-volume configuration files (ovsnap.conf(5)); see conf.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "ovsnap-private.h"
#include "retention.h"

#ifndef CONFDIR
#define CONFDIR "/etc/ovsnap/volumes"
#endif

/* Files larger than this are not configuration. */
#define CONF_MAX_SIZE (64 * 1024)

enum conf_key { K_KEEP, K_SPACE_LIMIT, K_CLASS, K_PRE_HOOK, K_POST_HOOK, K_HOOK_TIMEOUT,
		K_ALLOW_USERS, K_ALLOW_GROUPS, K_COUNT };
static const char *const key_names[K_COUNT] = {
	"KEEP", "SPACE_LIMIT", "CLASS", "PRE_HOOK", "POST_HOOK", "HOOK_TIMEOUT", "ALLOW_USERS",
	"ALLOW_GROUPS",
};
_Static_assert(K_COUNT <= sizeof(((struct ovs_conf *)0)->line) / sizeof(unsigned),
	       "struct ovs_conf: a line per key");

const char *ovs_conf_dir(void)
{
	const char *env = getenv("OVSNAP_CONF_DIR");

	return env && *env ? env : CONFDIR;
}

/* A unit name ("ovsnapd@" NAME ".service") is at most 255 bytes. */
#define UNIT_NAME_MAX (255 - (sizeof("ovsnapd@.service") - 1))

/*
 * systemd's path escaping into buf (len bytes).  Not fitting: with
 * truncate, as many whole escapes as fit and 1; else -ENAMETOOLONG.
 */
static int escape_into(const char *path, char *buf, size_t len, bool truncate)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	bool first = true;

	if (len < 2)
		return -ENAMETOOLONG;
	for (const char *p = path; *p; ) {
		const char *end;
		size_t n;

		while (*p == '/')
			p++;
		end = strchrnul(p, '/');
		n = end - p;
		if (n == 0 || (n == 1 && p[0] == '.')) {
			p = end;
			continue;
		}
		if (!first) {
			if (o + 1 >= len)
				goto too_long;
			buf[o++] = '-';
		}
		for (size_t i = 0; i < n; i++) {
			unsigned char ch = p[i];
			bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
				     (ch >= '0' && ch <= '9') || ch == ':' || ch == '_' ||
				     (ch == '.' && o > 0);

			if (plain) {
				if (o + 1 >= len)
					goto too_long;
				buf[o++] = ch;
			} else {
				if (o + 4 >= len)
					goto too_long;
				buf[o++] = '\\';
				buf[o++] = 'x';
				buf[o++] = hex[ch >> 4];
				buf[o++] = hex[ch & 15];
			}
		}
		first = false;
		p = end;
	}
	if (o == 0)
		buf[o++] = '-';
	buf[o] = '\0';
	return 0;
too_long:
	buf[o] = '\0';
	return truncate ? 1 : -ENAMETOOLONG;
}

int ovs_unit_escape_path(const char *path, char *buf, size_t len)
{
	if (len > UNIT_NAME_MAX + 1)
		len = UNIT_NAME_MAX + 1;
	if (escape_into(path, buf, len, false) < 0)
		return ovs_err(ENAMETOOLONG, "the path is too long for a systemd unit "
			       "instance name (systemd-escape --path)");
	return 0;
}

int ovs_conf_name(const char *src, char *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t o;

	if (len < OVS_CONF_NAME_MAX + 1)
		return ovs_err(EINVAL, "internal error: conf name buffer");
	if (escape_into(src, buf, UNIT_NAME_MAX + 1, false) == 0)
		return 0;
	/* Too long for a unit name: the escape cut short ("~" is never in
	 * an escape) and the FNV-1a hash of SRC, as the socket's name. */
	escape_into(src, buf, UNIT_NAME_MAX + 1 - 18, true);
	for (const char *p = src; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	o = strlen(buf);
	snprintf(buf + o, len - o, "~h%016llx", (unsigned long long)h);
	return 0;
}

bool ovs_unit_name_fits(const char *path)
{
	char buf[UNIT_NAME_MAX + 1];

	return escape_into(path, buf, sizeof(buf), false) == 0;
}

void ovs_conf_clear(struct ovs_conf *c)
{
	free(c->keep);
	free(c->space_limit);
	free(c->pre_hook);
	free(c->post_hook);
	for (char **p = c->allow_users; p && *p; p++)
		free(*p);
	for (char **p = c->allow_groups; p && *p; p++)
		free(*p);
	free(c->allow_users);
	free(c->allow_groups);
	memset(c, 0, sizeof(*c));
}

/*
 * The value after "KEY=" at p, unquoted into a new string; only blanks
 * and a comment may follow it.  NULL with the reason in why on a syntax
 * error.
 */
static char *unquote(const char *p, const char **why)
{
	size_t len = strlen(p), o = 0;
	char *out = malloc(len + 1);

	if (!out) {
		*why = "out of memory";
		return NULL;
	}
	while (*p && *p != ' ' && *p != '\t' && *p != '#') {
		if (*p == '"') {
			for (p++; *p != '"'; p++) {
				if (!*p) {
					*why = "unterminated \"";
					goto bad;
				}
				if (*p == '\\' && p[1] && strchr("\"\\$`", p[1]))
					p++;
				else if (*p == '$' || *p == '`') {
					*why = "'$' or '`' in a value (write \\$ or \\`, or use '...')";
					goto bad;
				}
				out[o++] = *p;
			}
			p++;
		} else if (*p == '\'') {
			for (p++; *p != '\''; p++) {
				if (!*p) {
					*why = "unterminated '";
					goto bad;
				}
				out[o++] = *p;
			}
			p++;
		} else if (strchr("\\$`;&|<>(){}", *p)) {
			*why = "a shell character outside quotes (quote the value)";
			goto bad;
		} else {
			out[o++] = *p++;
		}
	}
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p && *p != '#') {
		*why = "blanks in a value (quote it)";
		goto bad;
	}
	out[o] = '\0';
	return out;
bad:
	free(out);
	return NULL;
}

/* "a,b c" -> { "a", "b", "c", NULL }.  Not looked up here: a user
 * deleted since, or an NSS outage, must not stop every take (see
 * ovs_conf_check_names). */
static int split_names(const char *value, char ***out)
{
	char *copy = strdup(value), *save = NULL, *tok, **names;
	size_t n = 0;

	names = calloc(strlen(value) / 2 + 2, sizeof(*names));
	if (!copy || !names) {
		free(copy);
		free(names);
		return ovs_err(ENOMEM, "out of memory");
	}
	for (tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		names[n] = strdup(tok);
		if (!names[n]) {
			for (size_t i = 0; i < n; i++)
				free(names[i]);
			free(names);
			free(copy);
			return ovs_err(ENOMEM, "out of memory");
		}
		n++;
	}
	free(copy);
	*out = names;
	return 0;
}

static int set_key(struct ovs_conf *c, const char *where, enum conf_key k, char *value)
{
	struct ovs_keep_policy policy;
	char *spec;
	int rc = 0;

	switch (k) {
	case K_KEEP:
		rc = ovs_keep_parse(value, &policy);
		if (rc < 0)
			return ovs_err_keep(EINVAL, "%s: KEEP", where);
		c->keep = value;
		return 0;
	case K_SPACE_LIMIT:
		if (asprintf(&spec, "space=%s", value) < 0)
			return ovs_err(ENOMEM, "out of memory");
		rc = ovs_keep_parse(spec, &policy);
		free(spec);
		if (rc < 0)
			return ovs_err(EINVAL, "%s: SPACE_LIMIT: '%s' is not N%% or a size "
				       "(20%%, 10G)", where, value);
		c->space_limit = value;
		return 0;
	case K_CLASS:
		if (ovs_snap_class_parse(value, &c->cls) < 0 ||
		    (c->cls != OVS_CLASS_MANUAL && c->cls != OVS_CLASS_TIMELINE))
			rc = ovs_err(EINVAL, "%s: CLASS: '%s' is not manual or timeline",
				     where, value);
		else
			c->has_class = true;
		free(value);
		return rc;
	case K_PRE_HOOK:
		c->pre_hook = value;
		return 0;
	case K_POST_HOOK:
		c->post_hook = value;
		return 0;
	case K_HOOK_TIMEOUT: {
		char *end;
		unsigned long n;

		errno = 0;
		n = strtoul(value, &end, 10);
		if (value[0] < '0' || value[0] > '9' || *end || errno || n > OVS_CONF_HOOK_TIMEOUT_MAX)
			rc = ovs_err(EINVAL, "%s: HOOK_TIMEOUT: '%s' is not a number of seconds "
				     "(0 to %u; 0: no limit)", where, value, OVS_CONF_HOOK_TIMEOUT_MAX);
		else {
			c->hook_timeout = n;
			c->has_hook_timeout = true;
		}
		free(value);
		return rc;
	}
	case K_ALLOW_USERS:
	case K_ALLOW_GROUPS:
		rc = split_names(value, k == K_ALLOW_GROUPS ? &c->allow_groups : &c->allow_users);
		free(value);
		return rc;
	case K_COUNT:
		break;
	}
	free(value);
	return ovs_err(EINVAL, "%s: internal error", where);
}

int ovs_conf_parse(const char *path, const char *text, struct ovs_conf *c)
{
	unsigned lineno = 0;
	int rc = 0;

	/* for later messages (ovs_conf_check_names) */
	if (!c->path[0] && path != c->path)
		snprintf(c->path, sizeof(c->path), "%s", path);
	for (const char *line = text; *line && rc == 0; ) {
		const char *nl = strchrnul(line, '\n'), *p = line, *eq, *why = NULL;
		char where[4200], *buf, *value;
		enum conf_key k;

		lineno++;
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		buf = strndup(line, nl - line);
		line = *nl ? nl + 1 : nl;
		if (!buf)
			return ovs_err(ENOMEM, "out of memory");
		for (p = buf; *p == ' ' || *p == '\t'; p++)
			;
		if (!*p || *p == '#') {
			free(buf);
			continue;
		}
		eq = strchr(p, '=');
		for (k = 0; k < K_COUNT; k++)
			if (eq && (size_t)(eq - p) == strlen(key_names[k]) &&
			    strncmp(p, key_names[k], eq - p) == 0)
				break;
		if (!eq || p == eq || strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789") !=
		    (size_t)(eq - p)) {
			rc = ovs_err(EINVAL, "%s: expected KEY=VALUE (no blanks around '=')", where);
		} else if (k == K_COUNT) {
			rc = ovs_err(EINVAL, "%s: unknown key '%.*s' (KEEP, SPACE_LIMIT, CLASS, "
				     "PRE_HOOK, POST_HOOK, HOOK_TIMEOUT, ALLOW_USERS, ALLOW_GROUPS)", where,
				     (int)(eq - p), p);
		} else if (c->line[k]) {
			rc = ovs_err(EINVAL, "%s: %s set twice (first on line %u)", where,
				     key_names[k], c->line[k]);
		} else if (!(value = unquote(eq + 1, &why))) {
			rc = ovs_err(EINVAL, "%s: %s: %s", where, key_names[k], why);
		} else {
			c->line[k] = lineno;
			/* An empty value is the default. */
			if (!*value)
				free(value);
			else
				rc = set_key(c, where, k, value);
		}
		free(buf);
	}
	if (rc == 0 && c->keep && c->space_limit && strstr(c->keep, "space="))
		rc = ovs_err(EINVAL, "%s:%u: SPACE_LIMIT and a space= rule in KEEP (line %u): "
			     "give one of them", path, c->line[K_SPACE_LIMIT], c->line[K_KEEP]);
	return rc;
}

/* The file name of src's settings: NAME.conf. */
static int conf_file(const char *src, char *buf, size_t len)
{
	char name[OVS_CONF_NAME_MAX + 1];
	int rc = ovs_conf_name(src, name, sizeof(name));

	if (rc < 0)
		return rc;
	snprintf(buf, len, "%s.conf", name);
	return 0;
}

/* The settings directory, checked as the store is (rule 20); -ENOENT
 * (no message needed) when it or a parent does not exist. */
static int conf_dir_open(void)
{
	char *what;
	int fd;

	if (asprintf(&what, "settings directory %s", ovs_conf_dir()) < 0)
		return ovs_err(ENOMEM, "out of memory");
	fd = ovs_safe_dir_open(ovs_conf_dir(), what, 0);
	free(what);
	return fd;
}

int ovs_conf_load(const char *src, struct ovs_conf *c)
{
	char name[OVS_CONF_NAME_MAX + 8], *text;
	struct stat st;
	ssize_t n;
	int fd, dirfd, rc;

	memset(c, 0, sizeof(*c));
	rc = conf_file(src, name, sizeof(name));
	if (rc < 0)
		return rc;
	if (snprintf(c->path, sizeof(c->path), "%s/%s", ovs_conf_dir(), name) >=
	    (int)sizeof(c->path))
		return ovs_err(ENAMETOOLONG, "%s/%s: name too long", ovs_conf_dir(), name);
	/* Rule 20: its hooks run as root; the directory and every one
	 * above it are root's and closed to others, as the store's. */
	dirfd = conf_dir_open();
	if (dirfd == -ENOENT)
		return 0;
	if (dirfd < 0)
		return dirfd;
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		rc = errno;
		close(dirfd);
		if (rc == ENOENT)
			return 0;
		if (rc == ELOOP)
			return ovs_err(rc, "%s: a symbolic link: refused (its hooks run as root)",
				       c->path);
		return ovs_err(rc, "%s: %s", c->path, strerror(rc));
	}
	close(dirfd);
	if (fstat(fd, &st) < 0) {
		rc = ovs_err(errno, "%s: %m", c->path);
		goto out_fd;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = ovs_err(EINVAL, "%s: not a regular file", c->path);
		goto out_fd;
	}
	if (st.st_uid != 0 || (st.st_mode & 022)) {
		rc = ovs_err(EPERM, "%s: must be root's and writable by root only "
			     "(its hooks run as root)", c->path);
		goto out_fd;
	}
	if (st.st_size > CONF_MAX_SIZE) {
		rc = ovs_err(EFBIG, "%s: larger than %d bytes", c->path, CONF_MAX_SIZE);
		goto out_fd;
	}
	text = malloc(st.st_size + 1);
	if (!text) {
		rc = ovs_err(ENOMEM, "out of memory");
		goto out_fd;
	}
	n = read(fd, text, st.st_size);
	if (n < 0) {
		rc = ovs_err(errno, "%s: %m", c->path);
	} else if (memchr(text, '\0', n)) {
		rc = ovs_err(EINVAL, "%s: a NUL byte: not a text file", c->path);
	} else {
		text[n] = '\0';
		c->exists = true;
		rc = ovs_conf_parse(c->path, text, c);
	}
	free(text);
out_fd:
	close(fd);
	return rc;
}

const char *ovs_conf_keep(const struct ovs_conf *c)
{
	return c->keep ? c->keep : OVS_CONF_DEFAULT_KEEP;
}

enum ovs_snap_class ovs_conf_class(const struct ovs_conf *c)
{
	return c->has_class ? c->cls : OVS_CLASS_TIMELINE;
}

char *ovs_conf_timer_spec(const struct ovs_conf *c, const char *keep)
{
	char *spec;

	if (c->space_limit) {
		if (asprintf(&spec, "%s,space=%s", keep, c->space_limit) < 0)
			return NULL;
		return spec;
	}
	return strdup(keep);
}

/* Make dir and its missing parents, 0755. */
static int mkdir_parents(const char *dir)
{
	char tmp[PATH_MAX];

	if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp))
		return ovs_err(ENAMETOOLONG, "%s: name too long", dir);
	for (char *p = tmp + 1; ; p++) {
		if (*p && *p != '/')
			continue;
		char saved = *p;

		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return ovs_err(errno, "cannot create %s: %m", tmp);
		if (!saved)
			break;
		*p = saved;
	}
	return 0;
}

int ovs_conf_remove(const char *src)
{
	char file[OVS_CONF_NAME_MAX + 8];
	const char *dir = ovs_conf_dir();
	int dirfd, rc;

	rc = conf_file(src, file, sizeof(file));
	if (rc < 0)
		return rc;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return errno == ENOENT ? 0 : ovs_err(errno, "%s: %m", dir);
	rc = unlinkat(dirfd, file, 0) < 0 && errno != ENOENT
	     ? ovs_err(errno, "remove %s/%s: %m", dir, file) : 0;
	close(dirfd);
	return rc;
}

/*
 * Make the file name in dirfd with text, whole or not at all, unless it
 * exists (1 made, 0 existed).  An unnamed file linked in when complete:
 * a temporary name would be longer than name, which may be 244 bytes
 * (rule 18).
 */
static int write_new(int dirfd, const char *name, const char *text)
{
	char proc[64];
	size_t len = strlen(text);
	int fd, rc = 0;

	fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
		/* no O_TMPFILE here: a temporary name, when it fits */
		rc = ovs_write_file_atomic(dirfd, name, text, len, 0644);
		return rc < 0 ? rc : 1;
	}
	if (fd < 0)
		return ovs_err(errno, "%s: %m", name);
	for (size_t off = 0; off < len && rc == 0; ) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno != EINTR)
			rc = ovs_err(errno, "write %s: %m", name);
		else if (n > 0)
			off += n;
	}
	if (rc == 0 && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
		rc = ovs_err(errno, "write %s: %m", name);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (rc == 0 && linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW) < 0)
		rc = errno == EEXIST ? 0 : ovs_err(errno, "link %s: %m", name);
	else if (rc == 0)
		rc = fsync(dirfd) < 0 ? ovs_err(errno, "sync the directory of %s: %m", name) : 1;
	close(fd);
	return rc;
}

int ovs_conf_create_default(const char *src, const char *keep)
{
	char file[OVS_CONF_NAME_MAX + 8], *text = NULL, *shown;
	const char *dir = ovs_conf_dir();
	int dirfd, rc, n;
	struct stat st;

	rc = conf_file(src, file, sizeof(file));
	if (rc < 0)
		return rc;
	rc = mkdir_parents(dir);
	if (rc < 0)
		return rc;
	dirfd = conf_dir_open();
	if (dirfd < 0)
		return dirfd;
	if (fstatat(dirfd, file, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
		close(dirfd);
		return 0;
	}
	/* The path in a comment: no line breaks in it. */
	shown = strdup(src);
	if (!shown) {
		close(dirfd);
		return ovs_err(ENOMEM, "out of memory");
	}
	for (char *p = shown; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	n = asprintf(&text,
		"# ovsnap settings of the volume %s (see ovsnap.conf(5)).\n"
		"# Made by its first take; a setting left commented out has the value\n"
		"# shown.  'ovsnap config %s' shows what applies.\n"
		"\n"
		"# Retention rules of the rotation timer ('ovsnap take --timer'), as --keep.\n"
		"%sKEEP=\"%s\"\n"
		"# What the timer's snapshots may use at most: N%% of the filesystem or a size.\n"
		"#SPACE_LIMIT=\"\"\n"
		"# The class of the timer's snapshots, the only one KEEP and SPACE_LIMIT judge.\n"
		"#CLASS=\"timeline\"\n"
		"# Commands (sh -c) run before and after each take, under the volume lock;\n"
		"# a failing PRE_HOOK aborts the take.\n"
		"#PRE_HOOK=\"\"\n"
		"#POST_HOOK=\"\"\n"
		"# Seconds a hook may run before it is killed (0: no limit).\n"
		"#HOOK_TIMEOUT=\"%u\"\n"
		"# Users and groups to be allowed to list, mount and take (stored and\n"
		"# checked; not yet enforced).\n"
		"#ALLOW_USERS=\"\"\n"
		"#ALLOW_GROUPS=\"\"\n",
		shown, shown, keep ? "" : "#", keep ? keep : OVS_CONF_DEFAULT_KEEP,
		OVS_CONF_DEFAULT_HOOK_TIMEOUT);
	free(shown);
	if (n < 0) {
		close(dirfd);
		return ovs_err(ENOMEM, "out of memory");
	}
	rc = write_new(dirfd, file, text);
	free(text);
	close(dirfd);
	if (rc < 0)
		return ovs_err_keep(-rc, "create %s/%s", dir, file);
	return rc;
}

unsigned ovs_conf_hook_timeout(const struct ovs_conf *c)
{
	return c->has_hook_timeout ? c->hook_timeout : OVS_CONF_DEFAULT_HOOK_TIMEOUT;
}

int ovs_conf_check_names(const struct ovs_conf *c)
{
	for (int g = 0; g < 2; g++) {
		char **names = g ? c->allow_groups : c->allow_users;

		for (char **p = names; p && *p; p++) {
			bool known;

			/* not found, or the lookup failed: both unknown */
			known = g ? getgrnam(*p) != NULL : getpwnam(*p) != NULL;
			if (!known)
				return ovs_err(EINVAL, "%s:%u: %s: no such %s '%s'", c->path,
					       c->line[g ? K_ALLOW_GROUPS : K_ALLOW_USERS],
					       g ? "ALLOW_GROUPS" : "ALLOW_USERS",
					       g ? "group" : "user", *p);
		}
	}
	return 0;
}
