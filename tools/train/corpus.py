#!/usr/bin/env python3
"""Stage 1: the Python-source corpus.

Collects the .py files of this machine's Python installation (the standard library and every site-packages /
dist-packages folder on sys.path), filters them (size, strict UTF-8, line-length heuristics), deduplicates them
by content hash, and splits them into train / validation BY FILE with a deterministic hash rule (a file's split
depends only on its content). Writes:

  OUT/train.jsonl, OUT/val.jsonl   one file per line: {"id", "path", "text"}
  OUT/manifest.json                the settings, the roots, and every kept file (path, sha256, bytes, split)
  OUT/stats.json                   counts: files seen / dropped per reason / kept per split and root, bytes

Usage: python3 tools/train/corpus.py --out work/corpus [--max-files N] [--max-mb M]
Pure Python (no third-party packages).
"""
import argparse
import json
import os
import site
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import SPECIAL_TOKENS, sha256_text, split_of, write_json  # noqa: E402

SKIP_DIRS = {"__pycache__", ".git", "site-packages", "dist-packages"}


def default_roots():
    """[(label, path)]: the stdlib first, then each package folder (deduplicated by real path)."""
    roots = [("stdlib", sysconfig.get_paths()["stdlib"])]
    pkg = []
    for key in ("purelib", "platlib"):
        pkg.append(sysconfig.get_paths().get(key))
    try:
        pkg.extend(site.getsitepackages())
    except AttributeError:
        pass
    pkg.extend(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    seen = set()
    out = []
    for label, p in roots + [("pkg", p) for p in pkg]:
        if not p or not os.path.isdir(p):
            continue
        rp = os.path.realpath(p)
        if rp in seen:
            continue
        seen.add(rp)
        out.append((label, rp))
    return out


def list_files(label, root):
    """All .py files under root, sorted; the stdlib walk skips nested package folders (they are roots)."""
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".py"):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                files.append((f"{label}/{rel}" if label == "stdlib" else rel, full))
    return files


def check(text, args):
    """None when the file is kept, else the reason it is dropped."""
    if "\x00" in text:
        return "nul"
    if any(t in text for t in SPECIAL_TOKENS):   # would be parsed as control tokens
        return "special_token"
    lines = text.split("\n")
    if len(lines) < args.min_lines:
        return "few_lines"
    longest = max(len(line) for line in lines)
    if longest > args.max_line:
        return "long_line"
    if len(text) / len(lines) > args.max_mean_line:
        return "mean_line"
    stripped = text.strip()
    if not stripped:
        return "empty"
    return None


def load(item, args):
    path, full = item
    try:
        size = os.path.getsize(full)
    except OSError:
        return path, None, "unreadable"
    if size < args.min_bytes:
        return path, None, "too_small"
    if size > args.max_bytes:
        return path, None, "too_large"
    try:
        with open(full, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return path, None, "not_utf8"
    except OSError:
        return path, None, "unreadable"
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    reason = check(text, args)
    if reason:
        return path, None, reason
    if not text.endswith("\n"):
        text += "\n"
    return path, text, None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--roots", nargs="*", help="folders to scan instead of this Python's stdlib + site-packages")
    ap.add_argument("--min-bytes", type=int, default=400)
    ap.add_argument("--max-bytes", type=int, default=120_000)
    ap.add_argument("--min-lines", type=int, default=10)
    ap.add_argument("--max-line", type=int, default=400, help="drop files with a longer line (data blobs)")
    ap.add_argument("--max-mean-line", type=float, default=90.0)
    ap.add_argument("--val-permille", type=int, default=20, help="files per 1000 that go to validation")
    ap.add_argument("--max-files", type=int, default=0, help="keep at most N files (0: all), chosen by hash")
    ap.add_argument("--max-mb", type=float, default=0, help="keep at most M MB of text (0: all), chosen by hash")
    ap.add_argument("--threads", type=int, default=16)
    args = ap.parse_args()
    t0 = time.time()

    roots = [("root%d" % i, os.path.realpath(r)) for i, r in enumerate(args.roots)] if args.roots \
        else default_roots()
    stats = {"roots": [{"label": lb, "path": p} for lb, p in roots], "seen": 0, "dropped": {},
             "duplicates": 0}
    items = []
    seen_real = set()
    for label, root in roots:
        for path, full in list_files(label, root):
            rp = os.path.realpath(full)
            if rp in seen_real:
                continue
            seen_real.add(rp)
            items.append((path, full))
    stats["seen"] = len(items)

    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        results = list(pool.map(lambda it: load(it, args), items, chunksize=64))

    kept = {}
    for path, text, reason in results:       # in sorted root/path order: the first copy of a content wins
        if reason:
            stats["dropped"][reason] = stats["dropped"].get(reason, 0) + 1
            continue
        digest = sha256_text(text)
        if digest in kept:
            stats["duplicates"] += 1
            continue
        kept[digest] = (path, text)

    # Deterministic subsample: order by content hash (a mix of all packages), then cap.
    order = sorted(kept)
    if args.max_files:
        order = order[:args.max_files]
    if args.max_mb:
        budget, total, capped = args.max_mb * 1e6, 0, []
        for d in order:
            total += len(kept[d][1].encode("utf-8"))
            if total > budget:
                break
            capped.append(d)
        order = capped
    order_set = set(order)
    # Output in path order (stable, readable); the split depends only on the content hash.
    files = sorted(((kept[d][0], d) for d in order_set))

    os.makedirs(args.out, exist_ok=True)
    manifest_files = []
    split_stats = {"train": {"files": 0, "bytes": 0, "lines": 0}, "val": {"files": 0, "bytes": 0, "lines": 0}}
    by_top = {}
    with open(os.path.join(args.out, "train.jsonl"), "w") as ftr, \
            open(os.path.join(args.out, "val.jsonl"), "w") as fva:
        for path, d in files:
            text = kept[d][1]
            split = split_of(d, args.val_permille)
            nbytes = len(text.encode("utf-8"))
            rec = {"id": d[:16], "path": path, "text": text}
            (fva if split == "val" else ftr).write(json.dumps(rec, ensure_ascii=False) + "\n")
            manifest_files.append({"path": path, "sha256": d, "bytes": nbytes, "split": split})
            s = split_stats[split]
            s["files"] += 1
            s["bytes"] += nbytes
            s["lines"] += text.count("\n")
            top = path.split("/")[0]
            by_top[top] = by_top.get(top, 0) + nbytes
    stats["kept"] = split_stats
    stats["unique_before_cap"] = len(kept)
    stats["top_packages_mb"] = {k: round(v / 1e6, 2) for k, v in
                                sorted(by_top.items(), key=lambda kv: -kv[1])[:40]}
    stats["seconds"] = round(time.time() - t0, 1)
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    write_json(os.path.join(args.out, "manifest.json"),
               {"settings": settings, "python": sys.version, "roots": stats["roots"], "files": manifest_files})
    write_json(os.path.join(args.out, "stats.json"), {"settings": settings, **stats})
    tr, va = split_stats["train"], split_stats["val"]
    print(f"corpus: seen {stats['seen']} files, dropped {sum(stats['dropped'].values())} {stats['dropped']}, "
          f"duplicates {stats['duplicates']}; kept train {tr['files']} files {tr['bytes'] / 1e6:.1f} MB, "
          f"val {va['files']} files {va['bytes'] / 1e6:.1f} MB in {stats['seconds']} s", flush=True)


if __name__ == "__main__":
    main()
