/*
 * FUSE over io_uring (issue 12 item 3), chosen at INIT by both daemons.
 */
#ifndef OVS_FUSE_URING_H
#define OVS_FUSE_URING_H

struct fuse_conn_info;

/*
 * Takes FUSE over io_uring for this connection when the kernel offers it
 * and REFUSAL is NULL, refuses it otherwise (also when libfuse's own
 * FUSE_URING_ENABLE is in the environment).  Returns what happened, for
 * the start-up log: "on", or "off (why)".  libfuse starts the rings only
 * for a session made with -o io_uring (fuse_uring_session_opt()).
 */
const char *fuse_uring_choose(struct fuse_conn_info *conn, const char *refusal);

/* The session option that asks libfuse for the rings: "io_uring" when
 * built against libfuse 3.18+, NULL before. */
const char *fuse_uring_session_opt(void);

#endif
