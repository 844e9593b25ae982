/*
 * Checks a volume must pass before its snapshot mount goes up (first take
 * and every activation): one volume per subtree (DESIGN.md rule 17) and no
 * other filesystem inside SRC (rule 15).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ovsnap-private.h"

/*
 * Where a path lies on its filesystem: the device of the mount that holds
 * it (ovsnap's own FUSE mounts looked through) and the path inside that
 * filesystem (the mount's root for a bind mount, then the rest).  Two
 * paths that reach the same directory through a bind mount or a symlink
 * (callers pass realpath()s or the registry's canonical paths) get the
 * same location.  From the mount table only: no stat(), so a hung or dead
 * snapshot mount cannot hang the check.
 */
struct fs_location {
	dev_t dev;
	char *path;
};

static int locate(const char *path, struct fs_location *loc)
{
	struct ovs_mountinfo mi;
	const char *rest;
	size_t tlen;
	int rc;

	loc->path = NULL;
	rc = ovs_mount_find(path, &mi);
	if (rc < 0)
		return rc;
	tlen = strlen(mi.target);
	rest = strcmp(mi.target, "/") == 0 ? path : path + tlen;
	if (asprintf(&loc->path, "%s%s", strcmp(mi.fsroot, "/") == 0 && *rest ? "" : mi.fsroot,
		     rest) < 0) {
		loc->path = NULL;
		rc = ovs_err(ENOMEM, "out of memory");
	}
	loc->dev = mi.devno;
	ovs_mountinfo_clear(&mi);
	return rc;
}

/* 1 if a lies inside b or is b. */
static bool loc_inside(const struct fs_location *a, const struct fs_location *b)
{
	return a->path && b->path && a->dev == b->dev && ovs_path_inside(a->path, b->path);
}

enum { NEST_NONE, NEST_SRC_IN_SRC, NEST_SRC_HOLDS_SRC, NEST_SRC_IN_STORE,
       NEST_SRC_HOLDS_STORE, NEST_STORE_IN_SRC, NEST_STORE_HOLDS_SRC };

static int nesting_of(const struct fs_location *src, const struct fs_location *store,
		      const struct ovs_volume *w)
{
	struct fs_location wsrc = { 0 }, wstore = { 0 };
	int how = NEST_NONE;

	/* a volume whose paths cannot be placed is skipped, not fatal */
	if (locate(ovs_volume_source(w), &wsrc) < 0 || locate(ovs_volume_store(w), &wstore) < 0)
		goto out;
	if (loc_inside(src, &wsrc))
		how = NEST_SRC_IN_SRC;
	else if (loc_inside(&wsrc, src))
		how = NEST_SRC_HOLDS_SRC;
	else if (loc_inside(src, &wstore))
		how = NEST_SRC_IN_STORE;
	else if (loc_inside(&wstore, src))
		how = NEST_SRC_HOLDS_STORE;
	else if (store && loc_inside(store, &wsrc))
		how = NEST_STORE_IN_SRC;
	else if (store && loc_inside(&wsrc, store))
		how = NEST_STORE_HOLDS_SRC;
out:
	free(wsrc.path);
	free(wstore.path);
	return how;
}

int ovs_check_nesting(const char *src, const char *store, const char *self_store)
{
	struct fs_location lsrc = { 0 }, lstore = { 0 };
	struct ovs_volume **vols = NULL;
	size_t n = 0;
	int rc;

	rc = locate(src, &lsrc);
	if (rc == 0 && store)
		rc = locate(store, &lstore);
	if (rc == 0)
		rc = ovs_volume_list(&vols, &n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct ovs_volume *w = vols[i];
		const char *ws = ovs_volume_source(w), *state;

		if (self_store && strcmp(ovs_volume_store(w), self_store) == 0)
			continue;
		state = ovs_volume_problem(w) ? "broken" :
			ovs_volume_active(w) ? "active" : "inactive";
		switch (nesting_of(&lsrc, store ? &lstore : NULL, w)) {
		case NEST_NONE:
			break;
		case NEST_SRC_IN_SRC:
			rc = ovs_err(EBUSY, "%s is inside the volume %s (%s): a volume inside "
				     "another would write behind its snapshot mount; take "
				     "snapshots of %s instead", src, ws, state, ws);
			break;
		case NEST_SRC_HOLDS_SRC:
			rc = ovs_err(EBUSY, "%s holds the volume %s (%s): a volume around "
				     "another would write behind its snapshot mount", src, ws, state);
			break;
		case NEST_SRC_IN_STORE:
			rc = ovs_err(EBUSY, "%s is inside the store %s of the volume %s (%s)",
				     src, ovs_volume_store(w), ws, state);
			break;
		case NEST_SRC_HOLDS_STORE:
			rc = ovs_err(EBUSY, "%s holds the store %s of the volume %s (%s): its "
				     "layers would change behind that volume's back", src,
				     ovs_volume_store(w), ws, state);
			break;
		case NEST_STORE_IN_SRC:
			rc = ovs_err(EBUSY, "the store %s would be inside the volume %s (%s): "
				     "use --store DIR outside every volume", store, ws, state);
			break;
		case NEST_STORE_HOLDS_SRC:
			rc = ovs_err(EBUSY, "the store %s would hold the volume %s (%s): use "
				     "--store DIR outside every volume", store, ws, state);
			break;
		}
	}
	ovs_volume_list_free(vols, n);
	free(lsrc.path);
	free(lstore.path);
	return rc;
}

