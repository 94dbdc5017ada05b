#!/usr/bin/env python3
"""What a rerun costs: ``check`` and ``sync`` cold, warm, and on a base moved by k commits.

The CI bot reruns ``sync`` on every schedule and every base move, mostly
with nothing changed, so a rerun must cost what changed: a warm rerun (same
stack, same base) well under the cold run, and a base moved by k commits
O(k) more, not the whole history again. This builds a synthetic fork
(the one ``apply_vs_rebase.py`` builds: one-file patches on the first half
of the files, the base's own commits on the other half), imports the stack,
and times, each as a user runs it (a whole process):

- ``ggstack check`` cold (no cache under the git dir), warm, and onto the
  base moved by ``--moved`` commits (after the warm run on the old base),
- ``ggstack sync --dry-run`` the same three ways (apply + check + test +
  pr plan, offline: no token),
- ``git cherry`` and ``git rebase --onto`` doing the same work (they have
  no cache: their time is the same cold or warm).

It prints each time, warm/cold, and the ratios against git. Not a test: a
measurement.

    python benchmarks/rerun_cost.py                       # 3000 files, 1000 patches, base +5000
    python benchmarks/rerun_cost.py --files 1000 --patches 300 --base-commits 1500 --moved 10
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from apply_vs_rebase import DATE, build_synthetic, git  # the same synthetic fork

STACK = "bench"


def ggstack(repo: str, patches: str, *args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ggstack", "--repo", repo, "--patches", patches, *args],
        capture_output=True,
        env={**{k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN")}, "COLUMNS": "200"},
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"ggstack {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode()[-3000:]}")


def move_base(repo: str, files: int, k: int) -> str:
    """``k`` more upstream commits on main (on the base's half of the files); the new tip."""
    out = [b"reset refs/heads/moved\nfrom refs/heads/main\n"]
    for n in range(k):
        i = files // 2 + (7919 * n) % (files - files // 2)
        path = f"src/dir{i % 100:02d}/sub{i % 7}/file{i:05d}.py"
        data = f"moved base commit {n}\n".encode() * 3
        who = f"Bench <bench@example.com> {DATE + 900_000 + n} +0000"
        msg = f"upstream moved {n}\n".encode()
        out.append(f"commit refs/heads/moved\nauthor {who}\ncommitter {who}\n".encode())
        out.append(b"data %d\n%s\n" % (len(msg), msg))
        out.append(f"M 100644 inline {path}\n".encode() + b"data %d\n%s\n" % (len(data), data))
    subprocess.run(["git", "-C", repo, "fast-import", "--quiet"], input=b"".join(out), check=True)
    return git(repo, "rev-parse", "refs/heads/moved")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--patches", type=int, default=1000)
    ap.add_argument("--base-commits", type=int, default=5000)
    ap.add_argument("--moved", type=int, default=10, help="commits the base moves by between two runs")
    ap.add_argument("--runs", type=int, default=3, help="rounds of each case (the median counts)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="ggstack-rerun-")
    try:
        repo = os.path.join(work, "fork")
        t = timed(lambda: build_synthetic(repo, a.files, a.base_commits, a.patches))
        old = git(repo, "rev-parse", f"refs/heads/main~{a.base_commits}")
        tip, onto = git(repo, "rev-parse", "refs/heads/stack"), git(repo, "rev-parse", "refs/heads/main")
        moved = move_base(repo, a.files, a.moved)
        print(f"built {a.files} files, {a.patches} one-file patches, base +{a.base_commits} commits in {t:.1f}s")
        patches = os.path.join(work, "patches")
        ggstack(repo, patches, "init", STACK, "--repo-slug", "bench/bench", "--base", "main")
        t_import = timed(lambda: ggstack(repo, patches, "import", STACK, f"{old}..{tip}"))
        print(f"import of {a.patches} commits: {t_import:.2f}s ({1000 * t_import / a.patches:.1f} ms a patch)")

        gitdir = git(repo, "rev-parse", "--absolute-git-dir")
        cache = os.path.join(gitdir, "ggstack", "cache")
        wt = os.path.join(work, "rebase-wt")
        git(repo, "worktree", "add", "-q", "--detach", wt, tip)

        def cold(cmd: tuple[str, ...], base: str) -> float:
            shutil.rmtree(cache, ignore_errors=True)
            return warm(cmd, base)

        def warm(cmd: tuple[str, ...], base: str) -> float:
            return timed(lambda: ggstack(repo, patches, *cmd, STACK, "--onto", base))

        def rebase(base: str) -> None:
            git(wt, "checkout", "-q", "--detach", tip)
            git(wt, "-c", "core.hooksPath=/dev/null", "rebase", "-q", "--onto", base, old)

        cases: dict[str, list[float]] = {}
        for _ in range(a.runs):
            for name, cmd in (("check", ("check",)), ("sync", ("sync", "--dry-run"))):
                cases.setdefault(f"{name} cold", []).append(cold(cmd, "main"))
                cases.setdefault(f"{name} warm", []).append(warm(cmd, "main"))
                cases.setdefault(f"{name} moved", []).append(warm(cmd, "moved"))
                print("  ", {k: round(v[-1], 2) for k, v in cases.items()}, flush=True)
            cases.setdefault("git cherry", []).append(timed(lambda: git(repo, "cherry", onto, tip)))
            cases.setdefault("git cherry moved", []).append(timed(lambda: git(repo, "cherry", moved, tip)))
            cases.setdefault("git rebase", []).append(timed(lambda: rebase(onto)))
            cases.setdefault("git rebase moved", []).append(timed(lambda: rebase(moved)))
        git(repo, "worktree", "remove", "--force", wt)

        med = {k: statistics.median(v) for k, v in cases.items()}
        print(f"\n{a.patches} patches onto main, then onto main+{a.moved} ({a.runs} rounds, median wall time)")
        for k, v in med.items():
            print(f"  {k:18s} {v:7.3f}s   (runs: {', '.join(f'{x:.2f}' for x in cases[k])})")
        for name, git_ref in (("check", "git cherry"), ("sync", "git rebase")):
            c, w, m = med[f"{name} cold"], med[f"{name} warm"], med[f"{name} moved"]
            print(
                f"  {name}: warm/cold {w / c:5.2f} (target <= 0.10: {'met' if w / c <= 0.10 else 'missed'}), "
                f"moved-by-{a.moved}/cold {m / c:5.2f}, moved - warm {m - w:+.2f}s; "
                f"cold {c / med[git_ref]:.2f}x, warm {w / med[git_ref]:.2f}x, "
                f"moved {m / med[git_ref + ' moved']:.2f}x {git_ref}"
            )
        print(f"  load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    finally:
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
