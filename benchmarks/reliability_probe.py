#!/usr/bin/env python3
"""Nothing lost, nothing leaked: the probe's classes of case, counted.

Each class runs the real command as a subprocess against a fresh repository
built here, the way a user (or an attacker with write access to a stack file)
would, and counts what went wrong:

- kills: SIGKILL after the 1st, 2nd, … file operation of each command that
  changes a stack (``GGSTACK_DEBUG_KILL_AFTER_FILE_OPS``); a patch that is in
  neither the old nor the new state is lost, a stack that does not load is
  unloadable;
- concurrency: N commands that edit the same stack at once; an edit that
  exited 0 and is not in the result is a lost update;
- worktrees: a per-patch branch checked out in a worktree, then ``apply``
  onto a moved base; a branch that moved under its worktree is counted;
- sha256: a ``--object-format=sha256`` repository, ``check --commits`` on one
  picked and one new commit: right verdicts, or a clean refusal (exit 2);
- token: a test command that searches ``/proc`` for the token ``ggstack test``
  was started with; every hit is a leak;
- argument injection: ``target.remote`` and ``--onto`` values that would run
  a command if git took them as options; a marker file made is a hit;
- round two (``probe_round_two.py``, whose docstring says what each counts): refs,
  symlinks, worktree-kills, hostile-config, sha256-loop, bad-input, fuzz, scrub, memory.

Not a test (the tests hold each class on a small case): a measurement that
prints one line a class, for the closing figures.

    python benchmarks/reliability_probe.py            # every class
    python benchmarks/reliability_probe.py --only kills,token
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

KILL = "GGSTACK_DEBUG_KILL_AFTER_FILE_OPS"
TOKEN = "ghp_probe0123456789abcdefghijklmnopqrstuv"


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env={**os.environ, **(env or {})}
    )
    return proc.stdout.strip()


def gg(repo: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "ggstack", "--repo", str(repo), "--patches", str(repo / "patches"), *args]
    return subprocess.run(
        argv, cwd=repo, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout
    )


def fork(where: Path, *, commits: int = 4, object_format: str = "sha1") -> tuple[Path, list[str]]:
    """A repository on main with ``commits`` fork commits on top of a base, and a stack ``s`` of them."""
    repo = where / "fork"
    subprocess.run(["git", "init", "-q", "-b", "main", f"--object-format={object_format}", str(repo)], check=True)
    (repo / "f.txt").write_text("".join(f"line {i}\n" for i in range(40)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    picks = []
    for i in range(commits):
        (repo / f"t{i}.txt").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "fix: typo")  # one subject (one slug) for all: the hard case
        picks.append(git(repo, "rev-parse", "HEAD"))
    git(repo, "branch", "base", f"HEAD~{commits}")
    for args in (["init", "s", "--repo-slug", "owner/repo", "--base", "base"], ["import", "s", *picks]):
        proc = gg(repo, *args)
        if proc.returncode:
            raise SystemExit(f"setting up the probe failed: ggstack {' '.join(args)}: {proc.stderr.strip()}")
    return repo, picks


def listing(repo: Path) -> list[str] | None:
    """The stack's Stack-Patch-Ids in order, or None when it does not load."""
    proc = gg(repo, "list", "s", "--json")
    if proc.returncode:
        return None
    return [p.get("stack_patch_id") or p.get("name") for p in json.loads(proc.stdout)["s"]]


# -- classes ------------------------------------------------------------------------------


