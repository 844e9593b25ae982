#!/usr/bin/python3
# Helper of deep_test.sh: a tree whose path from its root is longer than
# PATH_MAX (LEVELS directories of NAME_MAX bytes), reached only by a cwd
# that walks down in pieces, as a process deep inside works.  Never stops
# at a failure: one line per operation, "OK" or the errno's name.
#   beyond.py ROOT LEVELS build   the tree, with at its bottom a file f
#                                 hard-linked as g there and as hl at ROOT,
#                                 a directory d holding e, an empty dir
#   beyond.py ROOT LEVELS change  from the bottom: rewrite f, create n,
#                                 rmdir empty, rename d to d2, unlink g
#   beyond.py ROOT LEVELS show    what the bottom and ROOT/hl hold
import errno
import os
import sys

NAME = "t" * 255
PIECE = 15  # directories per chdir: 15 * 256 bytes < PATH_MAX


def res(what, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
        r = "OK"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    print(f"{what}: {r}")


def down(levels, make):
    """chdir (making them first with make) through levels directories."""
    left = levels
    while left:
        n = min(left, PIECE)
        rel = "/".join([NAME] * n)
        if make:
            os.makedirs(rel, exist_ok=True)
        os.chdir(rel)
        left -= n


def write(path, text, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    os.write(fd, text.encode())
    os.close(fd)


def read(path, dir_fd=None):
    try:
        with os.fdopen(os.open(path, os.O_RDONLY, dir_fd=dir_fd)) as f:
            return f.read().strip()
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def main():
    root, levels, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.chdir(root)
    rootfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    down(levels, mode == "build")
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    if mode == "build":
        res("create f", write, "f", "old")
        res("link g", os.link, "f", "g")
        res("link hl", os.link, "f", "hl", src_dir_fd=here, dst_dir_fd=rootfd)
        res("mkdir d", os.mkdir, "d")
        res("create d/e", write, "d/e", "e")
        res("mkdir empty", os.mkdir, "empty")
    elif mode == "change":
        res("rewrite f", write, "f", "new", os.O_WRONLY | os.O_TRUNC)
        res("create n", write, "n", "n")
        res("rmdir empty", os.rmdir, "empty")
        res("rename d", os.rename, "d", "d2")
        res("unlink g", os.unlink, "g")
    else:
        print("bottom:", " ".join(sorted(os.listdir("."))))
        for name in ("f", "g", "d/e", "d2/e"):
            print(f"{name}: {read(name)}")
        print(f"hl: {read('hl', rootfd)}")


main()
