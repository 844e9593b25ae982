/*
 * Unit tests of the volume lock and the intent record: a second command
 * fails at once naming the holder's pid and command, or waits and gets the
 * lock when the holder exits; intents survive as written and clear.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ovsnap-private.h"

#include "check.h"

/* A volume whose store is a plain temp dir: enough for lock and intent. */
static struct ovs_volume *temp_volume(char *dir)
{
	struct ovs_volume *v = calloc(1, sizeof(*v));

	v->refcount = 1;
	v->lockfd = -1;
	v->source = strdup("/srv/data");
	v->store = strdup(dir);
	v->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return v;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_contention(char *dir)
{
	struct ovs_volume *v = temp_volume(dir);
	int ready[2], go[2];
	char want[64], c;
	pid_t child;
	int64_t t0;

	CHECK(pipe(ready) == 0 && pipe(go) == 0, "pipe: %m");
	child = fork();
	if (child == 0) {
		struct ovs_volume *cv = temp_volume(dir);

		if (ovs_volume_lock(cv, false, "take /srv/data") < 0)
			_exit(2);
		write(ready[1], "r", 1);
		read(go[0], &c, 1);	/* hold until the parent says so */
		usleep(300 * 1000);
		_exit(0);		/* exit releases the lock */
	}
	CHECK(read(ready[0], &c, 1) == 1, "child did not take the lock");

	CHECK(ovs_volume_lock(v, false, "list") == -EBUSY, "no -EBUSY while held");
	snprintf(want, sizeof(want), "take /srv/data (pid %d) holds its lock", (int)child);
	CHECK(strstr(ovs_last_error(), want) && strstr(ovs_last_error(), "volume /srv/data is busy"),
	      "message '%s' does not name the holder '%s'", ovs_last_error(), want);
	CHECK(ovs_volume_lock_fd(v) == -1, "a failed lock left an fd");

	t0 = now_ms();
	CHECK(write(go[1], "g", 1) == 1, "pipe write");
	CHECK(ovs_volume_lock(v, true, "drop /srv/data") == 0, "wait failed: %s", ovs_last_error());
	CHECK(now_ms() - t0 >= 250, "got the lock before the holder exited");
	CHECK(ovs_volume_lock_fd(v) >= 0, "no lock fd");
	{
		int status;

		waitpid(child, &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
	}

	/* now the parent holds it: a new child must see the parent's note */
	child = fork();
	if (child == 0) {
		struct ovs_volume *cv = temp_volume(dir);
		int rc = ovs_volume_lock(cv, false, "x");

		snprintf(want, sizeof(want), "drop /srv/data (pid %d)", (int)getppid());
		_exit(rc == -EBUSY && strstr(ovs_last_error(), want) ? 0 : 1);
	}
	{
		int status;

		waitpid(child, &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "second child did not see the parent as holder");
	}
	ovs_volume_unlock(v);
	CHECK(ovs_volume_lock_fd(v) == -1, "unlock kept the fd");
	CHECK(ovs_volume_lock(v, false, "again") == 0, "relock after unlock failed");
	ovs_volume_unref(v);
}

static void test_intent(char *dir)
{
	struct ovs_volume *v = temp_volume(dir);
	char buf[128];

	CHECK(ovs_intent_read(v, buf, sizeof(buf)) == 0 && buf[0] == '\0', "intent before write");
	CHECK(ovs_intent_write(v, "merge 3 5") == 0, "write: %s", ovs_last_error());
	CHECK(ovs_intent_read(v, buf, sizeof(buf)) == 0 && strcmp(buf, "merge 3 5") == 0,
	      "read back '%s'", buf);
	CHECK(ovs_intent_read(v, buf, 4) == -ENOBUFS, "short buffer accepted");
	CHECK(ovs_intent_write(v, "two\nlines") == -EINVAL, "multi-line intent accepted");
	CHECK(ovs_intent_clear(v) == 0, "clear");
	CHECK(ovs_intent_read(v, buf, sizeof(buf)) == 0 && buf[0] == '\0', "intent after clear");
	CHECK(ovs_intent_clear(v) == 0, "clearing twice");
	ovs_volume_unref(v);
}

int main(void)
{
	char dir[] = "/tmp/ovsnap-lock-test.XXXXXX", cmd[128];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_contention(dir);
	test_intent(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		failures++;
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("lock: all checks passed\n");
	return 0;
}
