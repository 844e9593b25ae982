#!/usr/bin/env python3
"""Cases for bench/fuse-pt-modes (issue 12), run by bench/fuse-pt-modes.sh.

  fuse-pt-modes.py MOUNTPOINT SRCDIR CTLFILE LOGFILE ALLOW_MMAP(0|1)

Each case opens files of MOUNTPOINT with the open answer it names
(p: passthrough, P: passthrough + direct_io, d: direct_io, c: page cache;
see bench/fuse-pt-modes.c) and prints one line: what the caller saw, and
which requests reached the daemon ("daemon: -" when none did).
"""
import errno
import mmap
import os
import subprocess
import sys

MNT, SRC, CTL, LOG, ALLOW = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]


def setmode(m):
    with open(CTL, "w") as f:
        f.write(m)


def op(m, name, flags):
    setmode(m)
    return os.open(os.path.join(MNT, name), flags)


def logpos():
    return os.path.getsize(LOG)


def reqs(since):
    with open(LOG) as f:
        f.seek(since)
        kinds = [line.split()[0] for line in f if line.strip()]
    seen = []
    for k in kinds:
        if k not in seen:
            seen.append(k)
    return ",".join(seen) or "-"


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def fresh(name, data=b"0123456789abcdef" * 256):
    with open(os.path.join(SRC, name), "wb") as f:
        f.write(data)
    os.chmod(os.path.join(SRC, name), 0o755)


def src(name, n=16):
    with open(os.path.join(SRC, name), "rb") as f:
        return f.read(n)


def report(case, outcome, since):
    print(f"{case:<62} {outcome:<34} daemon: {reqs(since)}")


def try_(fn):
    try:
        return fn()
    except OSError as e:
        return "error " + err(e)


def case_open_pair(first, second, flags2, label):
    name = f"pair-{first}{second}"
    fresh(name)
    r = op(first, name, os.O_RDONLY)
    pos = logpos()
    try:
        w = op(second, name, flags2)
    except OSError as e:
        report(label, "open: " + err(e), pos)
        os.close(r)
        return
    res = try_(lambda: os.pwrite(w, b"WRITE", 0) and "ok")
    got = os.pread(r, 5, 0)
    report(label, f"open ok; write {res}; reader sees {got.decode()}", pos)
    os.close(w)
    os.close(r)


