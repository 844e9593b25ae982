/*
 * The control channel between the ovsnap CLI and a volume's daemon: a
 * SOCK_SEQPACKET unix socket at ovs_volume_socket(v), one request and one
 * reply per message, text, at most OVS_CTL_MSG_MAX bytes.
 *
 * Requests (the CLI holds the volume lock and passes its fd along with
 * "take", "merge-active" and "drop-active" as SCM_RIGHTS, so the lock
 * stays held until the daemon is done even if the CLI dies):
 *   "status"              -> "ok pid=<pid> layer=<id> epoch=<n> open=<n>
 *                            deferred=<n> barrier=0|1 preserving=<n>"
 *   "quiesce"             -> "ok"       (once nothing preserves into a
 *                            layer older than the active one)
 *   "take <name>|-"       -> "ok <id>"  (barrier, flush, sync, register,
 *                            switch, release: DESIGN.md rules 10, 12, 13)
 *   "merge-active <A> <B>" -> "ok <A>" (B is the layer the daemon preserves
 *                            into; under the barrier, fold A..B into A
 *                            with ovs_merge_snapshots_flags(), switch to
 *                            A's layer, bump the epoch, release; the
 *                            volume lock fd comes along as for "take")
 *   "drop-active <id>"    -> "ok <A>"  (the same for a drop of the newest:
 *                            A is the snapshot before it, or 0 when it was
 *                            the only one and nothing is preserved now)
 *   "stop [lazy]"         -> "ok"       (unmount and exit; refuses with
 *                            EBUSY while files are open unless lazy)
 * Any failure is "err <errno> <message>".
 */
#ifndef OVSNAP_CONTROL_H
#define OVSNAP_CONTROL_H

#include <stddef.h>

#define OVS_CTL_MSG_MAX 4096

/* Client side: connect, send req (with fd_to_pass >= 0 attached), read the
 * reply into buf.  An "err N msg" reply returns -N with msg as the error. */
int ovs_ctl_call(const char *sockpath, const char *req, int fd_to_pass,
		 char *reply, size_t len, int timeout_ms);

/*
 * Wait until the volume's daemon, if one runs, preserves into no layer but
 * its active one ("quiesce" -> "ok"): right after a take, a request that
 * began preserving before it may still be writing into the layer the take
 * retired.  Call with the volume lock held, before changing an older
 * layer; no take can retire another one meanwhile.
 */
struct ovs_volume;
int ovs_ctl_quiesce(const struct ovs_volume *v);

/* Server side. */
int ovs_ctl_listen(const char *sockpath);	/* returns the listening fd */
/* Receive one request on a connected fd; *fd_out gets a passed fd or -1. */
int ovs_ctl_recv(int fd, char *buf, size_t len, int *fd_out);
int ovs_ctl_reply(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
