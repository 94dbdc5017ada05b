"""ggstack apply against git rebase --onto, on the same work.

Builds a synthetic fork (or takes one: --repo/--range/--onto), imports the
stack with ``ggstack import``, then times, interleaved and several times each:

- ``ggstack apply`` cold (its cache under <gitdir>/ggstack/cache removed),
- ``ggstack apply`` warm (cache kept: a rerun onto the same base),
- ``git rebase --onto <onto> <old-base> <tip>`` in a separate worktree
  of the same repository (so both read the same object database),

and prints the median wall time and CPU (user+sys of its processes) of each, the ratio to git rebase, and
whether every replayed commit's tree is identical to git's. A first round is not counted (it reads
the packs cold), and git rebase runs without its ``gc --auto`` (the loose objects the runs leave
would have it pack them in the background of the later runs). On a shared machine git rebase's
time moves more than ggstack's from one invocation to the next: compare within one. The target is
ggstack <= 0.33x git rebase. Wall time of whole processes is what is
measured: ``ggstack apply`` as a user runs it (Python start-up included).

    python benchmarks/apply_vs_rebase.py                 # synthetic default
    python benchmarks/apply_vs_rebase.py --runs 7 --files 5000 --base-commits 500 --patches 200
    python benchmarks/apply_vs_rebase.py --repo ~/src/fork --range old..tip --onto origin/main
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

STACK = "bench"
DATE = 1_700_000_000
PYCACHE = os.path.join(tempfile.gettempdir(), "ggstack-bench-pycache")
COMPILE_EACH_RUN = False


def git(repo: str, *args: str, input: bytes | None = None, env: dict | None = None) -> str:
    proc = subprocess.run(
        ["git", "-C", repo, *args], input=input, capture_output=True, env={**os.environ, **(env or {})}
    )
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode().strip()


def ggstack(repo: str, patches: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ggstack", "--repo", repo, "--patches", patches, *args],
        capture_output=True,
        env=_ggstack_env(),
    )


def _ggstack_env() -> dict[str, str]:
    """ggstack run as an installed one runs: its bytecode compiled once (pip does it at
    install; here the first run, ``init``, into a cache of the benchmark's own), not on
    every run as PYTHONDONTWRITEBYTECODE would have it. ``--compile-each-run`` keeps that."""
    env = {**os.environ, "COLUMNS": "200"}
    if not COMPILE_EACH_RUN:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = PYCACHE
    return env


# -- the synthetic fork -------------------------------------------------------------


def _file(i: int, version: int = 0, edits: dict[int, str] | None = None) -> bytes:
    lines = [f"file {i} line {n}: some text that looks like code = {n * i % 97}" for n in range(40)]
    for n, text in (edits or {}).items():
        lines[n] = text
    return ("\n".join(lines) + "\n").encode()


def build_synthetic(path: str, files: int, base_commits: int, patches: int) -> tuple[str, str, str]:
    """A fork built with fast-import: (old base, stack tip, new base)."""
    os.makedirs(path)
    git(path, "init", "-q", "-b", "main")
    out: list[bytes] = []
    mark = 0

    def blob(data: bytes) -> int:
        nonlocal mark
        mark += 1
        out.append(b"blob\nmark :%d\ndata %d\n%s\n" % (mark, len(data), data))
        return mark

    def commit(ref: str, msg: str, changes: list[tuple[str, int]], tick: int, parent: int | None = None) -> int:
        nonlocal mark
        mark += 1
        who = f"Bench <bench@example.com> {DATE + tick} +0000"
        msg_b = msg.encode()
        out.append(f"commit {ref}\nmark :{mark}\nauthor {who}\ncommitter {who}\n".encode())
        out.append(b"data %d\n%s\n" % (len(msg_b), msg_b))
        if parent is not None:
            out.append(b"from :%d\n" % parent)
        for p, m in changes:
            out.append(f"M 100644 :{m} {p}\n".encode())
        return mark

    def name(i: int) -> str:
        return f"src/dir{i % 100:02d}/sub{i % 7}/file{i:05d}.py"

    root = commit("refs/heads/main", "initial tree", [(name(i), blob(_file(i))) for i in range(files)], 0)
    # The stack touches the first files, the base the last: the stack applies cleanly.
    tip = root
    for k in range(patches):
        i = k % (files // 2)
        line = (k // (files // 2)) % 40
        tip = commit(
            "refs/heads/stack",
            f"carry patch {k}\n\nStack work {k}.\n",
            [(name(i), blob(_file(i, edits={line: f"patched by {k}"})))],
            1 + k,
            tip,
        )
    base = root
    for k in range(base_commits):
        i = files // 2 + k % (files - files // 2)
        base = commit(
            "refs/heads/main",
            f"upstream commit {k}\n",
            [(name(i), blob(_file(i, edits={k % 40: f"upstream {k}"})))],
            10_000 + k,
            base,
        )
    subprocess.run(["git", "-C", path, "fast-import", "--quiet"], input=b"".join(out), check=True)
    git(path, "checkout", "-q", "main")
    return (
        git(path, "rev-parse", f"refs/heads/main~{base_commits}"),
        git(path, "rev-parse", "refs/heads/stack"),
        git(path, "rev-parse", "refs/heads/main"),
    )


_BREAKDOWN = """
import json, sys, time
t0 = time.perf_counter()
from ggstack import cli, git, replay
from ggstack.branches import branch_refs, write_branches
from ggstack.model import Applied
from ggstack.picks import Materializer
from ggstack.series import store
t1 = time.perf_counter()
repo = git.Repository(sys.argv[1])
stack = store.load(sys.argv[2], sys.argv[3])
t2 = time.perf_counter()
made = Materializer(repo, stack, stand_in=True)  # as replay.apply makes them
t3 = time.perf_counter()
steps = replay.replay(repo, made.picks, sys.argv[4], None, made.changes)
t4 = time.perf_counter()
remade = made.confirm()  # the stored-diff check, run meanwhile: what is left of it
if remade is not None:
    steps = replay.replay(repo, remade, sys.argv[4], None, made.changes)
t5 = time.perf_counter()
commits = [s.commit if s.applied is Applied.APPLIED else None for s in steps]
write_branches(repo, stack, commits, branch_refs(stack, sys.argv[5]), force=True)
t6 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "store.load": t2 - t1, "materialize": t3 - t2, "replay": t4 - t3,
                  "confirm": t5 - t4, "write_branches": t6 - t5}))