def main():
    allow = ALLOW == "1"
    tag = " [allow_mmap]" if allow else ""
    if not allow:
        # Opens of one inode with different answers (fuse_file_io_open).
        case_open_pair("p", "d", os.O_RDWR, "reader p, then writer d (direct_io)")
        case_open_pair("p", "c", os.O_RDWR, "reader p, then writer c (cached)")
        case_open_pair("p", "c", os.O_RDONLY, "reader p, then reader c")
        case_open_pair("c", "p", os.O_RDONLY, "reader c, then reader p")
        case_open_pair("p", "P", os.O_RDWR, "reader p, then writer P (passthrough+direct_io)")
        case_open_pair("p", "p", os.O_RDWR, "reader p, then writer p (passthrough)")
        case_open_pair("d", "p", os.O_RDONLY, "writer d alone, then reader p")

        # Writer P next to a passthrough reader: every kind of I/O.
        fresh("wp")
        r = op("p", "wp", os.O_RDONLY)
        w = op("P", "wp", os.O_RDWR)
        pos = logpos()
        res = try_(lambda: os.write(w, b"AAAA") and "ok")
        report("P writer: write()", res + f", reader sees {os.pread(r, 4, 0).decode()}", pos)
        pos = logpos()
        res = try_(lambda: os.pread(w, 4, 0).decode())
        report("P writer: pread()", res, pos)
        pos = logpos()
        res = try_(lambda: os.pwrite(w, b"BBBB", 4) and "ok")
        report("P writer: pwrite()", res + f", reader sees {os.pread(r, 8, 0).decode()}", pos)
        a = op("P", "wp", os.O_WRONLY | os.O_APPEND)
        pos = logpos()
        res = try_(lambda: os.write(a, b"TAIL") and "ok")
        report("P writer O_APPEND: write()", res + f", size {os.fstat(r).st_size}", pos)
        os.close(a)
        pos = logpos()
        res = try_(lambda: os.ftruncate(w, 100) or "ok")
        report("P writer: ftruncate()", res + f", size {os.stat(os.path.join(SRC, 'wp')).st_size}", pos)
        pos = logpos()
        res = try_(lambda: os.posix_fallocate(w, 0, 8192) or "ok")
        report("P writer: fallocate()", res, pos)
        pos = logpos()
        res = try_(lambda: os.fsync(w) or "ok")
        report("P writer: fsync()", res, pos)
        os.close(w)
        os.close(r)

    # Writer P: mmap while a passthrough reader is open.
    for kind, flag in (("MAP_SHARED", mmap.MAP_SHARED), ("MAP_PRIVATE", mmap.MAP_PRIVATE)):
        name = "mm-" + kind
        fresh(name)
        r = op("p", name, os.O_RDONLY)
        w = op("P", name, os.O_RDWR)
        pos = logpos()
        try:
            m = mmap.mmap(w, 4096, flags=flag, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            m[0:4] = b"MMAP"
            m.flush() if flag == mmap.MAP_SHARED else None
            out = f"ok, SRC has {src(name, 4).decode()}, reader sees {os.pread(r, 4, 0).decode()}"
            m.close()
        except OSError as e:
            out = "mmap: " + err(e)
        report(f"P writer + p reader: {kind} store{tag}", out, pos)
        os.close(w)
        os.close(r)

    # Writer d (direct_io) alone: mmap.
    for kind, flag in (("MAP_SHARED", mmap.MAP_SHARED), ("MAP_PRIVATE", mmap.MAP_PRIVATE)):
        name = "md-" + kind
        fresh(name)
        w = op("d", name, os.O_RDWR)
        pos = logpos()
        try:
            m = mmap.mmap(w, 4096, flags=flag, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            m[0:4] = b"MMAP"
            out = "ok"
            if flag == mmap.MAP_SHARED:
                # the mapping put the inode in cached mode: a passthrough open now?
                out += "; then reader p: " + try_(lambda: os.close(op("p", name, os.O_RDONLY)) or "ok")
            m.close()
        except OSError as e:
            out = "mmap: " + err(e)
        report(f"d writer alone: {kind} store{tag}", out, pos)
        os.close(w)

    if allow:
        return

    # A mapping outlives RELEASE.
    fresh("keep")
    r = op("p", "keep", os.O_RDONLY)
    m = mmap.mmap(r, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    os.close(r)
    pos = logpos()
    w = try_(lambda: op("c", "keep", os.O_RDWR))
    if isinstance(w, int):
        os.pwrite(w, b"NEW!", 0)
        out = f"writer c opens; old mapping sees {m[0:4].decode()}"
        os.close(w)
    else:
        out = "writer c: " + w
    report("p reader mmap, close (RELEASE), then writer c", out, pos)
    m.close()

    fresh("keepw")
    w = op("P", "keepw", os.O_RDWR)
    m = mmap.mmap(w, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(w)
    pos = logpos()
    m[0:4] = b"LATE"
    m.flush()
    report("P writer mmap, close (RELEASE), then store", f"SRC has {src('keepw', 4).decode()}", pos)
    m.close()

    # Truncate and fallocate by path while a passthrough reader is open.
    fresh("tr")
    r = op("p", "tr", os.O_RDONLY)
    pos = logpos()
    res = try_(lambda: os.truncate(os.path.join(MNT, "tr"), 10) or "ok")
    report("p reader open; truncate(path)", res + f", reader fstat size {os.fstat(r).st_size}", pos)
    setmode("c")
    pos = logpos()
    res = try_(lambda: subprocess.run(["fallocate", "-l", "65536", os.path.join(MNT, "tr")],
                                      capture_output=True, text=True).stderr.strip() or "ok")
    report("p reader open; fallocate(1) (opens O_RDWR, cached)", res, pos)
    os.close(r)

    # exec of a file open for write elsewhere.
    with open("/bin/true", "rb") as f:
        elf = f.read()
    for m_ in ("c", "P", "d"):
        name = "exe-" + m_
        fresh(name, elf)
        w = op(m_, name, os.O_RDWR)
        setmode("c")
        pos = logpos()
        res = try_(lambda: subprocess.run([os.path.join(MNT, name)]).returncode == 0 and "ran")
        report(f"exec while writer {m_} is open", res, pos)
        os.close(w)
    fresh("exe-r", elf)
    r = op("p", "exe-r", os.O_RDONLY)
    for m_ in ("p", "c"):
        setmode(m_)
        pos = logpos()
        res = try_(lambda: subprocess.run([os.path.join(MNT, "exe-r")]).returncode == 0 and "ran")
        report(f"exec (open {m_}) while reader p is open", res, pos)
    os.close(r)
    fresh("exe-x", elf)
    setmode("p")
    proc = subprocess.Popen(["sh", "-c", f"exec {os.path.join(MNT, 'exe-x')} & sleep 0.3; wait"])
    proc.wait()
    pos = logpos()
    res = try_(lambda: os.close(op("c", "exe-x", os.O_RDWR)) or "ok")
    report("after exec (p) ended: writer c", res, pos)


main()
