/*
 * Unit tests of the registry file: format/parse round trip, the strict
 * parser's refusals (each with its line number), and atomic replacement
 * surviving SIGKILL at any instant.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ovsnap-private.h"

#include "check.h"

static const char canonical[] =
	"ovsnap-registry 2\n"
	"source /srv/my data/\\x0a\\x5cweird\n"
	"fstype xfs\n"
	"fsuuid 5c0c1b2e-3a1d-4c2e-9f00-0123456789ab\n"
	"clone 1\n"
	"next-id 7\n"
	"active 1\n"
	"deactivated-ns 1764669000000000000\n"
	"activated-ns 1764669300000000000\n"
	"snapshot 1 - 1764669600123456789 frozen 0 manual\n"
	"snapshot 4 nightly.2026-12-02 1764669601000000000 frozen 1 timeline\n"
	"snapshot 6 before_upgrade 1764669602000000001 active 0 manual\n"
	"end\n";

static void test_round_trip(void)
{
	struct ovs_registry reg, again;
	char *text, *text2;
	size_t len, len2;

	CHECK(ovs_registry_parse("t", canonical, strlen(canonical), &reg) == 0,
	      "canonical text does not parse: %s", ovs_last_error());
	CHECK(strcmp(reg.source, "/srv/my data/\n\\weird") == 0, "source unescaped wrong: %s",
	      reg.source);
	CHECK(reg.nsnaps == 3 && reg.snaps[1].hold && reg.snaps[2].state == OVS_SNAP_ACTIVE,
	      "snapshots parsed wrong");
	CHECK(reg.next_id == 7 && reg.active && reg.can_clone &&
	      reg.deactivated_ns == 1764669000000000000 && reg.activated_ns == 1764669300000000000,
	      "header parsed wrong");
	CHECK(ovs_registry_format(&reg, &text, &len) == 0, "format failed");
	CHECK(len == strlen(canonical) && strcmp(text, canonical) == 0,
	      "format(parse(text)) differs:\n%s", text);
	CHECK(ovs_registry_parse("t", text, len, &again) == 0, "reparse failed");
	CHECK(ovs_registry_format(&again, &text2, &len2) == 0 && strcmp(text, text2) == 0,
	      "second round trip differs");

	/* an empty volume: no snapshot lines */
	struct ovs_registry empty = { .source = "/", .fstype = "ext4", .fsuuid = "fsid-1",
				      .next_id = 1 };
	char *t3;
	size_t l3;
	struct ovs_registry e2;

	CHECK(ovs_registry_format(&empty, &t3, &l3) == 0, "format empty");
	CHECK(ovs_registry_parse("t", t3, l3, &e2) == 0 && e2.nsnaps == 0 &&
	      strcmp(e2.source, "/") == 0, "empty registry round trip");
	free(t3);
	ovs_registry_clear(&e2);

	/* a registry written before activated-ns existed still loads, as
	 * activated-ns 0, and is written back with the key */
	static const char old[] =
		"ovsnap-registry 1\nsource /a\nfstype xfs\nfsuuid u\nclone 0\n"
		"next-id 2\nactive 1\ndeactivated-ns 5\nsnapshot 1 - 3 active 0\nend\n";
	CHECK(ovs_registry_parse("t", old, strlen(old), &e2) == 0 && e2.activated_ns == 0 &&
	      e2.deactivated_ns == 5 && e2.nsnaps == 1,
	      "registry without activated-ns: %s", ovs_last_error());
	CHECK(ovs_registry_format(&e2, &t3, &l3) == 0 && strstr(t3, "\nactivated-ns 0\n"),
	      "activated-ns not written");
	/* ... and a version 1 registry (before classes) is all manual, written
	 * back as version 2 */
	CHECK(e2.snaps[0].cls == OVS_CLASS_MANUAL && !strncmp(t3, "ovsnap-registry 2\n", 18) &&
	      strstr(t3, "\nsnapshot 1 - 3 active 0 manual\n"), "version 1 not upgraded:\n%s", t3);
	free(t3);
	ovs_registry_clear(&e2);
	free(text);
	free(text2);
	ovs_registry_clear(&reg);
	ovs_registry_clear(&again);
}