def kills(tmp: Path) -> str:
    commands = [["move", "s", "3", "--to", "1"], ["remove", "s", "2"], ["import", "s", "{extra}"]]
    commands += [c for c in (["rebase", "s", "--onto", "main"], ["drop", "s", "--represented"]) if _has(c[0])]
    total = lost = unloadable = 0
    for args in commands:
        repo, _ = fork(tmp / args[0])
        (repo / "x.txt").write_text("x\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "extra")
        argv = [a.replace("{extra}", git(repo, "rev-parse", "HEAD")) for a in args]
        saved = tmp / f"{args[0]}-saved"
        shutil.copytree(repo / "patches", saved)
        old = listing(repo)
        done = gg(repo, *argv)
        new = listing(repo) if done.returncode == 0 else old
        known = set(old or []) | set(new or [])
        for n in range(1, 400):
            shutil.rmtree(repo / "patches")
            shutil.copytree(saved, repo / "patches")
            proc = gg(repo, *argv, env={KILL: str(n)})
            if proc.returncode != -signal.SIGKILL:
                break
            total += 1
            now = listing(repo)
            if now is None:
                unloadable += 1
            elif now not in (old, new):
                lost += len(known - set(now)) or 1
    names = ", ".join(a[0] for a in commands)
    return f"kills ({names}): {total} kill points, {lost} lost patches, {unloadable} unloadable stacks"


def concurrency(tmp: Path, trials: int = 6) -> str:
    lost = 0
    for t in range(trials):
        repo, _ = fork(tmp / f"c{t}")
        extras = []
        for i in range(2):
            (repo / f"c{i}.txt").write_text(f"{i}\n")
            git(repo, "add", "-A")
            git(repo, "commit", "-qm", f"concurrent {i}")
            extras.append(git(repo, "rev-parse", "HEAD"))
        argv = [sys.executable, "-m", "ggstack", "--repo", str(repo), "--patches", str(repo / "patches")]
        procs = [
            subprocess.Popen(
                [*argv, "import", "s", sha], cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            for sha in extras
        ]
        ok = sum(p.wait(timeout=300) == 0 for p in procs)
        proc = gg(repo, "list", "s", "--json")
        have = {p.get("cherry_picked_from") for p in json.loads(proc.stdout)["s"]} if proc.returncode == 0 else set()
        lost += max(0, ok - len(have & set(extras)))
    return f"concurrency: {trials} trials of 2 concurrent imports, {lost} lost updates"


def worktrees(tmp: Path) -> str:
    repo, _ = fork(tmp / "wt")
    first = gg(repo, "apply", "s", "--onto", "base")
    if first.returncode not in (0, 1):
        return f"worktrees: could not run: apply failed: {first.stderr.strip()[:200]}"
    branch = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/gg/").splitlines()[0]
    git(repo, "worktree", "add", "-q", str(tmp / "wt-checkout"), branch)
    before = git(repo, "rev-parse", branch)
    (repo / "f.txt").write_text("moved\n" + (repo / "f.txt").read_text())
    git(repo, "switch", "-q", "-c", "newbase", "base")
    (repo / "g.txt").write_text("new base\n")
    git(repo, "add", "g.txt")
    git(repo, "commit", "-qm", "base moves")
    git(repo, "switch", "-q", "main")
    again = gg(repo, "apply", "s", "--onto", "newbase")
    moved = git(repo, "rev-parse", branch) != before
    said = again.stderr.strip().splitlines()[-1:] or [""]
    return f"worktrees: apply onto a moved base exited {again.returncode} ({said[0][:120]}); {int(moved)} branches moved under a worktree"


def sha256(tmp: Path) -> str:
    try:
        repo, picks = fork(tmp / "sha256", commits=2, object_format="sha256")
    except SystemExit as e:
        return f"sha256: refused at setup ({str(e)[-300:]})"
    git(repo, "switch", "-q", "-c", "upstream", "base")
    git(repo, "cherry-pick", picks[0])
    proc = gg(repo, "check", "--commits", "--onto", "upstream", "--json", *picks)
    if proc.returncode == 2:
        return f"sha256: clean refusal (exit 2): {proc.stderr.strip()[:160]}"
    if proc.returncode not in (0, 1):
        return f"sha256: exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
    verdicts = [o["verdict"] for o in json.loads(proc.stdout)["patches"]]
    right = verdicts == ["represented", "unique"]
    return f"sha256: verdicts {verdicts} ({'right' if right else 'WRONG'})"


SEARCH = (
    r"""
import os, sys
token = b"@TOKEN@"
hits = 0
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                hits += token in f.read()
        except OSError:
            pass
open(os.path.join(os.environ.get("PROBE_OUT", "."), "hits"), "w").write(str(hits))
"""
).replace("@TOKEN@", TOKEN)


def token(tmp: Path) -> str:
    repo, _ = fork(tmp / "token", commits=1)
    script = tmp / "search.py"
    script.write_text(SEARCH)
    out = tmp / "token-out"
    out.mkdir()
    toml = repo / "patches" / "s" / "stack.toml"
    text = re.sub(r"(?m)^paths = .*$", 'paths = ["t*.txt"]', toml.read_text())
    toml.write_text(re.sub(r"(?m)^cpu = .*$", f'cpu = "{sys.executable} {script}"', text))
    proc = gg(repo, "test", "s", "--onto", "base", env={"GITHUB_TOKEN": TOKEN, "PROBE_OUT": str(out)})
    hits = (out / "hits").read_text() if (out / "hits").exists() else None
    if hits is None:
        return (
            f"token: could not run: the test command did not run (exit {proc.returncode}: {proc.stderr.strip()[-160:]})"
        )
    printed = TOKEN in proc.stdout + proc.stderr
    return f"token: {hits} places in /proc where test code found it; printed: {int(printed)}"


def injection(tmp: Path) -> str:
    repo, _ = fork(tmp / "inject", commits=1)
    marker = tmp / "injected"
    values = {
        "target.remote": f"--upload-pack=touch {marker}; git-upload-pack",
        "--onto": f"--output={marker}",
    }
    toml = repo / "patches" / "s" / "stack.toml"
    text = toml.read_text()
    hits = 0
    toml.write_text(text.replace('remote = "origin"', f'remote = "{values["target.remote"]}"'))
    for args in (["pr", "s", "--dry-run"], ["sync", "s", "--fetch", "--dry-run"]):
        gg(repo, *args)
        hits += marker.exists()
        marker.unlink(missing_ok=True)
    toml.write_text(text)
    for args in (["apply", "s", "--onto", values["--onto"]], ["check", "s", "--onto", values["--onto"]]):
        gg(repo, *args)
        hits += marker.exists()
        marker.unlink(missing_ok=True)
    return f"injection: 4 argument positions tried, {hits} ran or wrote something"


CLASSES: dict[str, Callable[[Path], str]] = {
    "kills": kills,
    "concurrency": concurrency,
    "worktrees": worktrees,
    "sha256": sha256,
    "token": token,
    "injection": injection,
}


def _has(command: str) -> bool:
    proc = subprocess.run([sys.executable, "-m", "ggstack", command, "--help"], capture_output=True)
    return proc.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(CLASSES), help="comma-separated classes (default: all)")
    from probe_round_two import CLASSES as round_two  # here: that module imports this one's helpers

    CLASSES.update(round_two)
    parser.set_defaults(only=",".join(CLASSES))
    args = parser.parse_args()
    isolated = tempfile.mkdtemp(prefix="ggstack-probe-home-")
    os.environ.update(
        HOME=isolated,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.path.join(isolated, ".gitconfig"),
        GIT_AUTHOR_NAME="Probe",
        GIT_AUTHOR_EMAIL="probe@example.com",
        GIT_COMMITTER_NAME="Probe",
        GIT_COMMITTER_EMAIL="probe@example.com",
    )
    for key in ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_API_URL", "GITHUB_ACTIONS", "GGSTACK_PATCHES"):
        os.environ.pop(key, None)
    for name in args.only.split(","):
        with tempfile.TemporaryDirectory(prefix=f"ggstack-probe-{name}-") as tmp:
            print(CLASSES[name](Path(tmp)), flush=True)


if __name__ == "__main__":
    main()
