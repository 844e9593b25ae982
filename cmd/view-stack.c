/*
 * The layer list of a viewed snapshot, kept current without any lock
 * shared with the snapshot-mount daemon: see the coherence argument in
 * view.h.  Path resolution itself is the library's resolver.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libmount.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "view.h"
#include "preserve.h"

/* ---- SRC's real root ---------------------------------------------------- */

/*
 * While the volume is active, SRC is covered by the snapshot mount.  The
 * view must read the real directory below it, without going through the
 * daemon: clone the mount that holds SRC (without its submounts, so the
 * snapshot mount is not part of the clone) and walk to SRC inside it.
 */
static int open_real_src(const char *src)
{
	struct ovs_mountinfo mi;
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	const char *rel;
	int treefd, fd, rc;

	rc = ovs_mount_find(src, &mi);
	if (rc < 0)
		return rc;
	rel = src + strlen(mi.target);
	while (*rel == '/')
		rel++;
	if (!*rel) {
		/* SRC is the root of its own mount (a --store volume): the
		 * clone of the top mount would be the snapshot mount itself. */
		ovs_mountinfo_clear(&mi);
		fd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		return fd < 0 ? ovs_err(errno, "cannot open %s: %m", src) : fd;
	}
	treefd = syscall(SYS_open_tree, AT_FDCWD, mi.target, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (treefd < 0) {
		rc = ovs_err(errno, "cannot clone the mount %s: %m", mi.target);
		ovs_mountinfo_clear(&mi);
		return rc;
	}
	fd = syscall(SYS_openat2, treefd, rel, &how, sizeof(how));
	rc = errno;
	close(treefd);
	ovs_mountinfo_clear(&mi);
	if (fd < 0)
		return ovs_err(rc, "cannot open %s below its snapshot mount: %s", src, strerror(rc));
	return fd;
}

/* ---- generations and stacks ------------------------------------------- */

int view_gen_read(struct view *vw, struct view_gen *g)
{
	struct stat st;

	if (fstatat(vw->storefd, OVS_REGISTRY_FILE, &st, 0) < 0)
		return -errno;
	g->dev = st.st_dev;
	g->ino = st.st_ino;
	g->mtime = st.st_mtim;
	return 0;
}

bool view_gen_equal(const struct view_gen *a, const struct view_gen *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec;
}

void view_stack_put(struct view_stack *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	for (size_t i = 0; i < s->nlayers; i++)
		if (s->layerfd[i] >= 0)
			close(s->layerfd[i]);
	if (s->rs)
		ovs_rstack_free(s->rs);
	free(s->layerfd);
	free(s->ids);
	free(s);
}

/*
 * Build the stack from the registry.  The generation is read BEFORE the
 * registry: if the registry changes while we read it, the stack carries
 * the older generation and the next validation refreshes again.
 */
static int build_stack(struct view *vw, struct view_stack **out)
{
	struct view_stack *s;
	struct view_gen g;
	size_t n, first = SIZE_MAX;
	int rc;

	rc = view_gen_read(vw, &g);
	if (rc < 0)
		return ovs_err(-rc, "cannot stat the registry: %s", strerror(-rc));
	rc = ovs_registry_load(vw->vol);
	if (rc < 0)
		return rc;
	n = ovs_snapshot_count(vw->vol);
	for (size_t i = 0; i < n; i++)
		if (ovs_snapshot_at(vw->vol, i)->id == vw->snap_id)
			first = i;
	if (first == SIZE_MAX)
		return ovs_err(ESTALE, "snapshot %" PRIu64 " no longer exists", vw->snap_id);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->refs = 1;
	s->srcfd = vw->srcfd;
	s->gen = g;
	s->nlayers = n - first;
	/* one more slot: the resolver takes the layers and SRC as one array */
	s->layerfd = calloc(s->nlayers + 1, sizeof(int));
	s->ids = calloc(s->nlayers, sizeof(uint64_t));
	if (!s->layerfd || !s->ids) {
		free(s->layerfd);
		free(s->ids);
		free(s);
		return -ENOMEM;
	}
	for (size_t i = 0; i <= s->nlayers; i++)
		s->layerfd[i] = -1;
	for (size_t i = 0; i < s->nlayers; i++) {
		s->ids[i] = ovs_snapshot_at(vw->vol, first + i)->id;
		/* from the store's fd, no symlink followed (DESIGN.md rule 20) */
		rc = ovs_snapshot_open_upper(vw->vol, s->ids[i], O_RDONLY);
		if (rc < 0)
			goto fail;
		s->layerfd[i] = rc;
	}
	s->layerfd[s->nlayers] = vw->srcfd;
	rc = ovs_rstack_new(s->layerfd, s->nlayers, vw->srcfd, &s->rs);
	if (rc < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	s->layerfd[s->nlayers] = -1;
	view_stack_put(s);
	return rc;
}

int view_refresh(struct view *vw)
{
	struct view_stack *s, *old;
	int rc;

	pthread_mutex_lock(&vw->lock);
	rc = build_stack(vw, &s);
	if (rc == 0) {
		old = vw->stack;
		vw->stack = s;
		view_stack_put(old);
	} else if (rc == -ESTALE) {
		vw->stale = true;
	}
	pthread_mutex_unlock(&vw->lock);
	if (rc < 0 && rc != -ESTALE)
		fprintf(stderr, "ovsnap-viewd: refresh: %s\n", ovs_last_error());
	return rc;
}

int view_stack_get(struct view *vw, struct view_stack **out)
{
	struct view_gen g = { 0 };
	int rc;

	for (int tries = 0;; tries++) {
		pthread_mutex_lock(&vw->lock);
		if (vw->stale) {
			pthread_mutex_unlock(&vw->lock);
			return -ESTALE;
		}
		if (view_gen_read(vw, &g) == 0 && view_gen_equal(&g, &vw->stack->gen)) {
			__atomic_add_fetch(&vw->stack->refs, 1, __ATOMIC_ACQ_REL);
			*out = vw->stack;
			pthread_mutex_unlock(&vw->lock);
			return 0;
		}
		pthread_mutex_unlock(&vw->lock);
		rc = view_refresh(vw);
		if (rc < 0 && (rc == -ESTALE || tries > 100))
			return rc;
	}
}

int view_open(struct view *vw, const char *src, uint64_t id)
{
	int rc;

	memset(vw, 0, sizeof(*vw));
	vw->srcfd = vw->storefd = -1;
	vw->snap_id = id;
	pthread_mutex_init(&vw->lock, NULL);
	vw->src = strdup(src);
	if (!vw->src)
		return -ENOMEM;
	rc = ovs_volume_open(src, &vw->vol);
	if (rc < 0)
		return rc;
	vw->storefd = fcntl(ovs_volume_dirfd(vw->vol), F_DUPFD_CLOEXEC, 0);
	if (vw->storefd < 0)
		return ovs_err(errno, "cannot open the store %s: %m", ovs_volume_store(vw->vol));
	rc = open_real_src(src);
	if (rc < 0)
		return rc;
	vw->srcfd = rc;
	pthread_mutex_lock(&vw->lock);
	rc = build_stack(vw, &vw->stack);
	pthread_mutex_unlock(&vw->lock);
	return rc;
}

void view_close(struct view *vw)
{
	view_stack_put(vw->stack);
	if (vw->srcfd >= 0)
		close(vw->srcfd);
	if (vw->storefd >= 0)
		close(vw->storefd);
	if (vw->vol)
		ovs_volume_unref(vw->vol);
	free(vw->src);
	pthread_mutex_destroy(&vw->lock);
}

/* ---- paths of any length ------------------------------------------------- */

/* Bytes of path resolved by one openat2: well below PATH_MAX, and always
 * holding a '/' (a component is at most NAME_MAX bytes). */
#define VIEW_PATH_PIECE 2048

static int path_at(int dirfd, const char *path, bool whole_ok, int *dirfd_out,
		   const char **name_out, int *owned)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	const char *last = strrchr(path, '/'), *p = path;
	char piece[VIEW_PATH_PIECE + 1];
	int cur = dirfd, fd;

	*owned = -1;
	if (!last || (whole_ok && strlen(path) < PATH_MAX - 1)) {
		*dirfd_out = dirfd;
		*name_out = *path ? path : ".";
		return 0;
	}
	while (p < last) {
		size_t len = (size_t)(last - p);

		if (len > VIEW_PATH_PIECE) {
			/* end the piece at a '/' */
			len = VIEW_PATH_PIECE;
			while (len && p[len] != '/')
				len--;
			if (!len) {
				view_path_done(*owned);
				*owned = -1;
				return -ENAMETOOLONG;
			}
		}
		memcpy(piece, p, len);
		piece[len] = 0;
		fd = syscall(SYS_openat2, cur, piece, &how, sizeof(how));
		if (fd < 0) {
			fd = -errno;
			view_path_done(*owned);
			*owned = -1;
			return fd;
		}
		view_path_done(*owned);
		*owned = cur = fd;
		p += len;
		while (*p == '/')
			p++;
	}
	*dirfd_out = cur;
	*name_out = last + 1;
	return 0;
}

int view_path_at(int dirfd, const char *path, int *dirfd_out, const char **name_out,
		 int *owned)
{
	return path_at(dirfd, path, false, dirfd_out, name_out, owned);
}

void view_path_done(int owned)
{
	if (owned >= 0)
		close(owned);
}

/* ---- resolution and validation ------------------------------------------ */

int view_resolve(struct view_stack *s, const char *path, struct view_obj *o)
{
	struct ovs_rentry e;
	int rc = ovs_resolve_lookup(s->rs, path, &e);

	if (rc == -ENOTDIR)
		return -ENOENT;	/* below a non-directory: no such object */
	if (rc < 0)
		return rc;
	if (e.kind != OVS_R_ENTRY)
		return -ENOENT;
	memset(o, 0, sizeof(*o));
	o->layer = e.layer == (int)s->nlayers ? VIEW_SRC : e.layer;
	o->st = e.st;
	o->merges_src = S_ISDIR(e.st.st_mode) && o->layer != VIEW_SRC &&
			e.lowest == (int)s->nlayers;
	return 0;
}

/* The view_obj of a resolver entry (kind OVS_R_ENTRY). */
static void obj_of_entry(struct view_stack *s, const struct ovs_rentry *e, struct view_obj *o)
{
	memset(o, 0, sizeof(*o));
	o->layer = e->layer == (int)s->nlayers ? VIEW_SRC : e->layer;
	o->st = e->st;
	o->merges_src = S_ISDIR(e->st.st_mode) && o->layer != VIEW_SRC &&
			e->lowest == (int)s->nlayers;
}

int view_resolve_child(struct view_stack *s, const struct ovs_rdir *d, const char *name,
		       struct view_obj *o)
{
	struct ovs_rentry e;
	int rc = ovs_resolve_child(s->rs, d, name, &e);

	if (rc < 0)
		return rc;
	if (e.kind != OVS_R_ENTRY)
		return -ENOENT;
	obj_of_entry(s, &e, o);
	return 0;
}

int view_obj_dirfd(struct view_stack *s, const struct view_obj *o)
{
	return o->layer == VIEW_SRC ? s->srcfd : s->layerfd[o->layer];
}

/* Whether path is covered in U_n, by the engine's own definition (an
 * entry at path, or an ancestor that is a whiteout, a non-directory or an
 * opaque directory). */
static int covered_in_newest(struct view_stack *s, const char *path)
{
	return ovs_covered_at(s->layerfd[s->nlayers - 1], path);
}

int view_src_answer_check(struct view *vw, struct view_stack *s, const char *path,
			  const struct view_gen *g)
{
	struct view_gen now = { 0 };
	int rc;

	if (view_gen_read(vw, &now) < 0 || !view_gen_equal(&now, g))
		return -EAGAIN;
	rc = covered_in_newest(s, path);
	if (rc < 0)
		return rc;
	return rc ? -EAGAIN : 0;
}

/* FNV-1a over what U_n holds at path: whether it is there, what it is,
 * and its entries.  Preserving anything inside a directory adds an entry
 * (or the directory itself) in U_n, so a listing from SRC is still right
 * when the signature did not move. */
uint64_t view_newest_signature(struct view_stack *s, const char *path)
{
	int top = s->layerfd[s->nlayers - 1];
	uint64_t h = 1469598103934665603ULL;
	struct stat st;
	struct dirent *de;
	const char *name;
	int fd, dfd, owned = -1;
	DIR *d;

#define MIX(p, len) do { const unsigned char *_c = (const void *)(p); \
	for (size_t _i = 0; _i < (len); _i++) { h ^= _c[_i]; h *= 1099511628211ULL; } } while (0)
	if (*path && covered_in_newest(s, path) == 0)
		return h;	/* nothing at path in U_n */
	if (view_path_at(top, path, &dfd, &name, &owned) < 0 ||
	    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		/* covered by an ancestor (whiteout, file, opaque dir) */
		view_path_done(owned);
		MIX("ancestor", 8);
		return h;
	}
	MIX(&st.st_ino, sizeof(st.st_ino));
	MIX(&st.st_mode, sizeof(st.st_mode));
	if (!S_ISDIR(st.st_mode)) {
		view_path_done(owned);
		return h;
	}
	if (ovl_is_opaque_at(dfd, name) == 1)
		MIX("opaque", 6);
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	view_path_done(owned);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		MIX("unreadable", 10);
		return h;
	}
	/* order-independent: sum of per-name hashes */
	uint64_t sum = 0;
	while ((de = readdir(d))) {
		uint64_t e = 1469598103934665603ULL;

		for (const char *c = de->d_name; *c; c++) {
			e ^= (unsigned char)*c;
			e *= 1099511628211ULL;
		}
		e ^= de->d_ino;
		e *= 1099511628211ULL;
		sum += e;
	}
	closedir(d);
	MIX(&sum, sizeof(sum));
