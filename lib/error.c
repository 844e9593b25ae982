/* Thread-local error messages: the library explains, the CLI prints. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "libovsnap.h"

static __thread char last_error[1024];

const char *ovs_last_error(void)
{
	return last_error;
}

static int vset(int err, const char *fmt, va_list ap, bool keep)
{
	char msg[sizeof(last_error) * 2 + 4];

	if (err < 0)
		err = -err;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (keep && last_error[0]) {
		size_t n = strlen(msg);

		snprintf(msg + n, sizeof(msg) - n, ": %s", last_error);
	}
	snprintf(last_error, sizeof(last_error), "%s", msg);
	return -err;
}

int ovs_err(int err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vset(err, fmt, ap, false);
	va_end(ap);
	return rc;
}

int ovs_err_keep(int err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vset(err, fmt, ap, true);
	va_end(ap);
	return rc;
}
