"""ggstack rebase of the stored series: its speed, and that nothing but the base moved.

Builds the synthetic fork of ``apply_vs_rebase.py`` (or takes one:
--repo/--range/--onto), imports the stack, and then, several times each
(the stack directory restored before each run, the cache removed):

- ``ggstack rebase --onto`` cold: every patch rewritten onto the new base;
- ``ggstack rebase --onto`` again on the rebased series: a no-op, no file written;
- ``git rebase --onto`` of the same commits in a worktree, for scale.

and checks the differential claims: ``apply`` of the rebased series gives the
trees ``apply`` gave before the rebase (and git rebase gives), the second
rebase leaves every byte, and every Stack-Patch-Id and message is kept.

    python benchmarks/rebase_series.py                      # synthetic default
    python benchmarks/rebase_series.py --files 5000 --base-commits 500 --patches 200 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apply_vs_rebase import STACK, build_synthetic, ggstack, git


def snapshot(path: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read()
    return out


def run_ok(repo: str, patches: str, *args: str) -> dict:
    proc = ggstack(repo, patches, *args)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode()[-3000:])
    return json.loads(proc.stdout) if "--json" in args else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", help="an existing repository (default: build a synthetic one)")
    ap.add_argument("--range", dest="rev_range", help="old-base..tip: the stack's commits (with --repo)")
    ap.add_argument("--onto", help="the new base (with --repo)")
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--base-commits", type=int, default=500)
    ap.add_argument("--patches", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ggstack-rebase-bench-")
    try:
        if args.repo:
            repo = os.path.abspath(args.repo)
            old, _, tip = (args.rev_range or "").partition("..")
            old, tip, onto = git(repo, "rev-parse", old), git(repo, "rev-parse", tip), git(repo, "rev-parse", args.onto)
        else:
            repo = os.path.join(work, "fork")
            old, tip, onto = build_synthetic(repo, args.files, args.base_commits, args.patches)
        patches = os.path.join(work, "patches")
        ggstack(repo, patches, "init", STACK, "--repo-slug", "bench/bench", "--base", onto)
        ggstack(repo, patches, "import", STACK, f"{old}..{tip}")
        stack_dir = os.path.join(patches, STACK)
        saved = os.path.join(work, "saved")
        shutil.copytree(stack_dir, saved)
        original = snapshot(stack_dir)
        prefix = ["--branch-prefix", "refs/ggstack/bench"]
        before = run_ok(repo, patches, "apply", STACK, "--onto", onto, "--force", "--json", *prefix)
        trees_before = [git(repo, "rev-parse", p["commit"] + "^{tree}") for p in before["patches"]]
        gitdir = git(repo, "rev-parse", "--absolute-git-dir")
        cache = os.path.join(gitdir, "ggstack", "cache")

        times: dict[str, list[float]] = {"ggstack rebase (cold)": [], "ggstack rebase (again: no-op)": []}
        rewritten = unchanged = 0
        for _ in range(args.runs):
            shutil.rmtree(stack_dir)
            shutil.copytree(saved, stack_dir)
            shutil.rmtree(cache, ignore_errors=True)
            start = time.perf_counter()
            out = run_ok(repo, patches, "rebase", STACK, "--onto", onto, "--json")
            times["ggstack rebase (cold)"].append(time.perf_counter() - start)
            rewritten = sum(1 for p in out["patches"] if p["status"] == "rewritten")
            once = snapshot(stack_dir)
            start = time.perf_counter()
            again = run_ok(repo, patches, "rebase", STACK, "--onto", onto, "--json")
            times["ggstack rebase (again: no-op)"].append(time.perf_counter() - start)
            unchanged = sum(1 for p in again["patches"] if p["status"] == "unchanged")
            if snapshot(stack_dir) != once or again["written"]:
                raise SystemExit("a second rebase onto the same base changed the stack")

        wt = os.path.join(work, "wt")
        git(repo, "worktree", "add", "-q", "--detach", wt, tip)
        start = time.perf_counter()
        git(wt, "-c", "core.hooksPath=/dev/null", "rebase", "-q", "--onto", onto, old)
        git_rebase = time.perf_counter() - start
        theirs = [
            git(repo, "rev-parse", c + "^{tree}") for c in git(wt, "rev-list", "--reverse", f"{onto}..HEAD").split()
        ]

        after = run_ok(repo, patches, "apply", STACK, "--onto", onto, "--force", "--json", *prefix)
        trees_after = [git(repo, "rev-parse", p["commit"] + "^{tree}") for p in after["patches"]]
        rebased = snapshot(stack_dir)
        kept_ids = all(
            [line for line in original[n].decode().splitlines() if line.startswith("Stack-Patch-Id: ")]
            == [line for line in rebased[n].decode().splitlines() if line.startswith("Stack-Patch-Id: ")]
            for n in original
            if n.endswith(".patch")
        )
        n = len(trees_before)
        print(f"{n} patches onto {onto[:12]} ({args.runs} runs; median wall time, whole processes)")
        for label, ts in times.items():
            print(f"  {label:30s} {statistics.median(ts):7.3f}s   (runs: {', '.join(f'{t:.2f}' for t in ts)})")
        print(f"  {'git rebase --onto (for scale)':30s} {git_rebase:7.3f}s")
        print(f"  patches rewritten: {rewritten} of {n}; unchanged on the second rebase: {unchanged} of {n}")
        same = trees_after == trees_before == theirs
        print(f"  apply of the rebased series = apply before = git rebase, tree by tree: {'yes' if same else 'NO'}")
        print(f"  Stack-Patch-Id of every patch kept: {'yes' if kept_ids else 'NO'}")
        if not (same and kept_ids):
            sys.exit(1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
