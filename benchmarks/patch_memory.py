#!/usr/bin/env python3
"""Peak memory of ggstack on one large patch, against the patch's size.

Builds a repository whose one fork commit adds a text file of --mb megabytes
(lines of varied length, as a generated file or a vendored one has), then runs
each command on it as a user does — import, list, apply, check, rebase, test —
each in a process of its own, and reads that process's peak resident set
(``getrusage(RUSAGE_SELF).ru_maxrss``: ggstack's own memory, not git's). The
figure a command is judged by is its peak above the same process's peak on an
empty stack (the interpreter and the modules), divided by the patch file's size.

    python benchmarks/patch_memory.py              # a 50 MB patch
    python benchmarks/patch_memory.py --mb 200 --json

A 50.8 MiB patch (one machine, 2 cores; the peak above start-up, in patch sizes):

    command   before   after   (before: c090690, the patch file split into a list of its
    import      9.0     2.0     lines and copied once a parsing step; after: its bytes and
    list        8.0     2.0     its diff's text, and git's diff of its source commit
    apply       8.0     3.1     compared where it is; check also holds the diff's lines,
    check       8.3     6.1     which its judgement reads one by one)
    rebase      8.1     3.1
    test        8.1     3.1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

# Runs one command in this process and prints its peak RSS: the ggstack command
# itself (``python -m ggstack`` would end with os._exit, before anything can say).
MEASURE = """
import resource, sys
from ggstack.cli import main
code = 0
try:
    main.main(sys.argv[1:], prog_name="ggstack", standalone_mode=False)
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else 1
sys.stdout.flush()
print(f"PEAK {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss} EXIT {code}", file=sys.stderr)
"""

COMMANDS = [
    ["import", "s", "base..main"],
    ["list", "s"],
    ["apply", "s"],
    ["check", "s"],
    ["rebase", "s", "--onto", "base"],
    ["test", "s"],
]


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout.strip()


def build(where: str, megabytes: float) -> str:
    repo = os.path.join(where, "fork")
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
    with open(os.path.join(repo, "README"), "w") as f:
        f.write("base\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "base")
    rng = random.Random(1)
    size, i = 0, 0
    with open(os.path.join(repo, "big.txt"), "w") as f:
        while size < megabytes * 1024 * 1024:
            line = f"line {i} " + "x" * rng.randint(10, 90) + "\n"
            f.write(line)
            size += len(line)
            i += 1
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "add a big generated file")
    return repo


def peak_kib(repo: str, patches: str, args: list[str]) -> tuple[int, int]:
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, "--repo", repo, "--patches", patches, *args],
        capture_output=True,
        text=True,
        cwd=repo,
    )
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("PEAK ")]
    if not line:
        raise SystemExit(f"ggstack {' '.join(args)} said nothing of its memory: {proc.stderr[-500:]}")
    _, kib, _, code = line[-1].split()
    return int(kib), int(code)


def measure(megabytes: float) -> dict:
    work = tempfile.mkdtemp(prefix="ggstack-memory-")
    try:
        repo = build(work, megabytes)
        patches = os.path.join(work, "patches")
        start, _ = peak_kib(repo, patches, ["init", "s", "--repo-slug", "o/r", "--base", "base"])
        rows = []
        patch_kib = 0
        for args in COMMANDS:
            kib, code = peak_kib(repo, patches, args)
            if not patch_kib:
                patch_kib = (
                    sum(os.path.getsize(os.path.join(patches, "s", n)) for n in os.listdir(os.path.join(patches, "s")))
                    // 1024
                )
            rows.append(
                {
                    "command": " ".join(args),
                    "exit": code,
                    "peak_mib": round(kib / 1024, 1),
                    "above_start_per_patch": round((kib - start) / patch_kib, 2),
                }
            )
        return {"patch_mib": round(patch_kib / 1024, 1), "start_mib": round(start / 1024, 1), "commands": rows}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=50.0, help="size of the file the patch adds (MB)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for key in ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_API_URL"):
        os.environ.pop(key, None)
    figures = measure(args.mb)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"patch file {figures['patch_mib']} MiB; an empty stack's command peaks at {figures['start_mib']} MiB")
    for row in figures["commands"]:
        print(
            f"  {row['command']:<24} exit {row['exit']}  peak {row['peak_mib']:>7} MiB  above start: {row['above_start_per_patch']}x the patch"
        )


if __name__ == "__main__":
    main()
