#!/usr/bin/env python3
"""``ggstack check --commits`` against ``git cherry``: wall time and what each finds.

By default it builds a synthetic fork with ``git fast-import``: thousands of
base commits, a few hundred fork commits of which some were cherry-picked
exactly into the base, some picked and later reverted, some squashed into
larger base commits, some adapted (one hunk changed). Or point it at any
repository: ``--repo PATH --base REF --head REF`` judges the commits of
``REF_base..REF_head`` (what ``git cherry BASE HEAD`` lists).

It prints both wall times, the ratio, how many each found, and checks that
ggstack finds everything git cherry finds except the reverted picks (which
git cherry wrongly calls "already upstream"). Not a test: a measurement.

    python benchmarks/check_vs_cherry.py                      # synthetic, defaults
    python benchmarks/check_vs_cherry.py --base-commits 20000 --candidates 500
    python benchmarks/check_vs_cherry.py --repo ~/src/vllm --base origin/main --head my-fork
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

LINES = 400  # lines per file
SLOT = 10  # fork changes touch lines 10, 20, ...; the base's own edits lines 5, 15, ... (outside 3 lines of context)


def git(repo: str, *args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", "-C", repo, *args], input=input, capture_output=True, check=True)
    return proc.stdout.decode()


class Synth:
    """The synthetic fork: file contents in memory, streamed to git fast-import."""

    def __init__(self, files: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.files = [f"src/mod{i:04d}.py" for i in range(files)]
        root = {f: [f"{f} line {n}" for n in range(1, LINES + 1)] for f in self.files}
        self.base = {f: list(v) for f, v in root.items()}
        self.fork = {f: list(v) for f, v in root.items()}
        self.stream: list[bytes] = []
        self.mark = 0
        self.tick = 1_700_000_000
        self.root = self._commit("refs/heads/main", "root", root, None)
        self.base_tip = self.root
        self.fork_tip = self.root
        self.slots = [(f, s) for f in self.files for s in range(SLOT, LINES, SLOT)]
        self.rng.shuffle(self.slots)

    def _commit(self, ref: str, message: str, changed: dict[str, list[str]], parent: int | None) -> int:
        self.mark += 1
        self.tick += 60
        msg = message.encode()
        out = [f"commit {ref}\nmark :{self.mark}\n".encode()]
        out.append(
            f"author Bench <bench@example.com> {self.tick} +0000\ncommitter Bench <bench@example.com> {self.tick} +0000\n".encode()
        )
        out.append(b"data %d\n%s\n" % (len(msg), msg))
        if parent is not None:
            out.append(f"from :{parent}\n".encode())
        for path, lines in changed.items():
            data = ("\n".join(lines) + "\n").encode()
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))
        self.stream.append(b"".join(out))
        return self.mark

    def base_commit(self, message: str, edits: dict[tuple[str, int], str]) -> int:
        touched = {}
        for (f, line), text in edits.items():
            self.base[f][line - 1] = text
            touched[f] = self.base[f]
        self.base_tip = self._commit("refs/heads/main", message, touched, self.base_tip)
        return self.base_tip

    def base_noise(self, i: int) -> int:
        f = self.rng.choice(self.files)
        line = self.rng.randrange(SLOT // 2, LINES, SLOT)
        return self.base_commit(f"upstream {i}", {(f, line): f"{f} upstream edit {i}"})

    def fork_commit(self, i: int, hunks: int) -> tuple[int, dict[tuple[str, int], str]]:
        edits = {}
        for _ in range(hunks):
            f, line = self.slots.pop()
            edits[(f, line)] = f"{f} fork change {i} at {line}"
        touched = {}
        for (f, line), text in edits.items():
            self.fork[f][line - 1] = text
            touched[f] = self.fork[f]
        self.fork_tip = self._commit("refs/heads/fork", f"fork change {i}", touched, self.fork_tip)
        return self.fork_tip, edits

    def write(self, path: str) -> None:
        subprocess.run(["git", "init", "-q", "-b", "main", path], check=True)
        data = b"".join(self.stream) + b"done\n"
        subprocess.run(["git", "-C", path, "fast-import", "--quiet", "--done"], input=data, check=True)
        subprocess.run(["git", "-C", path, "repack", "-adq"], check=True)


def synthesize(path: str, base_commits: int, candidates: int, seed: int) -> dict[str, list[str]]:
    """Build the fork; return which candidate marks ended up how in the base."""
    s = Synth(max(50, candidates // 2), seed)
    kinds = (
        ["exact"] * (candidates // 6)
        + ["reverted"] * (candidates // 15)
        + ["squashed"] * (candidates // 10)
        + ["adapted"] * (candidates // 10)
    )
    kinds += ["unique"] * (candidates - len(kinds))
    s.rng.shuffle(kinds)
    for _ in range(base_commits // 4):  # the fork point is well behind the base
        s.base_noise(_)
    fork: list[tuple[int, dict, str]] = []
    for i, kind in enumerate(kinds):
        mark, edits = s.fork_commit(i, hunks=2 if kind == "adapted" else s.rng.choice((1, 1, 2)))
        fork.append((mark, edits, kind))
    todo = [(m, e, k) for m, e, k in fork if k != "unique"]
    s.rng.shuffle(todo)
    remaining = base_commits - base_commits // 4
    at = sorted(s.rng.sample(range(remaining), len(todo)))
    reverts: list[tuple[int, dict]] = []
    by_mark: dict[int, str] = {}
    j = 0
    for n in range(remaining):
        while j < len(todo) and at[j] == n:
            mark, edits, kind = todo[j]
            if kind in ("exact", "reverted"):
                s.base_commit(f"picked fork change (mark {mark})", edits)
                if kind == "reverted":
                    reverts.append(
                        (
                            min(remaining - 1, n + s.rng.randrange(5, 200)),
                            {k: s.base[k[0]][k[1] - 1] for k in edits},
                            edits,
                        )
                    )
            elif kind == "squashed":
                extra = {
                    (s.rng.choice(s.files), s.rng.randrange(SLOT // 2, LINES, SLOT)): f"lifecycle work {n}"
                    for _ in range(3)
                }
                s.base_commit("lifecycle rework (squash)", {**edits, **extra})
            elif kind == "adapted":
                first, second = list(edits)
                s.base_commit("adapted pick", {first: edits[first], second: edits[second] + " (adapted)"})
            by_mark[mark] = kind
            j += 1
        for _when, _, edits in [r for r in reverts if r[0] == n]:
            original = {k: f"{k[0]} line {k[1]}" for k in edits}
            s.base_commit("Revert a picked fork change", original)
        s.base_noise(n + base_commits)
    s.write(path)
    marks = git(path, "rev-list", "--reverse", "main..fork").split()
    # fork marks are in commit order; map them to shas through the order
    order = [m for m, _, _ in fork]
    return {sha: [by_mark.get(mark, "unique")] for sha, mark in zip(marks, order)}


CPU: dict[str, float] = {}  # the fastest CPU time (user + sys, every descendant) per tool


def timed(args: list[str], cwd: str | None = None, tool: str = "") -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if tool:
        CPU[tool] = min(CPU.get(tool, cpu), cpu)
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(args[:6])} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return dt, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", help="an existing repository (default: build a synthetic one)")
    ap.add_argument("--base", default="main", help="the base ref (git cherry's <upstream>)")
    ap.add_argument("--head", default="fork", help="the fork ref (git cherry's <head>)")
    ap.add_argument("--base-commits", type=int, default=5000)
    ap.add_argument("--candidates", type=int, default=300)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds of each tool (the fastest counts)")
    ap.add_argument("--keep", action="store_true", help="keep the synthetic repository and print where")
    a = ap.parse_args()

    tmp = None
    truth: dict[str, list[str]] = {}
    repo = a.repo
    if repo is None:
        tmp = tempfile.mkdtemp(prefix="ggstack-bench-")
        repo = os.path.join(tmp, "fork")
        t0 = time.perf_counter()
        truth = synthesize(repo, a.base_commits, a.candidates, a.seed)
        print(
            f"synthetic repository: {a.base_commits} base commits, {a.candidates} fork commits, built in {time.perf_counter() - t0:.1f}s ({repo})"
        )
    commits = git(repo, "rev-list", "--reverse", "--no-merges", f"{a.base}..{a.head}").split()
    base_size = len(git(repo, "rev-list", f"{a.head}..{a.base}").split())
    print(f"judging {len(commits)} commits of {a.base}..{a.head} against {base_size} base commits")

    # ggstack runs as an installed tool does: with its bytecode cached. Where the
    # environment forbids writing it (PYTHONDONTWRITEBYTECODE), every run would
    # time Python compiling ggstack's modules (~0.5 s), not ggstack.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "ggstack", "--help"], capture_output=True, check=True)
    cherry_cmd = ["git", "-C", repo, "cherry", a.base, a.head]
    cmd = [sys.executable, "-m", "ggstack", "--repo", repo, "check", "--onto", a.base, "--json", "--commits", *commits]
    # Cold: no patch-id cache. Warm: the cache from the cold run (a rerun on an
    # unchanged base). The two tools alternate, and each keeps its fastest
    # round, so a busy machine slows both alike.
    cache = os.path.join(git(repo, "rev-parse", "--absolute-git-dir").strip(), "ggstack")
    cherry_time = cold = warm = float("inf")
    for _ in range(a.rounds):
        subprocess.run(["rm", "-rf", cache], check=True)
        t, cherry_out = timed(cherry_cmd, tool="cherry")
        cherry_time = min(cherry_time, t)
        t, out = timed(cmd, tool="cold")
        cold = min(cold, t)
        warm = min(warm, timed(cmd, tool="warm")[0])
    cherry_found = {line[2:] for line in cherry_out.splitlines() if line.startswith("- ")}
    run = json.loads(out)
    verdicts = {p["source_commit"]: p["verdict"] for p in run["patches"]}
    found = {c for c, v in verdicts.items() if v == "represented"}
    partial = {c for c, v in verdicts.items() if v == "partial"}

    print()
    print(
        f"git cherry          {cherry_time:7.3f}s wall  {CPU['cherry']:6.3f}s cpu   found {len(cherry_found)} already upstream"
    )
    print(
        f"ggstack check cold  {cold:7.3f}s wall  {CPU['cold']:6.3f}s cpu   ratio {cold / cherry_time:5.2f}x wall, {CPU['cold'] / CPU['cherry']:5.2f}x cpu"
    )
    print(
        f"ggstack check warm  {warm:7.3f}s wall  {CPU['warm']:6.3f}s cpu   ratio {warm / cherry_time:5.2f}x wall, {CPU['warm'] / CPU['cherry']:5.2f}x cpu   (patch-ids cached)"
    )
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    counts = {v: list(verdicts.values()).count(v) for v in ("represented", "partial", "unique", "conflict")}
    print(f"ggstack verdicts    {counts}")
    missed = cherry_found - found - partial
    print(f"found by git cherry, not represented by ggstack: {len(missed)}", end="")
    if truth:
        reverted = {c for c in missed if truth.get(c) == ["reverted"]}
        print(f" (of which reverted upstream: {len(reverted)}; other: {len(missed - reverted)})")
        extra = found - cherry_found
        print(f"found by ggstack only: {len(extra)} represented + {len(partial - cherry_found)} partial")
        wrong = [c for c in found if truth.get(c) not in (["exact"], ["squashed"])]
        print(f"represented but not in the base (false 'represented'): {len(wrong)}")
        by_kind: dict[str, dict[str, int]] = {}
        for c, kind in truth.items():
            by_kind.setdefault(kind[0], {}).setdefault(verdicts.get(c, "?"), 0)
            by_kind[kind[0]][verdicts.get(c, "?")] += 1
        print("truth -> ggstack verdicts:", json.dumps(by_kind, sort_keys=True))
        print(
            "truth -> git cherry '-':  ",
            json.dumps(
                {k: sum(1 for c, t in truth.items() if t[0] == k and c in cherry_found) for k in sorted(by_kind)}
            ),
        )
    else:
        print()
        print(f"found by ggstack only: {len(found - cherry_found)} represented + {len(partial - cherry_found)} partial")
    if tmp and not a.keep:
        subprocess.run(["rm", "-rf", tmp], check=True)
    elif tmp:
        print(f"kept {repo}")


if __name__ == "__main__":
    main()
