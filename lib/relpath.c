/*
 * Names below SRC as chains of components (struct ovs_relpath, see
 * preserve.h).  The engine walks a chain one name at a time; these helpers
 * only convert to and from the '/'-joined form the tests, views, fsck and
 * the link map's records use, and shorten a chain for messages.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "preserve-int.h"

int ovs_relpath_split(const char *path, struct ovs_relpath *rp, void **mem)
{
	size_t len = strlen(path), n = 0, i;
	const char **v;
	char *buf, *p;

	/* n components have n - 1 slashes */
	if (*path) {
		n = 1;
		for (p = (char *)path; (p = strchr(p, '/')); p++)
			n++;
	}
	*mem = malloc(n * sizeof(*v) + len + 1);
	if (!*mem)
		return ovs_err(ENOMEM, "out of memory");
	v = *mem;
	buf = (char *)(v + n);
	memcpy(buf, path, len + 1);
	for (i = 0, p = buf; i < n; i++) {
		char *slash = strchr(p, '/');

		if (slash)
			*slash = '\0';
		if (!*p || !strcmp(p, ".") || !strcmp(p, "..")) {
			free(*mem);
			*mem = NULL;
			return ovs_err(EINVAL, "bad path component in %s", path);
		}
		v[i] = p;
		p = slash ? slash + 1 : p + strlen(p);
	}
	rp->names = v;
	rp->n = n;
	rp->srcdirfd = -1;
	rp->st = NULL;
	return 0;
}

char *ovs_relpath_join(const struct ovs_relpath *rp)
{
	size_t len = 0, i, pos = 0;
	char *s;

	for (i = 0; i < rp->n; i++)
		len += strlen(rp->names[i]) + 1;
	s = malloc(len ? len : 1);
	if (!s)
		return NULL;
	for (i = 0; i < rp->n; i++) {
		size_t l = strlen(rp->names[i]);

		if (i)
			s[pos++] = '/';
		memcpy(s + pos, rp->names[i], l);
		pos += l;
	}
	s[pos] = '\0';
	return s;
}

const char *ovs_relpath_describe(const struct ovs_relpath *rp, char *buf, size_t len)
{
	size_t pos = len - 1, i = rp->n;

	if (len < 8) {
		buf[0] = '\0';
		return buf;
	}
	buf[pos] = '\0';
	if (rp->n == 0) {
		buf[0] = '/';
		buf[1] = '\0';
		return buf;
	}
	/* From the end: the last names that fit whole, keeping room for a
	 * ".../" that says some were left out. */
	while (i > 0) {
		const char *name = rp->names[i - 1];
		size_t l = strlen(name), need = l + (i < rp->n), reserve = i > 1 ? 4 : 0;

		if (need + reserve > pos)
			break;
		if (i < rp->n)
			buf[--pos] = '/';
		pos -= l;
		memcpy(buf + pos, name, l);
		i--;
	}
	if (i == 0)
		return buf + pos;
	if (i == rp->n) {
		/* Not even the last name fits: its tail. */
		const char *name = rp->names[rp->n - 1];
		size_t l = pos - 3;

		pos -= l;
		memcpy(buf + pos, name + strlen(name) - l, l);
		pos -= 3;
		memcpy(buf + pos, "...", 3);
		return buf + pos;
	}
	pos -= 4;
	memcpy(buf + pos, ".../", 4);
	return buf + pos;
}
