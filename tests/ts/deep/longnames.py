#!/usr/bin/python3
# Helper of deep_test.sh: the operations of DESIGN.md rule 18 on a name of
# NAME_MAX bytes and on a path of PATH_MAX - 1 bytes relative to the cwd,
# and their one-byte-longer variants.  Prints one line per operation, "OK"
# or the errno's name, so that a run on the live path can be compared with
# a run on the native filesystem.  Never stops at a failure.
#   longnames.py DIR make    create the objects and exercise every operation
#   longnames.py DIR change  change the objects "make" left (after a take)
import errno
import os
import stat
import sys

NAME_MAX = 255
PATH_MAX = 4096


def res(what, fn, *args):
    try:
        fn(*args)
        r = "OK"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    print(f"{what}: {r}")


def ftrunc(path, size):
    fd = os.open(path, os.O_RDWR)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def create(path):
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))


# In a directory whose path with the name would be too long.
def create_in(dirpath, name):
    fd = os.open(dirpath, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


def unlink_in(dirpath, name):
    fd = os.open(dirpath, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def otrunc(path):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"new")
    os.close(fd)


def targets():
    """(label, path, other path in the same dir, too long path)"""
    n = "n" * NAME_MAX
    # 15 directories of NAME_MAX bytes and a last name of NAME_MAX bytes:
    # 16 * 255 + 15 = 4095 = PATH_MAX - 1.
    d = "/".join(["d" * NAME_MAX] * 15)
    p = d + "/" + "p" * NAME_MAX
    assert len(p) == PATH_MAX - 1
    return [
        ("name", n, "o" * NAME_MAX, n + "n"),
        ("path", p, d + "/" + "o" * NAME_MAX, p + "p"),
    ]


def exercise(label, t, other, long):
    """Create, change and remove objects at t, and the same at long."""
    for suffix, path in (("", t), (" too long", long)):
        w = label + suffix
        res(f"open O_CREAT {w}", create, path)
        res(f"chmod {w}", os.chmod, path, 0o640)
        res(f"chown {w}", os.chown, path, os.getuid(), os.getgid())
        res(f"truncate {w}", os.truncate, path, 123)
        res(f"ftruncate {w}", ftrunc, path, 7)
        res(f"open O_TRUNC {w}", otrunc, path)
        res(f"link {w}", os.link, path, other)
        res(f"unlink link {w}", os.unlink, other)
        res(f"link to {w}", os.link, t, path if suffix else other)
        if not suffix:
            res(f"unlink link to {w}", os.unlink, other)
        res(f"rename {w}", os.rename, path, other)
        res(f"rename back {w}", os.rename, other, path)
        res(f"unlink {w}", os.unlink, path)
        res(f"mkfifo {w}", os.mkfifo, path, 0o600)
        res(f"unlink fifo {w}", os.unlink, path)
        res(f"mknod {w}", os.mknod, path, stat.S_IFIFO | 0o600)
        res(f"unlink node {w}", os.unlink, path)
        res(f"mkdir {w}", os.mkdir, path, 0o755)
        res(f"rmdir {w}", os.rmdir, path)
        res(f"symlink {w}", os.symlink, "target", path)
        res(f"unlink symlink {w}", os.unlink, path)


def make():
    for label, t, other, long in targets():
        os.makedirs(os.path.dirname(t) or ".", exist_ok=True)
        exercise(label, t, other, long)
        # Left for "change": a file, a directory and a file in it.
        res(f"create {label}", create, t)
        with open(t, "w") as f:
            f.write("old content\n")
        res(f"mkdir kept {label}", os.mkdir, other)
        res(f"create in {label}", create_in, other, "f")


def change():
    for label, t, other, long in targets():
        res(f"chmod old {label}", os.chmod, t, 0o600)
        res(f"chown old {label}", os.chown, t, os.getuid(), os.getgid())
        res(f"truncate old {label}", os.truncate, t, 5)
        res(f"ftruncate old {label}", ftrunc, t, 3)
        res(f"open O_TRUNC old {label}", otrunc, t)
        res(f"unlink in old {label}", unlink_in, other, "f")
        res(f"rmdir old {label}", os.rmdir, other)
        res(f"link old {label}", os.link, t, other)
        res(f"unlink old link {label}", os.unlink, other)
        res(f"rename old {label}", os.rename, t, other)
        res(f"rename old back {label}", os.rename, other, t)
        res(f"unlink old {label}", os.unlink, t)
        exercise(label, t, other, long)


os.chdir(sys.argv[1])
{"make": make, "change": change}[sys.argv[2]]()
