/* sd_notify(3) without libsystemd (cmd/sd-notify.c). */
#ifndef OVSNAP_SD_NOTIFY_H
#define OVSNAP_SD_NOTIFY_H

/* Send state ("READY=1", "STATUS=...", lines joined by '\n') to
 * $NOTIFY_SOCKET: 0 (also when it is unset) or -errno.  The first call
 * takes $NOTIFY_SOCKET out of the environment (state NULL: only that), so
 * nothing the daemon starts later reports to its service manager. */
int ovs_sd_notify(const char *state);

#endif