/* Descriptions and user data: escaped in the file, exact in memory, and
 * changed only by ovs_registry_change (checked first, one rewrite). */
static void test_attributes(void)
{
	static const char text[] =
		"ovsnap-registry 2\nsource /a\nfstype xfs\nfsuuid u\nclone 0\n"
		"next-id 3\nactive 1\ndeactivated-ns 0\nactivated-ns 0\n"
		"snapshot 1 - 3 frozen 0 manual\n"
		"snapshot-description 1  apt \\x5c upgrade  \n"
		"snapshot-userdata 1 a.b c d\n"
		"snapshot-userdata 1 z 1\n"
		"snapshot 2 - 4 active 0 post\nsnapshot-pre 2 1\nend\n";
	struct ovs_registry reg;
	struct ovs_userdata ud;
	char *out;
	size_t len;

	CHECK(ovs_registry_parse("t", text, strlen(text), &reg) == 0, "parse: %s",
	      ovs_last_error());
	CHECK(!strcmp(reg.snaps[0].description, " apt \\ upgrade  "), "description '%s'",
	      reg.snaps[0].description);
	CHECK(reg.snaps[0].nuserdata == 2 && !strcmp(reg.snaps[0].userdata[0].key, "a.b") &&
	      !strcmp(reg.snaps[0].userdata[0].value, "c d") &&
	      !strcmp(reg.snaps[0].userdata[1].value, "1"), "userdata parsed wrong");
	CHECK(reg.snaps[0].cls == OVS_CLASS_MANUAL && reg.snaps[1].cls == OVS_CLASS_POST &&
	      reg.snaps[1].pre == 1 && reg.snaps[0].pre == 0, "classes or pre parsed wrong");
	CHECK(ovs_registry_format(&reg, &out, &len) == 0 && !strcmp(out, text),
	      "attributes do not round-trip:\n%s", out);
	free(out);
	ovs_registry_clear(&reg);

	CHECK(ovs_description_check("caf\xc3\xa9 \"quoted\" {json}") == 0, "UTF-8 refused");
	CHECK(ovs_description_check("a\nb") == -EINVAL, "newline accepted");
	CHECK(ovs_description_check("a\x7f") == -EINVAL, "DEL accepted");
	CHECK(ovs_description_check("\xc2\x85") == -EINVAL, "C1 NEL accepted");
	CHECK(ovs_description_check("\xc3") == -EINVAL, "truncated UTF-8 accepted");
	CHECK(ovs_description_check("\xc0\xaf") == -EINVAL, "overlong UTF-8 accepted");
	CHECK(ovs_userdata_parse("k=v=w", &ud) == 0 && !strcmp(ud.key, "k") &&
	      !strcmp(ud.value, "v=w"), "k=v=w");
	CHECK(ovs_userdata_parse("k=", &ud) == 0 && ud.value[0] == 0, "k= (removal)");
	CHECK(ovs_userdata_parse("=v", &ud) == -EINVAL, "empty key accepted");
	CHECK(ovs_userdata_parse("a b=v", &ud) == -EINVAL, "key with a space accepted");
	CHECK(ovs_userdata_parse("kv", &ud) == -EINVAL, "no '=' accepted");
}

/* Replace line `lineno` (1-based) of the canonical text by `with` (NULL:
 * delete it). */
static char *edit(int lineno, const char *with)
{
	char *out = calloc(1, sizeof(canonical) + 256), *o = out;
	const char *p = canonical;

	for (int n = 1; *p; n++) {
		const char *nl = strchr(p, '\n') + 1;

		if (n != lineno) {
			memcpy(o, p, nl - p);
			o += nl - p;
		} else if (with) {
			o += sprintf(o, "%s", with);
		}
		p = nl;
	}
	return out;
}

