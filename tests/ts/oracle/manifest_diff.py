#!/usr/bin/env python3
"""What `ovsnap diff --json` must say, from two manifests (the oracle).

  manifest_diff.py [--unseen-trusted] A.manifest B.manifest DIFF.json

Computes the changes between the two recorded states, as ovsnap-diff(8)
defines them, and compares them with the command's JSON: the same paths,
the same change types, the same object types and, for a modified object,
the same fields.  Prints every difference (at most 20) and exits 1 if
there is one.  Rules (ovsnap-diff(8)): states are compared, not events;
link counts (the manifest's hardlink=) are never compared; a directory
whose only difference is its mtime is left out (with other differences,
its mtime is listed among them); the root is the path ".".

--unseen-trusted: the workload set trusted.* xattrs (ovs-workload
--extended sets trusted.overlay.* on user files, rule 14), which ovsnap
diff compares as the user's data but the manifests do not show: an
"xattrs" that ovsnap diff lists beyond what the manifests tell is then
accepted, alone (an object whose only change was such an xattr; a
directory's mtime may come with it) or among other fields.  Paths,
change types and every other field are still checked.
"""
import json
import re
import sys

TYPES = {"f": "file", "d": "directory", "l": "symlink", "p": "fifo",
         "s": "socket", "c": "char", "b": "block"}


def unescape(s):
    raw = re.sub(rb"\\x([0-9a-fA-F]{2})", lambda m: bytes([int(m.group(1), 16)]), s.encode())
    return raw.decode("utf-8", "surrogateescape")


def load(path):
    entries = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            fields = {}
            for p in parts[1:]:
                k, _, v = p.partition("=")
                fields[k] = v
            entries[unescape(parts[0])] = fields
    return entries


def kind(fields):
    t = fields.get("type", "?")
    return TYPES.get(t, t)


def changed_fields(a, b):
    out = set()
    keys = set(a) | set(b)
    for k in keys:
        if k in ("hardlink", "type") or a.get(k) == b.get(k):
            continue
        if k in ("size", "hash", "target", "rdev"):
            out.add("content")
        elif k == "mode":
            out.add("mode")
        elif k in ("uid", "gid"):
            out.add("owner")
        elif k == "mtime":
            out.add("mtime")
        elif k.startswith("xattr:"):
            out.add("xattrs")
        else:
            out.add(k)
    return out


def expected(a, b):
    exp = {}
    for p in set(a) | set(b):
        if p not in b:
            exp[p] = ("removed", kind(a[p]), frozenset())
        elif p not in a:
            exp[p] = ("added", kind(b[p]), frozenset())
        elif kind(a[p]) != kind(b[p]):
            exp[p] = ("type", kind(a[p]) + ">" + kind(b[p]), frozenset())
        else:
            f = changed_fields(a[p], b[p])
            if kind(a[p]) == "directory" and not f - {"mtime"}:
                continue
            if f:
                exp[p] = ("modified", kind(a[p]), frozenset(f))
    return exp


def got(doc):
    out = {}
    for c in doc["changes"]:
        ch = c["change"]
        if ch == "type":
            t = c.get("from_type", "?") + ">" + c.get("to_type", "?")
        else:
            t = c.get("type", "?")
        out[c["path"]] = (ch, t, frozenset(c.get("fields", [])) if ch == "modified" else frozenset())
    return out


def unseen(e, h):
    """Does h differ from e only by an xattrs change the manifests miss?"""
    if h is None or h[0] != "modified" or "xattrs" not in h[2]:
        return False
    if e is None:
        return h[2] <= {"xattrs", "mtime"} and (h[2] == {"xattrs"} or h[1] == "directory")
    if e[0] != "modified" or e[1] != h[1]:
        return False
    return h[2] - {"xattrs"} == e[2] - {"xattrs"} or (
        h[1] == "directory" and h[2] - {"xattrs", "mtime"} == e[2] - {"xattrs", "mtime"})


def main():
    args = sys.argv[1:]
    trusted = args[0] == "--unseen-trusted"
    if trusted:
        args = args[1:]
    a, b = load(args[0]), load(args[1])
    with open(args[2]) as f:
        doc = json.load(f)
    exp, have = expected(a, b), got(doc)
    bad = []
    for p in sorted(set(exp) | set(have)):
        e, h = exp.get(p), have.get(p)
        if e != h and not (trusted and unseen(e, h)):
            def show(x):
                return "nothing" if x is None else "%s %s%s" % (x[0], x[1], (" " + ",".join(sorted(x[2]))) if x[2] else "")
            bad.append("%s: expected %s, ovsnap diff says %s" % (p.encode("utf-8", "surrogateescape"), show(e), show(h)))
    for line in bad[:20]:
        print(line)
    if len(bad) > 20:
        print("... and %d more" % (len(bad) - 20))
    print("%d changes expected, %d reported, %d differ" % (len(exp), len(have), len(bad)), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
