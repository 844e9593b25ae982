#!/usr/bin/env python3
"""Cases for bench/fuse-pt-modes (issue 12), run by bench/fuse-pt-modes.sh.

  fuse-pt-modes.py MOUNTPOINT SRCDIR CTLFILE LOGFILE ALLOW_MMAP(0|1)

Each case opens files of MOUNTPOINT with the open answer it names
(p: passthrough, P: passthrough + direct_io, d: direct_io, c: page cache;
see bench/fuse-pt-modes.c) and prints one line: what the caller saw, and
which requests reached the daemon ("daemon: -" when none did).
"""
import ctypes
import errno
import mmap
import os
import subprocess
import sys
import time

MNT, SRC, CTL, LOG, ALLOW = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]


LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class Map:
    """A mapping of fd that holds no descriptor of its own (Python's mmap
    module keeps a dup of the descriptor, so close() would not close)."""

    def __init__(self, fd, length, flags, prot):
        self.len = length
        self.addr = LIBC.mmap(None, length, prot, flags, fd, 0)
        if self.addr in (None, ctypes.c_void_p(-1).value):
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))

    def store(self, data):
        ctypes.memmove(self.addr, data, len(data))

    def load(self, n):
        return ctypes.string_at(self.addr, n)

    def sync(self):
        LIBC.msync(ctypes.c_void_p(self.addr), ctypes.c_size_t(self.len), 4)  # MS_SYNC

    def close(self):
        LIBC.munmap(self.addr, self.len)


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


def write_close(fd):
    os.pwrite(fd, b"NEW!", 0)
    os.close(fd)
    return "ok"


def try_(fn):
    try:
        return fn()
    except OSError as e:
        return "error " + err(e)


def case_open_pair(first, flags1, second, flags2, label):
    """Open with answer first, then with answer second; write through the
    one open for write, read through the other."""
    name = f"pair-{first}{second}{flags1}{flags2}"
    fresh(name)
    a = op(first, name, flags1)
    pos = logpos()
    try:
        b = op(second, name, flags2)
    except OSError as e:
        report(label, "open: " + err(e), pos)
        os.close(a)
        return
    w, r = (a, b) if flags1 != os.O_RDONLY else (b, a)
    if flags1 == flags2 == os.O_RDONLY:
        out = "open ok"
    else:
        res = try_(lambda: os.pwrite(w, b"WRITE", 0) and "ok")
        out = f"open ok; write {res}; other sees {os.pread(r, 5, 0).decode()}"
    report(label, out, pos)
    os.close(b)
    os.close(a)


