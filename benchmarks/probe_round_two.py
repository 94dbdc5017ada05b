"""The classes ``reliability_probe.py`` gained in round two (issue 35), one function each.

Each builds what it needs, runs the real command as a subprocess the way a user (or a
stack file from a pull request) would, and returns one line: cases tried, failures.

- refs: ``branches.template`` naming tags, notes, remotes, the stash, HEAD, a user's branch
  (with and without ``--force``): a failure is any ref or stash entry of the user's changed,
  or an exit code other than 2;
- symlinks: a stack directory, or a file in one, that is a symlink to elsewhere, under every
  command that reads or changes a stack: a failure is a byte changed where it points, or an
  exit code other than 2;
- worktree-kills: ``refresh`` killed (its whole process group, git included) at 24 moments,
  and the leftovers a kill makes laid by hand (a lock, a half-made and a half-removed
  worktree): a failure is a next ``resolve``/``refresh`` that does not finish on its own;
- hostile-config: fsmonitor, an attribute-selected merge driver (one that keeps "ours"),
  a diff driver's textconv and command, an external diff, gpg signing: a failure is a
  program of the user's that ran, or a replay that lost the patch's change;
- sha256-loop: init, import, edit, move, squash, apply, resolve/refresh, check, drop,
  rebase, remove, import --from, sync, report on a sha256 repository: a failure is a
  command that did not do its job;
- bad-input: the probe's inputs that reached a traceback or exit 3 (a Run nested past the
  parser, a base that is a path, a newline in the repository's path, a forge answering
  malformed JSON): a failure is a traceback or an exit code other than 2 (for the forge:
  other than 3, or what the run finds where PyGithub reads the answer as text);
- fuzz: random damage to a patch file, ``stack.toml``, ``series`` and a saved Run, each
  read by the commands that read it: a failure is a traceback or an exit code outside 0-2;
- scrub: a test that finds the token and prints it plain, percent-encoded and base64-encoded
  (alone and as basic auth): a failure is a form found in ggstack's output, its caches or
  the Run JSON;
- memory: a 50 MB patch through import, list, apply, check, rebase and test: a failure is
  a command whose peak above start-up is more than 4 times the patch (7 for check, whose
  judgement holds the diff's lines).
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from reliability_probe import TOKEN, fork, gg, git  # noqa: E402


def _refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(objectname) %(refname)") + git(repo, "stash", "list")


def _set(toml: Path, key: str, value: str) -> None:
    toml.write_text(re.sub(rf"(?m)^{key} = .*$", f"{key} = {json.dumps(value)}", toml.read_text()))


def refs(tmp: Path) -> str:
    repo, _ = fork(tmp / "refs")
    git(repo, "tag", "v01", "base")
    git(repo, "update-ref", "refs/remotes/origin/base", "base")
    git(repo, "branch", "mine/01", "base")
    (repo / "f.txt").write_text("stashed\n")
    git(repo, "stash", "-q")
    toml = repo / "patches" / "s" / "stack.toml"
    templates = [
        "refs/tags/v{index:02d}",
        "refs/notes/commits",
        "refs/notes/{slug}",
        "refs/remotes/origin/{slug}",
        "refs/stash",
        "HEAD",
        "refs/heads/HEAD",
        "mine/{index:02d}",
        "refs/ggstack/s/last-apply",
    ]
    cases = failures = 0
    for template in templates:
        _set(toml, "template", template)
        for extra in ([], ["--force"]):
            before = _refs(repo)
            proc = gg(repo, "apply", "s", "--onto", "base", *extra)
            cases += 1
            failures += proc.returncode != 2 or _refs(repo) != before or "Traceback" in proc.stderr
    for prefix in ("refs/tags/x", "refs/remotes/origin", "refs/notes"):
        before = _refs(repo)
        proc = gg(repo, "apply", "s", "--onto", "base", "--branch-prefix", prefix)
        cases += 1
        failures += proc.returncode != 2 or _refs(repo) != before
    return f"refs: {cases} templates and prefixes tried (with and without --force), {failures} failures"


def _snapshot(where: Path) -> dict[str, bytes]:
    return {str(p.relative_to(where)): p.read_bytes() for p in sorted(where.rglob("*")) if p.is_file()}


def symlinks(tmp: Path) -> str:
    commands = [
        ["move", "s", "3", "--to", "1"],
        ["remove", "s", "2"],
        ["list", "s"],
        ["apply", "s", "--onto", "base"],
        ["check", "s", "--onto", "base"],
        ["rebase", "s", "--onto", "main"],
        ["drop", "s", "--represented"],
        ["edit", "s", "1"],
    ]
    cases = failures = 0
    for how in ("directory", "series", "stack.toml", "patch"):
        repo, _ = fork(tmp / f"sym-{how}")
        stack = repo / "patches" / "s"
        elsewhere = tmp / f"elsewhere-{how}"
        if how == "directory":
            shutil.move(str(stack), elsewhere)
            stack.symlink_to(elsewhere)
        else:
            elsewhere.mkdir()
            name = sorted(p.name for p in stack.glob("*.patch"))[0] if how == "patch" else how
            shutil.move(str(stack / name), elsewhere / name)
            (stack / name).symlink_to(elsewhere / name)
        before = _snapshot(elsewhere)
        for args in commands:
            proc = gg(repo, *args, env={"EDITOR": "sed -i 1s/fix/Fix/", "VISUAL": ""})
            cases += 1
            failures += proc.returncode != 2 or _snapshot(elsewhere) != before or "Traceback" in proc.stderr
    return f"symlinks: {cases} commands on symlinked stacks, {failures} failures"


def _lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(n))


def _diverged(repo: Path, base: dict[str, str], topic: list[tuple[str, str, str]], upstream: tuple[str, str]) -> None:
    """``repo`` from ``base``'s files; branch topic one commit per (file, text, subject), main one
    ``upstream`` (file, text) on; stack ``s`` imported from topic."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for name, text in base.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    old = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "-c", "topic")
    for name, text, subject in topic:
        (repo / name).write_text(text)
        git(repo, "commit", "-qam", subject)
    git(repo, "switch", "-q", "main")
    (repo / upstream[0]).write_text(upstream[1])
    git(repo, "commit", "-qam", "upstream")
    for args in (["init", "s", "--repo-slug", "o/r", "--base", "main"], ["import", "s", f"{old}..topic"]):
        if gg(repo, *args).returncode:
            raise SystemExit(f"setting up the probe failed: ggstack {' '.join(args)}")


