/*
 * The one piece of the systemd notification protocol ovsnapd needs
 * (sd_notify(3)): a datagram to $NOTIFY_SOCKET, written out here so that
 * ovsnap does not depend on libsystemd.  Under ovsnapd@.service
 * (Type=notify), READY=1 is what makes `systemctl start` return.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sd-notify.h"

/* $NOTIFY_SOCKET, taken out of the environment on first use: what the
 * daemon runs must not talk to its service manager in its name. */
static const char *notify_socket(void)
{
	static char saved[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	static int taken;
	const char *env;

	if (!taken) {
		env = getenv("NOTIFY_SOCKET");
		if (env && strlen(env) < sizeof(saved))
			strcpy(saved, env);
		else if (env)
			saved[0] = '!';	/* too long: refused below */
		unsetenv("NOTIFY_SOCKET");
		taken = 1;
	}
	return saved;
}

int ovs_sd_notify(const char *state)
{
	const char *path = notify_socket();
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len;
	int fd, rc = 0;

	if (!state || !*path)
		return 0;
	len = strlen(path);
	/* A path, or '@' for a name in the abstract namespace. */
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
		return -EAFNOSUPPORT;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		   offsetof(struct sockaddr_un, sun_path) + len) < 0)
		rc = -errno;
	close(fd);
	return rc;
}