"""


def breakdown(repo: str, patches: str, onto: str, prefix: str) -> dict[str, float]:
    """A cold apply's stages, timed inside one process (start-up not included)."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _BREAKDOWN, repo, patches, STACK, onto, prefix],
        capture_output=True,
        text=True,
        env=_ggstack_env(),
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    split = json.loads(proc.stdout)
    return {"python start-up": wall - sum(split.values()), **split}


# -- timing -------------------------------------------------------------------------


def timed(fn, cpu: list[float] | None = None) -> float:
    """Wall time of ``fn``; with ``cpu``, the user+sys CPU of the processes it ran is appended there.
    The disk's queue is emptied first (``sync``, not timed): else what the previous step wrote
    (rebase's worktree, the checkout that resets it) is flushed during the next one's run, and
    whichever tool comes next pays for the other's writes."""
    os.sync()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    fn()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


def real_history(repo: str, rev_range: str | None, onto: str | None) -> tuple[str, str, str, str]:
    """(repository, old base, tip, new base) of ``--repo --range old..tip --onto``, as commit ids."""
    if not (rev_range and onto):
        raise SystemExit("--repo needs --range old..tip and --onto")
    repo = os.path.abspath(repo)
    old, _, tip = rev_range.partition("..")
    return repo, git(repo, "rev-parse", old), git(repo, "rev-parse", tip), git(repo, "rev-parse", onto)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", help="an existing repository (default: build a synthetic one)")
    ap.add_argument("--range", dest="rev_range", help="old-base..tip: the stack's commits (with --repo)")
    ap.add_argument("--onto", help="the new base (with --repo)")
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--base-commits", type=int, default=500)
    ap.add_argument("--patches", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument(
        "--compile-each-run", action="store_true", help="honour PYTHONDONTWRITEBYTECODE (Python compiles every run)"
    )
    args = ap.parse_args()
    global COMPILE_EACH_RUN, PYCACHE
    COMPILE_EACH_RUN = args.compile_each_run

    work = tempfile.mkdtemp(prefix="ggstack-bench-")
    PYCACHE = os.path.join(work, "pycache")
    try:
        if args.repo:
            repo, old, tip, onto = real_history(args.repo, args.rev_range, args.onto)
        else:
            repo = os.path.join(work, "fork")
            start = time.perf_counter()
            old, tip, onto = build_synthetic(repo, args.files, args.base_commits, args.patches)
            t = time.perf_counter() - start
            print(
                f"built {args.files} files, base +{args.base_commits} commits, {args.patches}-patch stack in {t:.1f}s"
            )
        patches = os.path.join(work, "patches")
        for cmd in (("init", STACK, "--repo-slug", "bench/bench", "--base", onto), ("import", STACK, f"{old}..{tip}")):
            proc = ggstack(repo, patches, *cmd)
            if proc.returncode != 0:
                raise SystemExit(proc.stderr.decode())
        wt = os.path.join(work, "rebase-wt")
        git(repo, "worktree", "add", "-q", "--detach", wt, tip)
        gitdir = git(repo, "rev-parse", "--git-common-dir")
        cache = os.path.join(gitdir if os.path.isabs(gitdir) else os.path.join(repo, gitdir), "ggstack", "cache")
        prefix = "refs/ggstack/bench"

        def apply_cold() -> None:
            shutil.rmtree(cache, ignore_errors=True)
            apply_warm()

        last_run: list[dict] = []

        def apply_warm() -> None:
            proc = ggstack(
                repo, patches, "apply", STACK, "--onto", onto, "--branch-prefix", prefix, "--force", "--json"
            )
            if proc.returncode != 0:
                raise SystemExit(proc.stderr.decode()[-3000:])
            last_run[:] = [json.loads(proc.stdout)]

        def rebase() -> None:
            # No gc --auto: the loose objects every run leaves (both tools') would have it pack them
            # in the background of the runs after, which is neither tool's work.
            git(wt, "-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0", "rebase", "-q", "--onto", onto, old)

        def reset_rebase() -> None:
            git(wt, "checkout", "-q", "--detach", tip)

        times: dict[str, list[float]] = {
            "ggstack apply (cold)": [],
            "ggstack apply (warm)": [],
            "git rebase --onto": [],
        }
        cpus: dict[str, list[float]] = {label: [] for label in times}
        apply_cold()  # a round not counted: the first reads every pack cold, for both tools
        reset_rebase()
        rebase()
        for _ in range(args.runs):
            times["ggstack apply (cold)"].append(timed(apply_cold, cpus["ggstack apply (cold)"]))
            times["ggstack apply (warm)"].append(timed(apply_warm, cpus["ggstack apply (warm)"]))
            reset_rebase()
            times["git rebase --onto"].append(timed(rebase, cpus["git rebase --onto"]))

        # git rebase drops a pick that ends up empty (a patch the base already has) and replays no
        # merge; ggstack records the empty one. So the applied ones are compared, in order. On a
        # real history the two lists can differ where they are not the same picks: import takes a
        # forge's PR merge as one patch where git rebase replays the PR's own commits, so there
        # the tips must be identical and the commits are compared where they line up.
        rebased = git(wt, "rev-list", "--reverse", f"{onto}..HEAD").split()
        outcomes = last_run[0]["patches"]
        ours = [o["commit"] for o in outcomes if o["applied"] == "applied"]
        empty = sum(o["applied"] == "empty" for o in outcomes)
        tree = lambda c: git(repo, "rev-parse", c + "^{tree}")  # noqa: E731
        alike = sum(tree(a) == tree(b) for a, b in zip(rebased, ours))
        tips = bool(ours and rebased) and tree(ours[-1]) == tree(rebased[-1])
        same = tips and (alike == len(ours) == len(rebased) or bool(args.repo))
        git(repo, "worktree", "remove", "--force", wt)
        shutil.rmtree(cache, ignore_errors=True)
        split = breakdown(repo, patches, onto, prefix)  # it writes the branches too: before they go
        if args.repo:  # leave the user's repository as it was: no benchmark refs
            names = git(repo, "for-each-ref", "--format=%(refname)", prefix + "/", f"refs/ggstack/{STACK}/").split()
            git(repo, "update-ref", "--stdin", input="".join(f"delete {n}\n" for n in names).encode())

        rebase_median = statistics.median(times["git rebase --onto"])
        rebase_cpu = statistics.median(cpus["git rebase --onto"])
        print(f"{len(outcomes)} patches onto {onto[:12]} ({args.runs} runs each, interleaved; medians)")
        for label, ts in times.items():
            med, cpu = statistics.median(ts), statistics.median(cpus[label])
            print(
                f"  {label:22s} wall {med:7.3f}s {med / rebase_median:5.2f}x git rebase"
                f"   CPU {cpu:6.3f}s {cpu / rebase_cpu:5.2f}x   (wall runs: {', '.join(f'{t:.2f}' for t in ts)})"
            )
        print(
            f"  trees identical to git rebase: {'yes' if same else 'NO'} (tips {'identical' if tips else 'DIFFER'}; "
            f"{alike} of {len(ours)} applied commits identical to the rebased one at the same place, "
            f"of {len(rebased)}; {empty} empty, which git rebase drops)"
        )
        print(
            "  where a cold ggstack apply spends its time (one run, in-process): "
            + ", ".join(f"{k} {v:.3f}s" for k, v in split.items())
        )
        cold = statistics.median(times["ggstack apply (cold)"]) / rebase_median
        cold_cpu = statistics.median(cpus["ggstack apply (cold)"]) / rebase_cpu
        print(f"  target <= 0.33x: {'met' if cold <= 0.33 else 'missed'} (cold wall {cold:.2f}x, CPU {cold_cpu:.2f}x)")
        if not same:
            sys.exit(1)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