int ovs_detached_socket(pid_t pid, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/detached-%d.sock", ovs_run_dir(), (int)pid) >= len)
		return ovs_err(ENAMETOOLONG, "run directory path too long");
	return 0;
}

/* ---- other filesystems inside SRC ------------------------------------------ */

struct walk_frame {
	char **names;		/* subdirectories still to visit */
	size_t n, next;
	dev_t dev;
	ino_t ino;
};

static void frame_free(struct walk_frame *f)
{
	for (size_t i = f->next; i < f->n; i++)
		free(f->names[i]);
	free(f->names);
	memset(f, 0, sizeof(*f));
}

/* The subdirectories of fd (its own fd is kept open). */
static int list_subdirs(int fd, struct walk_frame *f)
{
	struct dirent *de;
	struct stat st;
	size_t cap = 0;
	int dfd, rc = 0;
	DIR *d;

	if (fstat(fd, &st) < 0)
		return -errno;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	while ((errno = 0, de = readdir(d))) {
		char **nv;

		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (f->n == cap) {
			nv = realloc(f->names, (cap = cap ? cap * 2 : 16) * sizeof(*nv));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			f->names = nv;
		}
		f->names[f->n] = strdup(de->d_name);
		if (!f->names[f->n]) {
			rc = -ENOMEM;
			break;
		}
		f->n++;
	}
	if (rc == 0 && errno)
		rc = -errno;
	closedir(d);
	return rc;
}

/*
 * Walk the tree below dirfd for a directory on another device: a btrfs
 * subvolume (or a mount point, where dirfd's tree shows mounts).  Bounded
 * in stack and open files for any depth: one fd, the current directory,
 * and ".." to climb back, checked against the identity recorded on the way
 * down.  1 with *where (malloc'ed, relative to dirfd) when found, 0 when
 * not, -errno on failure.
 */
int ovs_find_other_fs(int dirfd, char **where)
{
	struct walk_frame *stack;
	size_t depth = 0, cap = 16;
	int cur, rc = 0;

	*where = NULL;
	stack = calloc(cap, sizeof(*stack));
	if (!stack)
		return ovs_err(ENOMEM, "out of memory");
	cur = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0) {
		free(stack);
		return ovs_err(errno, "open: %m");
	}
	rc = list_subdirs(cur, &stack[0]);
	depth = 1;
	if (rc < 0)
		rc = ovs_err(-rc, "read SRC: %s", strerror(-rc));
	while (rc == 0 && depth > 0) {
		struct walk_frame *top = &stack[depth - 1], *parent;
		struct stat st;
		int fd;

		if (top->next == top->n) {
			/* this directory is done: back to its parent */
			frame_free(&stack[--depth]);
			if (depth == 0)
				break;
			parent = &stack[depth - 1];
			fd = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != parent->dev ||
			    st.st_ino != parent->ino) {
				if (fd >= 0)
					close(fd);
				rc = ovs_err(EAGAIN, "SRC changed while it was checked; try again");
				break;
			}
			close(cur);
			cur = fd;
			free(parent->names[parent->next++]);
			continue;
		}
		fd = openat(cur, top->names[top->next], O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
		if (fd < 0) {
			/* not a directory after all, or gone since */
			free(top->names[top->next++]);
			continue;
		}
		if (fstat(fd, &st) < 0) {
			rc = ovs_err(errno, "stat: %m");
			close(fd);
			break;
		}
		if (st.st_dev != stack[0].dev) {
			/* the path from the root, for the message */
			size_t len = 1;
			char *p;

			for (size_t i = 0; i < depth; i++)
				len += strlen(stack[i].names[stack[i].next]) + 1;
			p = malloc(len);
			if (p) {
				p[0] = '\0';
				for (size_t i = 0; i < depth; i++) {
					if (i)
						strcat(p, "/");
					strcat(p, stack[i].names[stack[i].next]);
				}
			}
			*where = p;
			close(fd);
			rc = p ? 1 : ovs_err(ENOMEM, "out of memory");
			break;
		}
		if (depth == cap) {
			struct walk_frame *ns = realloc(stack, cap * 2 * sizeof(*ns));

			if (!ns) {
				rc = ovs_err(ENOMEM, "out of memory");
				close(fd);
				break;
			}
			stack = ns;
			memset(stack + cap, 0, cap * sizeof(*ns));
			cap *= 2;
		}
		rc = list_subdirs(fd, &stack[depth]);
		depth++;
		close(cur);
		cur = fd;
		if (rc < 0)
			rc = ovs_err(-rc, "read SRC: %s", strerror(-rc));
	}
	while (depth > 0)
		frame_free(&stack[--depth]);
	free(stack);
	close(cur);
	return rc;
}