def main():
    allow = ALLOW == "1"
    tag = " [allow_mmap]" if allow else ""
    if not allow:
        # Opens of one inode with different answers (fuse_file_io_open).
        case_open_pair("p", os.O_RDONLY, "d", os.O_RDWR, "reader p, then writer d (direct_io)")
        case_open_pair("p", os.O_RDONLY, "c", os.O_RDWR, "reader p, then writer c (cached)")
        case_open_pair("p", os.O_RDONLY, "c", os.O_RDONLY, "reader p, then reader c")
        case_open_pair("c", os.O_RDONLY, "p", os.O_RDONLY, "reader c, then reader p")
        case_open_pair("c", os.O_RDWR, "p", os.O_RDONLY, "writer c, then reader p")
        case_open_pair("p", os.O_RDONLY, "P", os.O_RDWR,
                       "reader p, then writer P (passthrough+direct_io)")
        case_open_pair("p", os.O_RDONLY, "p", os.O_RDWR, "reader p, then writer p (passthrough)")
        case_open_pair("d", os.O_RDWR, "p", os.O_RDONLY, "writer d, then reader p")

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
            m = Map(w, 4096, flag, mmap.PROT_READ | mmap.PROT_WRITE)
            m.store(b"MMAP")
            m.sync()
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
            m = Map(w, 4096, flag, mmap.PROT_READ | mmap.PROT_WRITE)
            m.store(b"MMAP")
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

    # A mapping and RELEASE: does the handle (and its io mode) outlive close()?
    for m_, flags, prot, kind in (
            ("p", os.O_RDONLY, mmap.PROT_READ, mmap.MAP_SHARED),
            ("p", os.O_RDONLY, mmap.PROT_READ, mmap.MAP_PRIVATE),
            ("P", os.O_RDWR, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED)):
        name = "keep" + m_ + str(kind)
        fresh(name)
        r = op(m_, name, flags)
        m = Map(r, 4096, kind, prot)
        pos = logpos()
        os.close(r)
        time.sleep(0.2)
        at_close = reqs(pos)
        out = "RELEASE at close: " + ("yes" if "RELEASE" in at_close else "no")
        if m_ == "P":
            m.store(b"LATE")
            m.sync()
            out += f"; store after close: SRC has {src(name, 4).decode()}"
        else:
            out += "; then writer c: " + try_(lambda: write_close(op("c", name, os.O_RDWR)))
            out += f", mapping sees {m.load(4).decode()}"
            time.sleep(0.2)
        pos = logpos()
        m.close()
        time.sleep(0.2)
        out += "; RELEASE at munmap: " + ("yes" if "RELEASE" in reqs(pos) else "no")
        report(f"{m_} open, {'MAP_SHARED' if kind == mmap.MAP_SHARED else 'MAP_PRIVATE'}, close, munmap",
               out, pos)

    # close() of a passthrough reader, at once an open in the page cache:
    # has the kernel left passthrough mode when close() returns?
    fresh("race")
    fails = 0
    pos = logpos()
    for _ in range(200):
        r = op("p", "race", os.O_RDONLY)
        os.close(r)
        try:
            os.close(op("c", "race", os.O_RDONLY))
        except OSError:
            fails += 1
    report("200x: close p reader, then at once open c", f"{fails} EIO", pos)

    # Writer d next to a passthrough reader: its mappings.
    fresh("dmap")
    w = op("d", "dmap", os.O_RDWR)
    r = op("p", "dmap", os.O_RDONLY)
    for kind, flag in (("MAP_SHARED", mmap.MAP_SHARED), ("MAP_PRIVATE", mmap.MAP_PRIVATE)):
        pos = logpos()
        res = try_(lambda: Map(w, 4096, flag, mmap.PROT_READ).close() or "ok")
        report(f"d writer, then p reader: writer {kind}", res, pos)
    os.close(r)
    os.close(w)

    # Writer P opened O_WRONLY: no mapping at all, as natively.
    fresh("wo")
    r = op("p", "wo", os.O_RDONLY)
    w = op("P", "wo", os.O_WRONLY)
    pos = logpos()
    res = try_(lambda: Map(w, 4096, mmap.MAP_SHARED, mmap.PROT_WRITE).close() or "ok")
    report("p reader, P writer O_WRONLY: MAP_SHARED", res, pos)
    os.close(w)
    os.close(r)

    # The nearest design: a passthrough reader's node is "retired", so
    # that later LOOKUPs give a second FUSE inode of the same file, in no
    # mode yet; an open for write that still reaches the retired node
    # gets ESTALE, which makes the kernel revalidate the path once.
    fresh("ret")
    r = op("r", "ret", os.O_RDONLY)
    time.sleep(0.2)
    pos = logpos()
    w = op("E", "ret", os.O_RDWR)
    os.pwrite(w, b"WRIT", 0)
    report("retired p reader; writer by path (E)", f"ok, reader sees {os.pread(r, 4, 0).decode()}",
           pos)
    m = Map(w, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    pos = logpos()
    m.store(b"MMAP")
    before = os.pread(r, 4, 0).decode()
    m.sync()
    report("retired p reader; writer's MAP_SHARED store",
           f"reader sees {before}, after msync {os.pread(r, 4, 0).decode()}", pos)
    m.close()
    os.close(w)
    os.close(r)
    fresh("ret2")
    r = op("R", "ret2", os.O_RDONLY)
    pos = logpos()
    res = try_(lambda: os.close(op("E", "ret2", os.O_RDWR)) or "ok")
    report("retired p reader, dentry still cached; writer by path (E)", res, pos)
    pos = logpos()
    res = try_(lambda: os.close(op("E", f"/proc/self/fd/{r}", os.O_RDWR)) or "ok")
    report("retired p reader; writer through /proc/self/fd (E)", res, pos)
    os.close(r)

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
    for m_, x in (("c", "c"), ("d", "c"), ("P", "c"), ("P", "P")):
        name = "exe-" + m_ + x
        fresh(name, elf)
        w = op(m_, name, os.O_RDWR)
        setmode(x)
        pos = logpos()
        res = try_(lambda: subprocess.run([os.path.join(MNT, name)]).returncode == 0 and "ran")
        report(f"exec (open {x}) while writer {m_} is open", res, pos)
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
