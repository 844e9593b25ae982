/*
 * FUSE over io_uring (issue 12 item 3).  libfuse 3.18 serves a session
 * from one ring thread per CPU when the session was made with -o io_uring
 * and the kernel sets FUSE_OVER_IO_URING at INIT, which it does only while
 * /sys/module/fuse/parameters/enable_uring is Y.  That switch is the
 * admin's: the daemons read it to say why the rings are off, and never
 * write it.
 *
 * The ring threads call the operations directly, one request after the
 * other per CPU: nothing like ovsnapd's own request loop (daemon-loop.c)
 * sits in between, so ovsnapd refuses them (its take barrier would be
 * bypassed, and a worker that waited would stall its whole CPU's queue,
 * DESIGN.md rule 13).
 */
#define FUSE_USE_VERSION OVS_FUSE_USE_VERSION
#include <fuse_lowlevel.h>
#include <stdio.h>

#include "fuse-uring.h"

#define ENABLE_URING "/sys/module/fuse/parameters/enable_uring"

#ifdef HAVE_FUSE_URING
/* Why the kernel did not offer the rings. */
static const char *not_offered(void)
{
	FILE *f = fopen(ENABLE_URING, "re");
	int c = f ? fgetc(f) : EOF;

	if (f)
		fclose(f);
	if (!f)
		return "off (this kernel has no FUSE over io_uring: 6.14+ has it)";
	if (c == 'N')
		return "off (the kernel does not offer it: the admin's switch "
		       ENABLE_URING " is N)";
	return "off (the kernel did not offer it)";
}

const char *fuse_uring_choose(struct fuse_conn_info *conn, const char *refusal)
{
	/* Through conn->want, as the daemons' other flags: libfuse drops
	 * every change to conn->want if init changes conn->want_ext too
	 * (fuse_convert_to_conn_want_ext, "Both ... are set"). */
	if (!(conn->capable & FUSE_CAP_OVER_IO_URING)) {
		conn->want &= ~FUSE_CAP_OVER_IO_URING;
		return not_offered();
	}
	if (refusal) {
		conn->want &= ~FUSE_CAP_OVER_IO_URING;
		return refusal;
	}
	conn->want |= FUSE_CAP_OVER_IO_URING;
	/* A libfuse built without liburing and libnuma has the API but no
	 * rings: it logs "fuse: failed to start io-uring" right after. */
	return "on (one ring thread per CPU, unless libfuse logs that it failed to start io-uring)";
}

const char *fuse_uring_session_opt(void)
{
	return "io_uring";
}
#else
const char *fuse_uring_choose(struct fuse_conn_info *conn, const char *refusal)
{
	(void)conn;
	(void)refusal;
	return "off (built against libfuse < 3.18)";
}

const char *fuse_uring_session_opt(void)
{
	return NULL;
}
#endif
