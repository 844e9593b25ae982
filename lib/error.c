/* Thread-local error messages: the library explains, the CLI prints. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libovsnap.h"

/*
 * The message is as long as it needs to be: it names paths, and a path
 * may be longer than any fixed buffer (DESIGN.md rule 18), so a cut one
 * would name another file, or none.  Only when memory for it runs out
 * does a fixed buffer take it, cut where it must with an explicit
 * marker.  The key frees a thread's message when the thread ends (the
 * daemon's workers come and go).
 */
#define CUT_MARK	"... (cut: out of memory)"

static __thread char *last_error;	/* NULL: none; or cut_buf */
static __thread char cut_buf[1024];
static pthread_key_t last_error_key;
static pthread_once_t last_error_once = PTHREAD_ONCE_INIT;

static void last_error_free(void *p)
{
	if (p != cut_buf)
		free(p);
}

static void last_error_key_make(void)
{
	(void)pthread_key_create(&last_error_key, last_error_free);
}

const char *ovs_last_error(void)
{
	return last_error ? last_error : "";
}

static void set_message(char *msg)
{
	char *old = last_error;

	last_error = msg;
	pthread_once(&last_error_once, last_error_key_make);
	(void)pthread_setspecific(last_error_key, msg);
	if (old != cut_buf && old != msg)
		free(old);
}

static int vset(int err, const char *fmt, va_list ap, bool keep)
{
	const char *prev = keep ? ovs_last_error() : "";
	char *msg = NULL, *full = NULL;
	va_list again;

	if (err < 0)
		err = -err;
	va_copy(again, ap);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	if (msg && *prev) {
		if (asprintf(&full, "%s: %s", msg, prev) < 0)
			full = NULL;
		free(msg);
		msg = full;
	}
	if (msg) {
		set_message(msg);
	} else {
		/* no memory: as much as the buffer holds, said to be cut */
		char tmp[sizeof(cut_buf)];
		int n = vsnprintf(tmp, sizeof(tmp), fmt, again);

		if (n >= 0 && *prev)
			n += snprintf(tmp + strlen(tmp), sizeof(tmp) - strlen(tmp), ": %s", prev);
		if (n >= (int)sizeof(tmp))
			strcpy(tmp + sizeof(tmp) - sizeof(CUT_MARK), CUT_MARK);
		memcpy(cut_buf, tmp, sizeof(tmp));
		set_message(cut_buf);
	}
	va_end(again);
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
