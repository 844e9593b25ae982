/*
 * Who keeps a mount busy, for the messages of deactivate and umount: the
 * processes with a file, working directory or mapping on the filesystem
 * mounted at a path (lib/procs.c finds them), named as ps would.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"

/* The command name of pid (/proc/PID/comm), or "?". */
static void comm_of(pid_t pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f || !fgets(buf, len, f))
		snprintf(buf, len, "?");
	else
		buf[strcspn(buf, "\n")] = '\0';
	if (f)
		fclose(f);
}

void ovs_mount_users_text(const char *path, char *buf, size_t len)
{
	size_t n = 0, used = 0;
	pid_t *pids = NULL, self = getpid();
	struct stat st;

	buf[0] = '\0';
	if (stat(path, &st) < 0 || ovs_dev_users(st.st_dev, &pids, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		char comm[32];
		int w;

		if (pids[i] == self)
			continue;
		comm_of(pids[i], comm, sizeof(comm));
		w = snprintf(buf + used, len - used, "%s%d (%s)", used ? ", " : "", (int)pids[i],
			     comm);
		if (w < 0 || (size_t)w >= len - used) {
			/* cut at the last whole entry */
			char *comma = strrchr(buf, ',');

			if (comma && len - (comma - buf) > 5)
				snprintf(comma, len - (comma - buf), ", ...");
			break;
		}
		used += w;
	}
	free(pids);
}
