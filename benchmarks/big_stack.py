"""The CI bot's case: one stack of hundreds of patches on a long history, each stage's cost.

The other benchmarks time one stage against its git counterpart in wall and
CPU; this one asks what a stack of hundreds of patches costs in memory and in
processes too, stage by stage, on a real history (or the synthetic fork of
``apply_vs_rebase.py``). For each stage, run once as a user runs it:

- ``ggstack import`` of the range into an empty stack, next to ``git
  format-patch`` of the same range;
- ``ggstack apply`` onto the new base (cold: no cache), next to ``git rebase
  --onto`` in a worktree (it stops at the first conflict: then its figures
  are for the commits before it, and it says so);
- ``ggstack check`` of the stack (``--no-cache``), next to ``git cherry``;
- ``ggstack report`` of the checked Run as JSON, Markdown and the table;

it prints wall time, peak RSS (the largest process of the command's tree, as
``wait4`` reports it; a small git command's figure is the benchmark's own
memory, which the forked child holds until it execs git) and how many git processes ran (one ``start`` event
each in ``GIT_TRACE2_EVENT``, git's own children included), and the ratios.
With ``--check-out FILE`` the check's Run is kept (compare verdicts across
versions). Not a test: a measurement, no figure asserted.

    python benchmarks/big_stack.py                                   # synthetic: 400 patches
    git clone -q --bare SQLALCHEMY /tmp/sqla.git && git clone -q /tmp/sqla.git /tmp/fork
    python benchmarks/big_stack.py --repo /tmp/fork --range "$(git -C /tmp/fork merge-base origin/main \\
        origin/rel_1_4)..TIP" --onto origin/main                      # TIP: the 400th commit of rel_1_4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apply_vs_rebase import STACK, _ggstack_env, build_synthetic, git, real_history


@dataclass
class Cost:
    wall: float
    rss_mb: float
    gits: int
    rc: int

    def __str__(self) -> str:
        return f"wall {self.wall:7.2f}s  peak RSS {self.rss_mb:7.1f} MB  git processes {self.gits:6d}"


def measured(argv: list[str], cwd: str | None = None, out: str | None = None) -> Cost:
    """Run ``argv`` once: its wall time, the peak RSS of its largest process, its git processes."""
    with tempfile.NamedTemporaryFile(prefix="ggstack-trace2-") as trace:
        env = {**_ggstack_env(), "GIT_TRACE2_EVENT": trace.name}
        with open(out or os.devnull, "wb") as sink:
            start = time.perf_counter()
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=sink, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
        with open(trace.name, "rb") as f:
            gits = sum(b'"event":"start"' in line for line in f)
    return Cost(wall, usage.ru_maxrss / 1024, gits, proc.returncode)


def _patches(run_json: str) -> list[dict]:
    with open(run_json) as f:
        return json.load(f)["patches"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", help="an existing repository, not a bare one (default: build a synthetic one)")
    ap.add_argument("--range", dest="rev_range", help="old-base..tip: the stack's commits (with --repo)")
    ap.add_argument("--onto", help="the new base (with --repo)")
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--base-commits", type=int, default=2000)
    ap.add_argument("--patches", type=int, default=400)
    ap.add_argument("--check-out", help="keep the check's Run (JSON) in this file")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ggstack-big-")
    try:
        if args.repo:
            repo, old, tip, onto = real_history(args.repo, args.rev_range, args.onto)
        else:
            repo = os.path.join(work, "fork")
            old, tip, onto = build_synthetic(repo, args.files, args.base_commits, args.patches)
        run_stages(repo, work, old, tip, onto, args.check_out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_stages(repo: str, work: str, old: str, tip: str, onto: str, check_out: str | None) -> None:
    patches = os.path.join(work, "patches")
    gg = [sys.executable, "-m", "ggstack", "--repo", repo, "--patches", patches]
    subprocess.run([*gg, "init", STACK, "--repo-slug", "bench/bench", "--base", onto], env=_ggstack_env(), check=True)
    gitdir = git(repo, "rev-parse", "--absolute-git-dir")
    shutil.rmtree(os.path.join(gitdir, "ggstack", "cache"), ignore_errors=True)
    rows: list[tuple[str, Cost, str, Cost | None]] = []

    imported = measured([*gg, "import", STACK, f"{old}..{tip}"])
    fp = measured(
        ["git", "-C", repo, "format-patch", "-q", "--full-index", "-o", os.path.join(work, "fp"), f"{old}..{tip}"]
    )
    rows.append(("import", imported, "git format-patch", fp))

    run_json = os.path.join(work, "apply.json")
    prefix = "refs/ggstack/bench"
    applied = measured(
        [*gg, "apply", STACK, "--onto", onto, "--branch-prefix", prefix, "--force", "--json"], out=run_json
    )
    outcomes = _patches(run_json)
    wt = os.path.join(work, "rebase-wt")
    git(repo, "worktree", "add", "-q", "--detach", wt, tip)
    rebase = measured(["git", "-C", wt, "-c", "core.hooksPath=/dev/null", "rebase", "-q", "--onto", onto, old])
    done = len(git(repo, "rev-list", f"{onto}..{git(wt, 'rev-parse', 'HEAD')}").split()) if rebase.rc else -1
    subprocess.run(["git", "-C", wt, "rebase", "--abort"], capture_output=True)
    git(repo, "worktree", "remove", "--force", wt)
    label = "git rebase --onto" + (f" (stopped at a conflict after {done} commits)" if rebase.rc else "")
    rows.append(("apply (cold)", applied, label, rebase))

    checked = check_out or os.path.join(work, "check.json")
    check = measured([*gg, "check", STACK, "--onto", onto, "--json", "--no-cache"], out=checked)
    cherry = measured(["git", "-C", repo, "cherry", onto, tip, old])
    rows.append(("check (no cache)", check, "git cherry", cherry))
    for fmt in ("json", "markdown", "table"):
        report = [sys.executable, "-m", "ggstack", "report", checked, "--format", fmt]
        rows.append((f"report --format {fmt}", measured(report), "", None))

    names = git(repo, "for-each-ref", "--format=%(refname)", prefix + "/", f"refs/ggstack/{STACK}/").split()
    git(repo, "update-ref", "--stdin", input="".join(f"delete {n}\n" for n in names).encode())
    states = {s: sum(o["applied"] == s for o in outcomes) for s in ("applied", "empty", "conflict")}
    verdicts: dict[str, int] = {}
    for o in _patches(checked):
        verdicts[str(o.get("verdict"))] = verdicts.get(str(o.get("verdict")), 0) + 1
    print(f"{len(outcomes)} patches {old[:10]}..{tip[:10]} onto {onto[:10]}: apply {states}; check {verdicts}")
    for stage, ours, theirs_label, theirs in rows:
        line = f"  ggstack {stage:26s} {ours}"
        if theirs is not None:
            line += (
                f"\n    {theirs_label:33s} {theirs}   ggstack/git: wall {ours.wall / max(theirs.wall, 1e-9):5.2f}x,"
                f" RSS {ours.rss_mb / max(theirs.rss_mb, 1e-9):5.2f}x, git processes {ours.gits / max(theirs.gits, 1):5.2f}x"
            )
        print(line)
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