struct corruption {
	const char *why;
	int lineno;		/* line replaced, 0 = use text */
	const char *with;	/* replacement text (with its newline) */
	const char *text;	/* whole text when lineno == 0 */
	int err_line;		/* expected "line N" */
	const char *err;	/* expected part of the message */
};

static const struct corruption corruptions[] = {
	{ "wrong magic", 1, "ovsnap-registri 1\n", NULL, 1, "not an ovsnap registry" },
	{ "future version", 1, "ovsnap-registry 3\n", NULL, 1, "unsupported registry version 3" },
	{ "unknown key", 3, "fstype xfs\ncolour blue\n", NULL, 4, "unknown key 'colour'" },
	{ "duplicate key", 5, "clone 1\nclone 0\n", NULL, 6, "duplicate key 'clone'" },
	{ "key missing before snapshots", 5, NULL, NULL, 9,
	  "snapshot before the header key 'clone'" },
	{ "missing key", 0, NULL, "ovsnap-registry 1\nsource /a\nfstype xfs\nfsuuid u\n"
	  "next-id 1\nactive 0\ndeactivated-ns 0\nend\n", 8, "missing key 'clone'" },
	{ "bad bool", 5, "clone yes\n", NULL, 5, "clone must be 0 or 1" },
	{ "bad number", 6, "next-id 7x\n", NULL, 6, "bad number '7x' for next-id" },
	{ "negative number", 6, "next-id -7\n", NULL, 6, "bad number '-7'" },
	{ "overflow", 6, "next-id 99999999999999999999\n", NULL, 6, "bad number" },
	{ "relative source", 2, "source srv\n", NULL, 2, "source is not an absolute path" },
	{ "bad escape", 2, "source /a\\x4\n", NULL, 2, "bad escape in the source path" },
	{ "unescaped control byte", 2, "source /a\tb\n", NULL, 2, "bad escape" },
	{ "duplicate id", 11, "snapshot 1 dup 1764669601000000000 frozen 1 manual\n", NULL, 11,
	  "duplicate snapshot id 1" },
	{ "ids out of order", 10, "snapshot 5 - 1764669600123456789 frozen 0 manual\n", NULL, 11,
	  "snapshot id 4 out of order (after 5)" },
	{ "id not below next-id", 12, "snapshot 7 x 1764669602000000001 active 0 manual\n", NULL, 12,
	  "snapshot id 7 is not below next-id 7" },
	{ "duplicate name", 12, "snapshot 6 nightly.2026-12-02 1764669602000000001 active 0 manual\n",
	  NULL, 12, "duplicate snapshot name" },
	{ "bad name", 12, "snapshot 6 ../x 1764669602000000001 active 0 manual\n", NULL, 12,
	  "bad snapshot name '../x'" },
	{ "too few fields", 12, "snapshot 6 x 1764669602000000001 active 0\n", NULL, 12,
	  "needs 6 fields" },
	{ "too many fields", 12, "snapshot 6 x 1764669602000000001 active 0 manual 9\n", NULL, 12,
	  "needs 6 fields" },
	{ "double space", 12, "snapshot 6  x 1764669602000000001 active 0 manual\n", NULL, 12,
	  "empty field" },
	{ "bad state", 12, "snapshot 6 x 1764669602000000001 live 0 manual\n", NULL, 12,
	  "unknown snapshot state 'live'" },
	{ "active not newest", 11, "snapshot 4 n 1764669601000000000 active 1 manual\n", NULL, 12,
	  "snapshot 4 is active but not the newest" },
	{ "newest frozen", 12, "snapshot 6 x 1764669602000000001 frozen 0 manual\n", NULL, 13,
	  "newest snapshot 6 is not active" },
	{ "bad hold", 12, "snapshot 6 x 1764669602000000001 active 2 manual\n", NULL, 12,
	  "hold must be 0 or 1" },
	{ "header after snapshots", 12,
	  "snapshot 6 x 1764669602000000001 active 0 manual\nactive 0\n", NULL, 13,
	  "'active' after the snapshots" },
	{ "empty line", 4, "\n", NULL, 4, "empty line" },
	{ "unknown class", 12, "snapshot 6 x 1764669602000000001 active 0 hourly\n", NULL, 12,
	  "unknown snapshot class 'hourly'" },
	{ "version 1 with a class", 1, "ovsnap-registry 1\n", NULL, 10, "needs 5 fields" },
	{ "description of another snapshot", 12, "snapshot 6 x 1764669602000000001 active 0 "
	  "manual\nsnapshot-description 4 hi\n", NULL, 13, "of snapshot 4 after snapshot 6" },
	{ "description with a raw tab", 12, "snapshot 6 x 1764669602000000001 active 0 "
	  "manual\nsnapshot-description 6 a\tb\n", NULL, 13, "bad escape" },
	{ "description with an escaped newline", 12, "snapshot 6 x 1764669602000000001 active 0 "
	  "manual\nsnapshot-description 6 a\\x0ab\n", NULL, 13, "a control character" },
	{ "second description", 12, "snapshot 6 x 1764669602000000001 active 0 manual\n"
	  "snapshot-description 6 a\nsnapshot-description 6 b\n", NULL, 14, "a second description" },
	{ "userdata out of order", 12, "snapshot 6 x 1764669602000000001 active 0 manual\n"
	  "snapshot-userdata 6 b 1\nsnapshot-userdata 6 a 2\n", NULL, 14, "out of order" },
	{ "userdata bad key", 12, "snapshot 6 x 1764669602000000001 active 0 manual\n"
	  "snapshot-userdata 6 -b 1\n", NULL, 13, "bad user data key '-b'" },
	{ "userdata without value", 12, "snapshot 6 x 1764669602000000001 active 0 manual\n"
	  "snapshot-userdata 6 b\n", NULL, 13, "needs an id, a key and a value" },
	{ "pre not older", 12, "snapshot 6 x 1764669602000000001 active 0 post\n"
	  "snapshot-pre 6 6\n", NULL, 13, "the pre snapshot 6 of 6 is not older" },
	{ "attribute before snapshots", 9, "activated-ns 1\nsnapshot-description 1 x\n", NULL, 10,
	  "before any snapshot" },
	{ "bad activated-ns", 9, "activated-ns 3x\n", NULL, 9,
	  "bad number '3x' for activated-ns" },
	{ "duplicate activated-ns", 9, "activated-ns 1\nactivated-ns 2\n", NULL, 10,
	  "duplicate key 'activated-ns'" },
	{ "activated-ns after the snapshots", 12,
	  "snapshot 6 x 1764669602000000001 active 0 manual\nactivated-ns 1\n", NULL, 13,
	  "'activated-ns' after the snapshots" },
	{ "text after end", 0, NULL, "ovsnap-registry 1\nsource /a\nfstype xfs\nfsuuid u\n"
	  "clone 0\nnext-id 1\nactive 0\ndeactivated-ns 0\nend\nend\n", 10,
	  "text after the end line" },
	{ "no end line", 13, NULL, NULL, 13, "truncated (no end line)" },
	{ "no final newline", 0, NULL, "ovsnap-registry 1\nsource /a", 2,
	  "truncated (no newline at the end)" },
	{ "empty file", 0, NULL, "", 1, "empty file" },
};