#undef MIX
	return h;
}

int view_open_obj(struct view_stack *s, const char *path, const struct view_obj *o,
		  int flags)
{
	struct open_how how = {
		.flags = flags | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	bool dir = flags & O_DIRECTORY;
	const char *name;
	int fd, dfd, owned, rc;
	struct stat st;

	/* openat2 below follows no symlink: the whole path may go to it */
	rc = path_at(view_obj_dirfd(s, o), path, true, &dfd, &name, &owned);
	if (rc < 0)
		return rc;
	/* reading a snapshot changes nothing, not even access times */
	how.flags |= O_NOATIME;
	/* SRC's object may have become a FIFO since it was resolved (a
	 * deactivated volume has nothing to check the answer against): an
	 * open of it must not wait for a writer, holding this thread. */
	if (!dir)
		how.flags |= O_NONBLOCK;
	fd = syscall(SYS_openat2, dfd, name, &how, sizeof(how));
	if (fd < 0 && errno == EPERM && (how.flags & O_NOATIME)) {
		how.flags &= ~O_NOATIME;
		fd = syscall(SYS_openat2, dfd, name, &how, sizeof(how));
	}
	rc = fd < 0 ? -errno : fd;
	view_path_done(owned);
	if (fd < 0 || dir)
		return rc;
	/* Only regular files are opened through a view (the kernel serves
	 * FIFOs and devices itself): anything else is not the object the
	 * kernel asked for. */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    fcntl(fd, F_SETFL, (int)(how.flags & ~O_NONBLOCK) & ~O_ACCMODE) < 0) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* ---- what the view shows ---------------------------------------------- */

/* Parse "ino=<n> ctime=<s>.<ns> btime=..." of the origin xattr. */
static bool read_origin(int dirfd, const char *path, ino_t *ino, struct timespec *ctime)
{
	char buf[256];
	ssize_t n;
	unsigned long long i, sec, nsec;
	const char *name;
	int dfd, owned;
	char *p;

	if (view_path_at(dirfd, path, &dfd, &name, &owned) < 0)
		return false;
	n = ovs_lgetxattrat(dfd, name, OVS_XATTR_ORIGIN, buf, sizeof(buf) - 1);
	view_path_done(owned);
	if (n <= 0)
		return false;
	buf[n] = 0;
	p = strstr(buf, "ino=");
	if (!p || sscanf(p, "ino=%llu", &i) != 1)
		return false;
	*ino = i;
	p = strstr(buf, "ctime=");
	if (p && sscanf(p, "ctime=%llu.%llu", &sec, &nsec) == 2) {
		ctime->tv_sec = sec;
		ctime->tv_nsec = nsec;
	}
	return true;
}

ino_t view_shown_ino(struct view_stack *s, const char *path, const struct view_obj *o)
{
	struct timespec ct = o->st.st_ctim;
	ino_t ino;

	if (o->layer != VIEW_SRC && read_origin(view_obj_dirfd(s, o), path, &ino, &ct))
		return ino;
	return o->st.st_ino;
}

void view_fill_stat(struct view_stack *s, const char *path, const struct view_obj *o,
		    struct stat *st)
{
	struct stat root;
	ino_t ino;

	*st = o->st;
	/* the root of every layer stands for SRC's root, whose number never
	 * changes */
	if (!*path) {
		if (fstat(s->srcfd, &root) == 0)
			st->st_ino = root.st_ino;
	} else if (o->layer != VIEW_SRC &&
		   read_origin(view_obj_dirfd(s, o), path, &ino, &st->st_ctim)) {
		st->st_ino = ino;
	}
	/* overlayfs shows merged directories with nlink 1 ("unknown") */
	if (S_ISDIR(st->st_mode) && (o->merges_src || o->layer != VIEW_SRC))
		st->st_nlink = 1;
}

/* ---- merged listings ---------------------------------------------------- */

int view_list(struct view_stack *s, const char *path, struct view_dirent **ents,
	      size_t *n, bool *from_src)
{
	struct ovs_rdirent *re;
	struct view_dirent *out;
	size_t cnt;
	int rc;

	rc = ovs_resolve_readdir(s->rs, path, &re, &cnt);
	if (rc < 0)
		return rc;
	out = calloc(cnt ? cnt : 1, sizeof(*out));
	if (!out) {
		ovs_resolve_dirents_free(re, cnt);
		return -ENOMEM;
	}
	*from_src = false;
	for (size_t i = 0; i < cnt; i++) {
		struct view_obj o = {
			.layer = re[i].e.layer == (int)s->nlayers ? VIEW_SRC : re[i].e.layer,
			.st = re[i].e.st,
		};
		char *p;

		o.merges_src = S_ISDIR(o.st.st_mode) && o.layer != VIEW_SRC &&
			       re[i].e.lowest == (int)s->nlayers;
		/* take the name over: the resolver's copy is ours now */
		out[i].name = re[i].name;
		re[i].name = NULL;
		out[i].type = IFTODT(re[i].e.st.st_mode);
		if (o.layer == VIEW_SRC)
			*from_src = true;
		if (asprintf(&p, "%s%s%s", path, *path ? "/" : "", out[i].name) < 0) {
			ovs_resolve_dirents_free(re, cnt);
			view_list_free(out, cnt);
			return -ENOMEM;
		}
		/* what a lookup of the entry shows: a copied-up object
		 * carries its original inode number and ctime */
		view_fill_stat(s, p, &o, &out[i].st);
		out[i].ino = out[i].st.st_ino;
		free(p);
	}
	ovs_resolve_dirents_free(re, cnt);
	*ents = out;
	*n = cnt;
	return 0;
}

void view_list_free(struct view_dirent *ents, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
}