def _conflicting(where: Path) -> Path:
    """A stack whose second patch conflicts with the base (line 10 changed on both sides)."""
    repo, text = where / "fork", _lines(20)
    _diverged(
        repo,
        {"f.txt": text, "a.txt": text},
        [("a.txt", text.replace("line 3", "a three"), "fix a"), ("f.txt", text.replace("line 10", "fork 10"), "fix f")],
        ("f.txt", text.replace("line 10", "upstream 10")),
    )
    return repo


def _resolve_and_refresh(repo: Path) -> bool:
    """The user's next try, with nothing cleaned by hand: resolve, edit, refresh."""
    proc = gg(repo, "resolve", "s", "2", "--json")
    if proc.returncode:
        return False
    wt = Path(json.loads(proc.stdout)["worktree"])
    (wt / "f.txt").write_text(_lines(20).replace("line 10", "both 10"))
    return gg(repo, "refresh", "s", "2").returncode == 0


def _admin(wt: Path) -> Path:
    return Path((wt / ".git").read_text().split("gitdir: ", 1)[1].strip())


def worktree_kills(tmp: Path) -> str:
    cases = failures = killed = 0
    leftovers = {
        "index.lock": lambda wt: (_admin(wt) / "index.lock").write_bytes(b""),
        "MERGE_RR.lock": lambda wt: (_admin(wt) / "MERGE_RR.lock").write_bytes(b""),
        "half-removed": lambda wt: (wt / ".git").unlink(),
        "half-made": lambda wt: [
            (_admin(wt) / "locked").write_text("initializing"),
            *(p.unlink() for p in (wt.parents[2] / "resolve" / "s").glob("*.json")),
        ],
    }
    for name, lay in leftovers.items():
        repo = _conflicting(tmp / f"left-{name}")
        proc = gg(repo, "resolve", "s", "2", "--json")
        lay(Path(json.loads(proc.stdout)["worktree"]))
        cases += 1
        failures += not _resolve_and_refresh(repo)
    for n, delay in enumerate(0.03 + 0.006 * k for k in range(24)):  # over a refresh (~0.15 s)
        repo = _conflicting(tmp / f"kill-{n}")
        proc = gg(repo, "resolve", "s", "2", "--json")
        wt = Path(json.loads(proc.stdout)["worktree"])
        (wt / "f.txt").write_text(_lines(20).replace("line 10", "both 10"))
        argv = [sys.executable, "-m", "ggstack", "--repo", str(repo), "--patches", str(repo / "patches"), "refresh"]
        child = subprocess.Popen(
            [*argv, "s", "2"], cwd=repo, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(delay)
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        killed += child.wait() == -signal.SIGKILL
        cases += 1
        failures += not _resolve_and_refresh(repo)  # whether or not the killed one got to save
    return (
        f"worktree-kills: {cases} kills and leftovers ({killed} refreshes killed mid-way, "
        f"{len(leftovers)} leftovers laid), {failures} that needed a hand"
    )


def _program(tmp: Path, name: str, log: Path) -> str:
    path = tmp / f"{name}.sh"
    path.write_text(f'#!/bin/sh\necho "{name}" >> {log}\n' + ("exit 1\n" if name == "fsmonitor" else ""))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def hostile_config(tmp: Path) -> str:
    repo, text = tmp / "fork", _lines(12)
    _diverged(
        repo,
        {"f.txt": text, ".gitattributes": "* diff=evil merge=evil\n"},
        [("f.txt", text.replace("line 3", "fork 3"), "fork change")],
        ("f.txt", text.replace("line 9", "upstream 9")),
    )
    log = tmp / "ran.log"
    for key, name in {
        "core.fsmonitor": "fsmonitor",
        "diff.external": "external",
        "diff.evil.textconv": "textconv",
        "diff.evil.command": "diffcmd",
        "merge.evil.driver": "merge",
        "gpg.program": "gpg",
    }.items():
        git(repo, "config", key, _program(tmp, name, log) + (" %O %A %B" if name == "merge" else ""))
    git(repo, "config", "commit.gpgSign", "true")
    env = {"GIT_EXTERNAL_DIFF": _program(tmp, "envdiff", log), "GITHUB_TOKEN": ""}
    commands = [
        ["apply", "s", "--json"],
        ["check", "s"],
        ["check", "--commits", "--onto", "main", "topic"],
        ["test", "s"],
        ["pr", "s", "--dry-run"],
        ["sync", "s", "--dry-run"],
        ["rebase", "s", "--onto", "main"],
        ["resolve", "s", "1"],
        ["refresh", "s", "1", "--abort"],
        ["drop", "s", "--represented", "--dry-run"],
    ]
    ran = lost = 0
    for args in commands:
        log.unlink(missing_ok=True)
        proc = gg(repo, *args, env=env)
        ran += log.exists()
        if args[0] == "apply":
            patch = json.loads(proc.stdout)["patches"][0]
            lost += patch["applied"] != "applied" or "fork 3" not in git(repo, "show", f"{patch['commit']}:f.txt")
    return (
        f"hostile-config: {len(commands)} commands under 7 user programs, {ran} ran one, {lost} replays lost the change"
    )


def sha256_loop(tmp: Path) -> str:
    repo = tmp / "fork"
    subprocess.run(["git", "init", "-q", "-b", "main", "--object-format=sha256", str(repo)], check=True)
    for n in "abcd":
        (repo / f"{n}.txt").write_text("".join(f"{n} {i}\n" for i in range(12)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "root")
    old = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "-c", "topic")
    for n in "abcd":
        (repo / f"{n}.txt").write_text("".join(f"{n} {i}\n" for i in range(12)).replace(f"{n} 5", f"{n} five"))
        git(repo, "commit", "-qam", f"fix {n}")
    git(repo, "switch", "-q", "main")
    (repo / "d.txt").write_text("".join(f"d {i}\n" for i in range(12)).replace("d 5", "d FIVE"))
    git(repo, "commit", "-qam", "upstream d")
    git(repo, "cherry-pick", "topic~3")
    exported = tmp / "exported"
    git(repo, "format-patch", "-q", "-o", str(exported), f"{old}..topic~2")
    steps: list[tuple[list[str], dict[str, str] | None, tuple[int, ...]]] = [
        (["init", "s", "--repo-slug", "o/r", "--base", "main"], None, (0,)),
        (["import", "s", f"{old}..topic"], None, (0,)),
        (["edit", "s", "1"], {"EDITOR": "true", "VISUAL": ""}, (0,)),
        (["edit", "s", "2"], {"EDITOR": "sed -i 1s/fix/Fix/", "VISUAL": ""}, (0,)),
        (["move", "s", "3", "--to", "2"], None, (0,)),
        (["squash", "s", "2", "3"], None, (0,)),
        (["apply", "s"], None, (1,)),
        (["resolve", "s", "3"], None, (0,)),
        (["refresh", "s", "3", "--abort"], None, (0,)),
        (["check", "s"], None, (0, 1)),
        (["drop", "s", "--represented"], None, (0,)),
        (["rebase", "s", "--onto", "main"], None, (0, 1)),
        (["remove", "s", "1"], None, (0,)),
        (["init", "t", "--repo-slug", "o/r", "--base", "main"], None, (0,)),
        (["import", "t", "--from", str(exported), "--onto", old], None, (0,)),
        (["sync", "s", "--dry-run", "--run-json", str(tmp / "run.json")], {"GITHUB_TOKEN": ""}, (0, 1)),
        (["report", str(tmp / "run.json")], None, (0,)),
    ]
    failed = []
    for args, env, ok in steps:
        proc = gg(repo, *args, env=env)
        if proc.returncode not in ok or "Traceback" in proc.stderr:
            failed.append(f"{args[0]} (exit {proc.returncode})")
    return f"sha256-loop: {len(steps)} commands, {len(failed)} failures" + (f": {', '.join(failed)}" if failed else "")


def bad_input(tmp: Path) -> str:
    cases = failures = 0
    deep = tmp / "deep.json"
    deep.write_text('{"stack": "s", "base_ref": "m", "base": "x", "patches": ' + "[" * 100_000 + "]" * 100_000 + "}")
    repo, _ = fork(tmp / "bad")
    for args, want in (
        (["report", str(deep)], 2),
        (["test", "s", "--merge", str(deep)], 2),
        (["apply", "s", "--onto", "base:../../x"], 2),
        (["check", "s", "--onto", "main:f.txt"], 2),
    ):
        proc = gg(repo, *args)
        cases += 1
        failures += proc.returncode != want or "Traceback" in proc.stderr
    toml = repo / "patches" / "s" / "stack.toml"
    for base in ("base:../../x", "ma in", "main\tx"):
        _set(toml, "base", base)
        for command in ("apply", "check", "list"):
            proc = gg(repo, command, "s")
            cases += 1
            failures += proc.returncode != 2 or "Traceback" in proc.stderr
    nl = tmp / "new\nline"
    nl.mkdir()
    try:
        repo2, picks = fork(nl)
        for args in (["apply", "s", "--onto", "base"], ["check", "s", "--onto", "base"], ["import", "s", picks[0]]):
            proc = gg(repo2, *args)
            cases += 1
            failures += proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr or "hash-object" in proc.stderr
    except SystemExit:
        cases += 1
        failures += 1
    forge_cases, forge_failures = _forge_answers(tmp)
    return f"bad-input: {cases + forge_cases} cases, {failures + forge_failures} failures"


def _forge_answers(tmp: Path) -> tuple[int, int]:
    """A forge answering malformed JSON (the local GitHub-compatible server of the tests)."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from forge_server import FakeGitHub

    repo, _ = fork(tmp / "forge", commits=2)
    upstream = tmp / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", str(upstream)], check=True)
    git(repo, "remote", "add", "origin", str(upstream))
    git(repo, "push", "-q", "origin", "base:main", "base:base")
    _set(repo / "patches" / "s" / "stack.toml", "base", "base")
    cases = failures = 0
    answers = [b"{not json", b"<html>502</html>", b'"a string"', b"[1, 2]", b"[" * 100_000, b""]
    with FakeGitHub(TOKEN) as forge:
        forge.add_repo("owner/repo", str(upstream))
        env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": forge.url, "GGSTACK_RETRY_BASE_SECONDS": "0.01"}
        for path in (r"/repos/[^/]+/[^/]+$", r"/pulls$"):
            for body in answers:
                forge.clear_faults()
                forge.inject("GET", path, status=200, raw=body, times=10)
                proc = gg(repo, "pr", "s", env=env)
                cases += 1
                # Exit 3, or (where PyGithub takes the answer as text, as it does a non-JSON one
                # that is no object) what the run then finds: never a traceback, never the token.
                failures += proc.returncode not in (0, 2, 3) or "Traceback" in proc.stderr or TOKEN in proc.stderr
    return cases, failures


def _damaged(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(max(1, len(lines)))
        how = rng.choice(["delete", "double", "replace", "insert", "cut", "abyss"])
        odd = rng.choice(["", "-", "+", " ", "@@ -1 +1 @@", "diff --git a/x b/x", "From ", "\0", "é", "[[[", "x = 1"])
        if how == "delete" and lines:
            del lines[i]
        elif how == "double" and lines:
            lines.insert(i, lines[i])
        elif how == "replace" and lines:
            lines[i] = odd
        elif how == "insert":
            lines.insert(i, odd)
        elif how == "cut" and lines and lines[i]:
            lines[i] = lines[i][: rng.randrange(len(lines[i]))]
        elif how == "abyss" and lines:
            lines[i] = "[" * 50_000 + lines[i]
    return "\n".join(lines)


def fuzz(tmp: Path, cases_per_file: int = 30) -> str:
    repo, _ = fork(tmp / "fuzz", commits=3)
    stack = repo / "patches" / "s"
    saved = tmp / "saved"
    shutil.copytree(stack, saved)
    run = gg(repo, "check", "s", "--onto", "base", "--json").stdout
    rng = random.Random(35)
    cases = failures = 0
    targets = [sorted(p.name for p in saved.glob("*.patch"))[1], "stack.toml", "series", "run.json"]
    for target in targets:
        for _ in range(cases_per_file):
            shutil.rmtree(stack)
            shutil.copytree(saved, stack)
            original = run if target == "run.json" else (saved / target).read_text()
            damaged = _damaged(original, rng)
            if target == "run.json":
                (tmp / "run.json").write_text(damaged)
                commands = [["report", str(tmp / "run.json")]]
            else:
                (stack / target).write_text(damaged)
                commands = [["list", "s"], ["apply", "s", "--onto", "base"]]
            for args in commands:
                proc = gg(repo, *args)
                cases += 1
                failures += proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr
    return f"fuzz: {cases} runs on damaged patch files, stack.toml, series and Runs, {failures} failures"


def scrub(tmp: Path) -> str:
    secret = tmp / "token"
    secret.write_text(TOKEN)
    repo = tmp / "fork"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "branch", "base")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_a.py").write_text(
        "import base64, urllib.parse\n"
        "def test_leak():\n"
        f"    t = open({str(secret)!r}).read()\n"
        "    print(t, urllib.parse.quote(t, safe=''), base64.b64encode(t.encode()).decode())\n"
        "    print(base64.b64encode(('x-access-token:' + t).encode()).decode())\n"
        "    assert False, t\n"
    )
    (repo / "a.txt").write_text("b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "fix with a test")
    gg(repo, "init", "s", "--repo-slug", "o/r", "--base", "base")
    gg(repo, "import", "s", "base..main")
    toml = repo / "patches" / "s" / "stack.toml"
    _set(toml, "cpu", f"{sys.executable} -m pytest -q -p no:cacheprovider {{tests}}")
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": "http://127.0.0.1:9", "GGSTACK_RETRY_ATTEMPTS": "1"}
    outputs = [
        gg(repo, "test", "s", "--json", env=env),
        gg(repo, "sync", "s", "--run-json", str(tmp / "r.json"), env=env),
    ]
    texts = [p.stdout + p.stderr for p in outputs] + [(tmp / "r.json").read_text(errors="replace")]
    texts += [p.read_text(errors="replace") for p in (repo / ".git" / "ggstack").rglob("*") if p.is_file()]
    forms = {
        "plain": TOKEN,
        "percent": urllib.parse.quote(TOKEN, safe=""),
        "base64": base64.b64encode(TOKEN.encode()).decode(),
        "basic auth": base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode(),
    }
    found = sorted({name for name, form in forms.items() for text in texts if form in text})
    kept = any("***" in t for t in texts)
    return f"scrub: {len(forms)} forms in {len(texts)} outputs and files, {len(found)} found{': ' + ', '.join(found) if found else ''} (output kept and scrubbed: {kept})"


def memory(tmp: Path) -> str:
    from patch_memory import measure

    figures = measure(50.0)
    limit = {"check s": 7.0}
    worst = [r for r in figures["commands"] if r["above_start_per_patch"] > limit.get(r["command"], 4.0)]
    shown = ", ".join(f"{r['command'].split()[0]} {r['above_start_per_patch']}x" for r in figures["commands"])
    return f"memory: a {figures['patch_mib']} MiB patch through {len(figures['commands'])} commands ({shown}), {len(worst)} failures"


CLASSES = {
    "refs": refs,
    "symlinks": symlinks,
    "worktree-kills": worktree_kills,
    "hostile-config": hostile_config,
    "sha256-loop": sha256_loop,
    "bad-input": bad_input,
    "fuzz": fuzz,
    "scrub": scrub,
    "memory": memory,
}
