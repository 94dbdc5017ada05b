"""ggstack apply against git rebase itself, on generated histories.

Hypothesis builds a small history (files edited, added, deleted, renamed,
chmod-ed; the base moves too), a stack of commits on the old base is
imported into a series, and the series is replayed with ``replay.apply``.
The same commits are rebased with ``git rebase --onto <new> <old>``
(``--reapply-cherry-picks --empty=keep``, so every commit keeps its place
and one that became empty is still there to compare). Wherever git rebase
gets through a commit, ggstack's commit for that patch must have a
byte-identical tree (and the same author line); an ``empty`` outcome must be
a commit git left with its parent's tree; where git stops on a conflict,
ggstack records a conflict for that patch.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from gitrepo import GitRepo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ggstack import git, importing, replay
from ggstack.model import Applied
from ggstack.series import store

pytestmark = pytest.mark.slow  # end to end: the suite runs it, `pytest -m "not slow"` does not

# The later names let a rename move a whole directory (d/ -> f/) or add below one.
PATHS = ["a.txt", "b.txt", "d/c.txt", "d/e.txt", "f/g.txt", "h.txt", "f/c.txt", "f/e.txt", "d/s/k.txt"]
TOKENS = ["alpha", "beta", "gamma"]
Files = dict[str, tuple[str, bytes]]  # path -> (mode, content)

# One edit is drawn as small integers and read against the state it is applied
# to, so that every drawn edit means something and shrinks well.
op = st.tuples(st.integers(0, 5), st.integers(0, 7), st.integers(0, 7), st.integers(0, 2))
commit_ops = st.lists(op, min_size=1, max_size=3)


def _lines(path: str, n: int = 8) -> list[str]:
    return [f"{path} says line {i} of the original text" for i in range(n)]


def initial_files(seed: int) -> Files:
    files: Files = {}
    for i, path in enumerate(PATHS[: 4 + seed % 3]):
        files[path] = ("100755" if (seed >> i) & 1 and i > 2 else "100644", ("\n".join(_lines(path)) + "\n").encode())
    return files


def apply_op(files: Files, o: tuple[int, int, int, int]) -> None:
    kind, i, j, k = o
    present = sorted(files)
    absent = [p for p in PATHS if p not in files]
    if kind == 0 or not present:  # edit one line
        if not present:
            kind = 3
        else:
            path = present[i % len(present)]
            mode, data = files[path]
            lines = data.decode().split("\n")[:-1] or [""]
            lines[j % len(lines)] = f"{TOKENS[k]} edit {j} in {path}"
            files[path] = (mode, ("\n".join(lines) + "\n").encode())
            return
    if kind == 1 and len(present) > 1:  # delete
        del files[present[i % len(present)]]
    elif kind == 2 and absent:  # rename, sometimes with an edit
        src, dst = present[i % len(present)], absent[j % len(absent)]
        files[dst] = files.pop(src)
        if k:
            apply_op(files, (0, sorted(files).index(dst), j + 1, k))
    elif kind == 3 and absent:  # add
        path = absent[i % len(absent)]
        files[path] = ("100644", ("\n".join(f"new {path} {TOKENS[k]} {n}" for n in range(5 + j)) + "\n").encode())
    elif kind == 4:  # mode change
        path = present[i % len(present)]
        mode, data = files[path]
        files[path] = ("100644" if mode == "100755" else "100755", data)
    else:  # append a line
        path = present[i % len(present)]
        mode, data = files[path]
        files[path] = (mode, data + f"{TOKENS[k]} appended {j}\n".encode())


def fast_import(repo: Path, root: Files, branches: dict[str, list[Files]]) -> dict[str, list[str]]:
    """Write the history in one ``git fast-import``: a root commit, then each
    branch's commits on it. Returns each branch's commit ids, root first."""
    out: list[bytes] = []
    mark = 0
    tick = 0

    def commit(ref: str, msg: str, files: Files, parent: int | None) -> int:
        nonlocal mark, tick
        mark += 1
        tick += 1
        who = f"Hyp Author <hyp{tick % 3}@example.com> {1_700_000_000 + 60 * tick} +0{tick % 3}00"
        out.append(f"commit {ref}\nmark :{mark}\nauthor {who}\ncommitter {who}\ndata {len(msg)}\n{msg}\n".encode())
        if parent:
            out.append(f"from :{parent}\n".encode())
        out.append(b"deleteall\n")
        for path, (mode, data) in sorted(files.items()):
            out.append(f"M {mode} inline {_quoted(path)}\ndata {len(data)}\n".encode() + data + b"\n")
        return mark

    root_mark = commit("refs/heads/root", "root\n", root, None)
    marks: dict[str, list[int]] = {}
    for name, states in branches.items():
        parent = root_mark
        marks[name] = [root_mark]
        for n, files in enumerate(states):
            parent = commit(f"refs/heads/{name}", f"{name} commit {n + 1}\n\nbody of {name} {n + 1}\n", files, parent)
            marks[name].append(parent)
    out.append(b"done\n")
    subprocess.run(
        ["git", "-C", str(repo), "fast-import", "--quiet", "--done", f"--export-marks={repo}/.git/marks"],
        input=b"".join(out),
        check=True,
    )
    by_mark = dict(line.split() for line in (repo / ".git" / "marks").read_text().splitlines())
    return {name: [by_mark[f":{m}"] for m in ms] for name, ms in marks.items()}


def _quoted(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def histories(seed: int, base_ops: list[list], stack_ops: list[list]) -> tuple[Files, list[Files], list[Files]]:
    root = initial_files(seed)
    base, stack = [], []
    for ops, out in ((base_ops, base), (stack_ops, stack)):
        files = dict(root)
        for commit in ops:
            before = dict(files)
            for o in commit:
                apply_op(files, o)
            if files == before:  # an empty commit is not a patch: make it change something
                apply_op(files, (5, 0, len(out), 0))
            out.append(dict(files))
    return root, base, stack


def replay_and_rebase(tmp: Path, root: Files, base: list[Files], stack: list[Files]) -> None:
    g = GitRepo.init(tmp / "fork")
    ids = fast_import(g.path, root, {"base": base, "stack": stack})
    old, new, tip = ids["base"][0], ids["base"][-1], ids["stack"][-1]

    repo = git.Repository(str(g.path))
    patches = tmp / "patches"
    store.init(str(patches), "s", "o/r", "base")
    s = store.load(str(patches), "s")
    store.save(importing.commits(repo, s, [f"{old}..{tip}"]).stack)
    s = store.load(str(patches), "s")
    run = replay.apply(repo, s, new, write=False)

    g.git("checkout", "-q", "--detach", tip)
    rebase = subprocess.run(
        [
            "git",
            "-C",
            str(g.path),
            "-c",
            "core.hooksPath=/dev/null",
            "rebase",
            "-q",
            "--reapply-cherry-picks",
            "--empty=keep",
            "--onto",
            new,
            old,
        ],
        capture_output=True,
        text=True,
    )
    done = g.git("rev-list", "--reverse", f"{new}..HEAD").split()
    stopped = rebase.returncode != 0
    assert len(done) == (len(stack) if not stopped else len(done)), rebase.stderr
    assert len(run.outcomes) == len(stack)
    for n, (outcome, theirs) in enumerate(zip(run.outcomes, done), 1):
        where = f"patch {n} ({outcome.name}): {outcome.applied} {outcome.conflict.paths if outcome.conflict else ''}"
        parent_tree = g.tree(theirs + "^")
        if g.tree(theirs) == parent_tree:
            assert outcome.applied is Applied.EMPTY, f"git rebase left {where} empty"
            continue
        assert outcome.applied is Applied.APPLIED, f"git rebase applied {where}"
        assert g.tree(outcome.commit) == g.tree(theirs), f"tree differs from git rebase's at {where}"
        assert author_line(g, outcome.commit) == author_line(g, theirs), where
    if stopped:
        outcome = run.outcomes[len(done)]
        assert outcome.applied is Applied.CONFLICT, f"git rebase stopped on {outcome.name}, ggstack: {outcome.applied}"
        g.git("rebase", "--abort")


def author_line(g: GitRepo, commit: str) -> str:
    return next(line for line in g.git("cat-file", "commit", commit).splitlines() if line.startswith("author "))


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 63),
    base_ops=st.lists(commit_ops, min_size=0, max_size=3),
    stack_ops=st.lists(commit_ops, min_size=1, max_size=4),
)
def test_trees_equal_git_rebase(seed: int, base_ops: list[list], stack_ops: list[list]) -> None:
    root, base, stack = histories(seed, base_ops, stack_ops)
    with tempfile.TemporaryDirectory(prefix="ggstack-diff-") as d:
        replay_and_rebase(Path(d), root, base, stack)


# -- the cases where merge-ort has something to decide, each made on purpose ------------

ROOT: Files = {
    p: ("100644", ("\n".join(_lines(p)) + "\n").encode()) for p in ("a.txt", "d/c.txt", "d/e.txt", "g/x.txt")
}


def moved(files: Files, **renames: str) -> Files:
    out = dict(files)
    for src, dst in renames.items():
        out[dst.replace("__", "/")] = out.pop(src.replace("__", "/"))
    return out


def changed(files: Files, path: str, text: str | None = None, mode: str | None = None) -> Files:
    out = dict(files)
    if text is None and mode is None:
        del out[path]
        return out
    old_mode, data = out.get(path, ("100644", b""))
    out[path] = (mode or old_mode, (text.encode() if text is not None else data))
    return out


def cumulative(files: Files, *edits: tuple[str, str | None, str | None]) -> list[Files]:
    """One commit an edit (path, text, mode), each on the one before."""
    states = []
    for path, text, mode in edits:
        files = changed(files, path, text, mode)
        states.append(files)
    return states


D_TO_F = {"d__c.txt": "f__c.txt", "d__e.txt": "f__e.txt"}
CASES = {
    "base renames a directory, the stack adds to it": (
        [moved(ROOT, **D_TO_F)],
        [changed(ROOT, "d/new.txt", "new file\n")],
    ),
    "the stack renames a directory, the base adds to it": (
        [changed(ROOT, "d/new.txt", "new file\n")],
        [moved(ROOT, **D_TO_F)],
    ),
    "base renames a file the stack edits": (
        [moved(ROOT, **{"d__c.txt": "g__c.txt"})],
        [changed(ROOT, "d/c.txt", "\n".join(_lines("d/c.txt")[:-1] + ["edited"]) + "\n")],
    ),
    "the stack renames a file the base edits": (
        [changed(ROOT, "a.txt", "\n".join(["edited"] + _lines("a.txt")[1:]) + "\n")],
        [moved(ROOT, **{"a.txt": "g__a.txt"})],
    ),
    "base deletes a file the stack edits": ([changed(ROOT, "a.txt")], [changed(ROOT, "a.txt", "edited\n")]),
    "base deletes a directory the stack adds to": (
        [changed(changed(ROOT, "d/c.txt"), "d/e.txt")],
        [changed(ROOT, "d/s/new.txt", "x\n")],
    ),
    "the stack deletes the last files of a directory, then adds one back": (
        [changed(ROOT, "a.txt", "up\n")],
        [changed(ROOT, "g/x.txt"), changed(ROOT, "g/y.txt", "back\n")],
    ),
    "mode changes on both sides": (
        [changed(ROOT, "a.txt", mode="100755")],
        [changed(ROOT, "d/c.txt", mode="100755"), changed(changed(ROOT, "d/c.txt", mode="100755"), "a.txt", "x\n")],
    ),
    "a file becomes a directory": (
        [changed(ROOT, "a.txt", "up\n")],
        [changed(changed(ROOT, "g/x.txt"), "g/x.txt/inner.txt", "inner\n")],
    ),
    "a run of trivial picks: odd names, a link, an executable, a directory emptied": (
        [changed(ROOT, "a.txt", "up\n")],
        cumulative(
            ROOT,
            ('sp ace/q"uote.txt', "1\n", None),
            ('"lead\\back.txt', "2\n", None),
            ("new\nline", "3\n", None),
            ("link", "d/c.txt", "120000"),
            ("g/x.txt", None, "100755"),
            ("d/c.txt", None, None),
            ("d/e.txt", None, None),
        ),
    ),
    "both sides make the same change": (
        [changed(ROOT, "a.txt", "same\n")],
        [changed(ROOT, "a.txt", "same\n"), changed(changed(ROOT, "a.txt", "same\n"), "d/c.txt", "later\n")],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_merge_ort_decisions_equal_git_rebase(tmp_path: Path, case: str) -> None:
    base, stack = CASES[case]
    replay_and_rebase(tmp_path, ROOT, base, stack)