static void test_corruptions(void)
{
	for (size_t i = 0; i < sizeof(corruptions) / sizeof(corruptions[0]); i++) {
		const struct corruption *c = &corruptions[i];
		char *text = c->lineno ? edit(c->lineno, c->with) : strdup(c->text);
		char want[64];
		struct ovs_registry reg;
		int rc = ovs_registry_parse("/s/registry", text, strlen(text), &reg);

		snprintf(want, sizeof(want), "registry /s/registry line %d: ", c->err_line);
		CHECK(rc == -EUCLEAN, "%s: parsed (rc %d)", c->why, rc);
		CHECK(strncmp(ovs_last_error(), want, strlen(want)) == 0 &&
		      strstr(ovs_last_error(), c->err),
		      "%s: message '%s', want '%s...%s'", c->why, ovs_last_error(), want, c->err);
		CHECK(reg.source == NULL && reg.nsnaps == 0, "%s: left a half-parsed registry",
		      c->why);
		free(text);
	}
}

/*
 * A child rewrites the registry between two versions as fast as it can;
 * SIGKILL at random instants must always leave one of them, complete.
 */
static void test_atomic_update_under_sigkill(void)
{
	char dir[] = "/tmp/ovsnap-registry-test.XXXXXX";
	struct ovs_registry a, b;
	char *ta, *tb;
	size_t la, lb;
	int dfd, rounds = 150;

	CHECK(mkdtemp(dir) != NULL, "mkdtemp: %m");
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(ovs_registry_parse("t", canonical, strlen(canonical), &a) == 0, "parse a");
	CHECK(ovs_registry_copy(&b, &a) == 0, "copy");
	b.nsnaps = 1;
	b.snaps[0].state = OVS_SNAP_ACTIVE;
	b.next_id = 123456;
	ovs_registry_format(&a, &ta, &la);
	ovs_registry_format(&b, &tb, &lb);
	CHECK(ovs_registry_store(dfd, dir, &a) == 0, "first store: %s", ovs_last_error());

	srand(time(NULL));
	for (int r = 0; r < rounds; r++) {
		pid_t pid = fork();
		char *text;
		size_t len;
		struct ovs_registry got;

		if (pid == 0) {
			for (unsigned i = 0;; i++)
				if (ovs_registry_store(dfd, dir, i % 2 ? &a : &b) < 0)
					_exit(3);
		}
		int status;

		CHECK(pid > 0, "round %d: fork: %s", r, strerror(errno));
		usleep(rand() % 20000);
		kill(pid, SIGKILL);
		CHECK(waitpid(pid, &status, 0) == pid, "round %d: waitpid: %s", r, strerror(errno));
		/* The child stores until it is killed: an exit of its own is a
		 * failed store. */
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "round %d: the storing child ended by itself (status 0x%x): a store failed",
		      r, status);
		CHECK(ovs_read_file_at(dfd, OVS_REGISTRY_FILE, &text, &len, 1 << 20) == 0,
		      "round %d: registry unreadable", r);
		CHECK((len == la && memcmp(text, ta, la) == 0) ||
		      (len == lb && memcmp(text, tb, lb) == 0),
		      "round %d: registry is neither version:\n%s", r, text);
		CHECK(ovs_registry_parse("t", text, len, &got) == 0, "round %d: %s", r,
		      ovs_last_error());
		ovs_registry_clear(&got);
		free(text);
	}
	close(dfd);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		CHECK(system(cmd) == 0, "cleanup");
	}
	free(ta);
	free(tb);
	ovs_registry_clear(&a);
	ovs_registry_clear(&b);
}

