"""ggstack import against git format-patch, on the same range.

Builds a synthetic fork (``apply_vs_rebase.build_synthetic``: one-file
commits on a branch of a repository of --files files), then times, interleaved
and several times each:

- ``ggstack import STACK base..tip`` into an empty stack (a fresh patches
  directory each run), as a user runs it (Python start-up included),
- ``git format-patch --full-index -o DIR base..tip`` (what import writes,
  without the provenance, the batching of trailers and the atomic save),

and prints the median wall time of each, the time a commit and the ratio.
The target is 1,000 commits imported in <= 5 s.

    python benchmarks/import_speed.py                     # 1,000 commits
    python benchmarks/import_speed.py --commits 2000 --files 3000 --runs 5
    python benchmarks/import_speed.py --repo ~/src/fork --range origin/main..my-work
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apply_vs_rebase import build_synthetic, ggstack

STACK = "bench"


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", help="an existing repository (with --range)")
    ap.add_argument("--range", help="A..B to import (with --repo)")
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ggstack-import-bench-")
    try:
        if args.repo:
            repo, rev_range = os.path.abspath(args.repo), args.range
        else:
            repo = os.path.join(work, "fork")
            old, tip, _ = build_synthetic(repo, args.files, 0, args.commits)
            rev_range = f"{old}..{tip}"
        count = int(
            subprocess.run(
                ["git", "-C", repo, "rev-list", "--count", rev_range], capture_output=True, text=True, check=True
            ).stdout
        )
        ours, gits = [], []
        for n in range(args.runs):
            patches = os.path.join(work, f"patches-{n}")
            init = ggstack(repo, patches, "init", STACK, "--repo-slug", "bench/fork", "--base", "main")
            if init.returncode:
                raise SystemExit(init.stderr.decode())

            def run_import(patches: str = patches) -> None:
                proc = ggstack(repo, patches, "import", STACK, rev_range)
                if proc.returncode:
                    raise SystemExit(proc.stderr.decode())

            out = os.path.join(work, f"fp-{n}")
            ours.append(timed(run_import))
            gits.append(
                timed(
                    lambda out=out: subprocess.run(
                        ["git", "-C", repo, "format-patch", "-q", "--full-index", "-o", out, rev_range], check=True
                    )
                )
            )
            stored = len([f for f in os.listdir(os.path.join(patches, STACK)) if f.endswith(".patch")])
            if stored != count and not args.repo:
                raise SystemExit(f"imported {stored} patches of {count} commits")
        figures = {
            "commits": count,
            "ggstack_import_s": statistics.median(ours),
            "git_format_patch_s": statistics.median(gits),
            "ms_per_commit": 1000 * statistics.median(ours) / max(count, 1),
            "ratio": statistics.median(ours) / statistics.median(gits),
            "runs": args.runs,
        }
        if args.json:
            print(json.dumps(figures, indent=2))
        else:
            print(
                f"{count} commits: ggstack import {figures['ggstack_import_s']:.2f} s "
                f"({figures['ms_per_commit']:.1f} ms a commit), git format-patch {figures['git_format_patch_s']:.2f} s, "
                f"ratio {figures['ratio']:.2f}x (median of {args.runs})"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
