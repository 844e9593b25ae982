/*
 * What changed a volume, to syslog (the journal where systemd runs): every
 * take, drop, merge, hold, release, retention decision, fsck repair and
 * forget, as one line "volume=SRC snapshot=ID what ...", so that an admin
 * can grep one volume's history and match it with ovsnapd's own lines,
 * which start with the same "volume=SRC".  Facility LOG_DAEMON, ident
 * "ovsnap" unless the program opened the log itself (ovsnapd).
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <syslog.h>

#include "ovsnap-private.h"

static bool opened;

void ovs_log_open(const char *ident)
{
	openlog(ident, LOG_PID, LOG_DAEMON);
	opened = true;
}

void ovs_log(const struct ovs_volume *v, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!opened)
		ovs_log_open("ovsnap");
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	syslog(LOG_NOTICE, "volume=%s %s", v ? ovs_volume_source(v) : "-", msg);
}