static char *dirname_of(char *path)
{
	static char buf[256];
	char *slash;

	snprintf(buf, sizeof(buf), "%s", path);
	slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
	/* make the parents too: layers/2/upper */
	for (char *p = buf + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(buf, 0700);
		*p = '/';
	}
	return buf;
}

/* The mutations, on a volume whose store is a plain temp dir. */
static void test_mutations(void)
{
	char dir[] = "/tmp/ovsnap-registry-ops.XXXXXX", src[64], path[256], cmd[128];
	struct ovs_volume v = { .refcount = 1, .lockfd = -1, .source = "/srv/data" };
	const struct ovs_snapshot *s;
	struct stat st;
	uint64_t id;
	int rootfd, rc;

	CHECK(mkdtemp(dir) != NULL, "mkdtemp: %m");
	v.store = dir;
	v.dirfd = open(dir, O_RDONLY | O_DIRECTORY);
	snprintf(src, sizeof(src), "%s/src", dir);
	mkdir(src, 0751);
	rootfd = open(src, O_RDONLY | O_DIRECTORY);
	{
		struct timespec ts[2] = { { 1000, 5 }, { 2000, 7 } };

		futimens(rootfd, ts);
	}
	v.reg.source = strdup("/srv/data");
	strcpy(v.reg.fstype, "xfs");
	strcpy(v.reg.fsuuid, "u");
	v.reg.next_id = 1;

	CHECK(ovs_registry_add_snapshot(&v, NULL, rootfd, &id) == 0 && id == 1, "add 1: %s",
	      ovs_last_error());
	/* a leftover layers/2 from a crash before registering is replaced */
	snprintf(path, sizeof(path), "%s/layers/2/upper/stale", dir);
	mkdir(dirname_of(path), 0700);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	CHECK(access(path, F_OK) == 0, "cannot make the stale leftover");
	CHECK(ovs_registry_add_snapshot(&v, "named", rootfd, &id) == 0 && id == 2, "add 2: %s",
	      ovs_last_error());
	CHECK(access(path, F_OK) < 0, "stale leftover survived");
	CHECK(ovs_registry_add_snapshot(&v, "named", rootfd, &id) == -EEXIST, "duplicate name");
	CHECK(ovs_registry_add_snapshot(&v, "12", rootfd, &id) == -EINVAL, "all-digit name");
	CHECK(ovs_registry_add_snapshot(&v, NULL, rootfd, &id) == 0 && id == 3, "add 3");
	CHECK(v.reg.nsnaps == 3 && v.reg.snaps[1].state == OVS_SNAP_FROZEN &&
	      v.reg.snaps[2].state == OVS_SNAP_ACTIVE && v.reg.next_id == 4, "states after adds");
	snprintf(path, sizeof(path), "%s/layers/3/upper", dir);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0751 && st.st_mtim.tv_sec == 2000 &&
	      st.st_mtim.tv_nsec == 7 && st.st_atim.tv_sec == 1000, "upper root metadata");
	snprintf(path, sizeof(path), "%s/layers/3/work", dir);
	CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "work dir");

	CHECK(ovs_registry_set_hold(&v, 2, true) == 0 && v.reg.snaps[1].hold, "hold");
	{
		struct ovs_snap_change c = OVS_SNAP_CHANGE_INIT;
		struct ovs_userdata ud[OVS_USERDATA_NMAX + 1];
		uint64_t ids[] = { 1, 3 };
		char *before, *after;
		size_t lb, la;

		for (int i = 0; i <= OVS_USERDATA_NMAX; i++)
			snprintf(ud[i].key, sizeof(ud[i].key), "k%d", i), strcpy(ud[i].value, "v");
		c.hold = 1;
		c.cls = OVS_CLASS_TIMELINE;
		c.description = "both";
		c.userdata = ud;
		c.nuserdata = 2;
		CHECK(ovs_registry_change(&v, ids, 2, &c) == 0, "change: %s", ovs_last_error());
		CHECK(v.reg.snaps[0].hold && v.reg.snaps[2].hold && !strcmp(v.reg.snaps[2].description,
		      "both") && v.reg.snaps[0].nuserdata == 2 && v.reg.snaps[2].cls ==
		      OVS_CLASS_TIMELINE && v.reg.snaps[1].cls == OVS_CLASS_MANUAL,
		      "change applied wrong");
		ovs_registry_format(&v.reg, &before, &lb);
		/* too many keys on one snapshot: refused, nothing written */
		c.nuserdata = OVS_USERDATA_NMAX + 1;
		c.description = "other";
		CHECK(ovs_registry_change(&v, ids, 2, &c) == -E2BIG, "too many keys accepted");
		c.nuserdata = 0;
		c.description = "a\nb";
		CHECK(ovs_registry_change(&v, ids, 2, &c) == -EINVAL, "newline accepted");
		ids[1] = 99;
		c.description = "x";
		CHECK(ovs_registry_change(&v, ids, 2, &c) == -ENOENT, "unknown id accepted");
		CHECK(ovs_registry_load(&v) == 0, "reload");
		ovs_registry_format(&v.reg, &after, &la);
		CHECK(!strcmp(before, after), "a refused change changed the registry");
		free(before);
		free(after);
		/* removal: "" description, KEY= */
		ids[1] = 3;
		strcpy(ud[0].value, "");
		c.userdata = ud;
		c.nuserdata = 1;
		c.description = "";
		c.hold = 0;
		CHECK(ovs_registry_change(&v, ids, 2, &c) == 0 && !v.reg.snaps[0].description[0] &&
		      v.reg.snaps[0].nuserdata == 1 && !strcmp(v.reg.snaps[0].userdata[0].key, "k1") &&
		      !v.reg.snaps[0].hold, "removals");
		CHECK(ovs_registry_set_hold(&v, 2, true) == 0, "hold again");
	}
	CHECK(ovs_registry_set_active(&v, true) == 0 && v.reg.active && !v.reg.deactivated_ns,
	      "activate");
	CHECK(ovs_registry_set_active(&v, false) == 0 && !v.reg.active && v.reg.deactivated_ns > 0,
	      "deactivate records when");
	CHECK(ovs_registry_set_active(&v, true) == 0 && v.reg.active &&
	      v.reg.activated_ns >= v.reg.deactivated_ns, "reactivate records when");
	{
		int64_t act = v.reg.activated_ns, deact = v.reg.deactivated_ns;

		CHECK(ovs_registry_set_active(&v, true) == 0 && v.reg.activated_ns == act &&
		      v.reg.deactivated_ns == deact, "activating an active volume changes nothing");
	}
	CHECK(ovs_registry_set_active(&v, false) == 0 && !v.reg.active, "deactivate again");

	CHECK(ovs_registry_remove_snapshot(&v, 3) == 0, "remove newest");
	CHECK(v.reg.nsnaps == 2 && v.reg.snaps[1].id == 2 && v.reg.snaps[1].state == OVS_SNAP_ACTIVE,
	      "the one before the newest became active");
	snprintf(path, sizeof(path), "%s/layers/3", dir);
	CHECK(access(path, F_OK) < 0, "layer 3 not removed");
	CHECK(ovs_registry_remove_snapshot(&v, 1) == 0 && v.reg.nsnaps == 1, "remove oldest");
	CHECK(ovs_registry_remove_snapshot(&v, 1) == -ENOENT, "remove twice");
	CHECK(ovs_registry_add_snapshot(&v, NULL, -1, &id) == 0 && id == 4, "ids never reused");

	/* what is on disk is what is in memory */
	{
		struct ovs_volume w = { .refcount = 1, .lockfd = -1, .source = "/srv/data",
					.store = dir, .dirfd = v.dirfd };
		char *a, *b;
		size_t la, lb;

		CHECK(ovs_registry_load(&w) == 0, "reload: %s", ovs_last_error());
		ovs_registry_format(&v.reg, &a, &la);
		ovs_registry_format(&w.reg, &b, &lb);
		CHECK(la == lb && memcmp(a, b, la) == 0, "disk differs from memory");
		free(a);
		free(b);
		ovs_registry_clear(&w.reg);
	}

	/* the overlayfs layer limit */
	rc = 0;
	while (v.reg.nsnaps < OVS_MAX_SNAPSHOTS && rc == 0)
		rc = ovs_registry_add_snapshot(&v, NULL, -1, NULL);
	CHECK(rc == 0, "filling up: %s", ovs_last_error());
	CHECK(ovs_registry_add_snapshot(&v, NULL, -1, NULL) == -EMLINK &&
	      strstr(ovs_last_error(), "ovsnap drop") && strstr(ovs_last_error(), "--keep"),
	      "a 500th snapshot: '%s'", ovs_last_error());
	CHECK(ovs_snapshot_resolve(&v, "@oldest", &s) == 0 && s->id == 2, "oldest after fill");

	close(rootfd);
	close(v.dirfd);
	ovs_registry_clear(&v.reg);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0, "cleanup");
}

int main(void)
{
	test_mutations();
	test_round_trip();
	test_attributes();
	test_corruptions();
	test_atomic_update_under_sigkill();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("registry: all checks passed\n");
	return 0;
}
