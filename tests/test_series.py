"""The stored series: import with provenance, the on-disk format, list/show/move/remove.

Every check is one a user (or git, or quilt) would make: the stored files
are fed to ``git am -3`` and ``quilt push -a`` and the resulting trees are
compared with the original commits; trailers are read back with
``git interpret-trailers``; ggstack runs as a subprocess and is judged by its
exit code, its messages and what it left on disk.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import git, importing
from ggstack.diff import paths as diff_paths
from ggstack.series import mailheaders, store

SLUG = "owner/repo"


class World:
    """A fork checkout, a patches directory with one empty stack ``s``, and ggstack pointed at both."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.fork = GitRepo.init(tmp / "fork")
        self.patches = tmp / "patches"
        self.stack = self.patches / "s"
        self.base = self.fork.commit(
            "base", {"f.txt": "a\nb\nc\n", "vllm/keep.py": "k = 1\n", "cmake/pin.cmake": "v1\n", "mla.py": "m = 1\n"}
        )

    def gg(self, *args: str, repo: Path | str | None = None) -> subprocess.CompletedProcess[str]:
        return run_ggstack("--repo", str(repo or self.fork.path), "--patches", str(self.patches), *args, cwd=self.tmp)

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = self.gg(*args)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        return proc

    def init(self) -> None:
        # In-process: `ggstack init` itself is checked once, below; a subprocess a test adds up.
        store.init(str(self.patches), "s", SLUG, "main")

    def import_(self, *revs: str) -> None:
        stack = store.load(str(self.patches), "s")
        store.save(importing.commits(git.Repository(str(self.fork.path)), stack, revs).stack)

    def files(self) -> list[Path]:
        """The stored patch files, in series order."""
        return [self.stack / name for name in series_names(self.stack)]

    def am(self, onto: str, files: list[Path] | None = None, *, keep_cr: bool = False) -> GitRepo:
        """A fresh worktree at ``onto`` with ``git am -3`` of the stored files applied."""
        wt = self.tmp / f"am-{len(list(self.tmp.glob('am-*')))}"
        self.fork.git("worktree", "add", "-q", "--detach", str(wt), onto)
        checkout = GitRepo(wt)
        args = ["am", "-3", *(["--keep-cr"] if keep_cr else []), *map(str, files or self.files())]
        checkout.git(*args)
        return checkout


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = World(tmp_path)
    w.init()
    return w


def series_names(stack: Path) -> list[str]:
    lines = (stack / "series").read_text().splitlines()
    return [line.split()[0] for line in lines if line.strip() and not line.startswith("#")]


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def message_of(checkout: GitRepo, rev: str = "HEAD") -> str:
    return checkout.git("log", "-1", "--format=%B", rev)


def trailers_of(message: str) -> list[tuple[str, str]]:
    """What git itself reads as the trailers of a message."""
    proc = subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=message.encode(), capture_output=True, check=True
    )
    return [tuple(part.strip() for part in line.split(":", 1)) for line in proc.stdout.decode().splitlines()]


def listed(world: World) -> list[dict]:
    return json.loads(world.ok("list", "s", "--json").stdout)["s"]


def roundtrips(stack: Path, patches: Path) -> None:
    before = snapshot(stack)
    store.save(store.load(str(patches), stack.name))
    assert snapshot(stack) == before


# -- import -------------------------------------------------------------------------


def test_import_one_commit_am_gives_the_same_tree(world: World) -> None:
    sha = world.fork.commit(
        "Fix the DCP buffer (#130)\n\nPreallocate it once.", {"f.txt": "a\nB\nc\n", "new.txt": "n\n"}
    )

    proc = world.ok("import", "s", sha)

    assert "0001-Fix-the-DCP-buffer-130.patch" in proc.stdout
    assert series_names(world.stack) == ["0001-Fix-the-DCP-buffer-130.patch"]
    raw = world.files()[0].read_text()
    assert raw.startswith(f"From {sha} ")
    assert "Subject: [PATCH 1/1] Fix the DCP buffer (#130)" in raw
    assert re.search(r"^index [0-9a-f]{40}\.\.[0-9a-f]{40}", raw, re.M), "--full-index, so git am -3 can merge"
    checkout = world.am(world.base)
    assert checkout.tree("HEAD") == world.fork.tree(sha)
    trailers = trailers_of(message_of(checkout))
    assert ("Original-PR", "#130") in trailers  # whose #130: the stack has no target.fork to say
    assert "Cherry-picked-from" not in dict(trailers)  # the fork's own commit: the From line names it
    assert [k for k, _ in trailers].count("Stack-Patch-Id") == 1
    assert message_of(checkout).startswith("Fix the DCP buffer (#130)\n\nPreallocate it once.\n")
    assert checkout.git("log", "-1", "--format=%an <%ae>") == "Test Author <author@example.com>"


def test_import_a_range_in_order(world: World) -> None:
    shas = [
        world.fork.commit("first", {"f.txt": "a\nb1\nc\n"}),
        world.fork.commit("second", {"g.txt": "g\n"}),
        world.fork.commit("third", {"f.txt": "a\nb1\nc3\n"}),
    ]

    world.ok("import", "s", f"{world.base[:10]}..{shas[-1][:10]}")

    files = world.files()
    assert [f.name for f in files] == ["0001-first.patch", "0002-second.patch", "0003-third.patch"]
    for n, (f, sha) in enumerate(zip(files, shas), 1):
        text = f.read_text()
        assert f"Subject: [PATCH {n}/3] " in text
        assert text.startswith(f"From {sha} ") and "Cherry-picked-from" not in text
    checkout = world.am(world.base)
    assert checkout.tree("HEAD") == world.fork.tree(shas[-1])
    for n, sha in enumerate(reversed(shas)):
        assert checkout.tree(f"HEAD~{n}") == world.fork.tree(sha)
    assert [p["source_commit"] for p in listed(world)] == shas


def test_import_appends_and_renumbers_the_existing_patches(world: World) -> None:
    a = world.fork.commit("one", {"f.txt": "1\n"})
    b = world.fork.commit("two", {"f.txt": "2\n"})
    world.ok("import", "s", a)
    world.ok("import", "s", b)

    files = world.files()
    assert [f.name for f in files] == ["0001-one.patch", "0002-two.patch"]
    assert "Subject: [PATCH 1/2] one" in files[0].read_text()
    assert "Subject: [PATCH 2/2] two" in files[1].read_text()
    assert world.am(world.base).tree("HEAD") == world.fork.tree(b)


def test_original_pr_from_a_github_merge_commit(world: World) -> None:
    fork = world.fork
    fork.git("checkout", "-q", "-b", "feature")
    fork.commit("Add the feature", {"feature.py": "x = 1\n"})
    fork.git("checkout", "-q", "main")
    fork.git(
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "Merge pull request #42 from someone/feature\n\nAdd the feature, properly",
        "feature",
    )
    merge = fork.sha("HEAD")

    world.ok("import", "s", merge)

    (p,) = listed(world)
    assert p["subject"] == "Add the feature, properly"
    assert p["original_pr"] == f"{SLUG}#42"
    assert p["source_commit"] == merge
    checkout = world.am(world.base)
    assert checkout.tree("HEAD") == fork.tree(merge)
    assert ("Original-PR", f"{SLUG}#42") in trailers_of(message_of(checkout))


def test_a_subjects_pr_number_is_upstreams_only_where_the_stack_knows_upstream(world: World) -> None:
    """The probe: an upstream pick's "(#1234)" was recorded, and linked, as the fork's PR #1234."""
    world.fork.commit("Fix the parser upstream (#1234)", {"f.txt": "x\n"})
    world.ok("import", "s", "HEAD")
    assert listed(world)[0]["original_pr"] == "#1234"
    world.fork.git("branch", "up", world.base)
    body = world.ok("pr", "s", "--onto", "up", "--dry-run").stdout
    assert "- Original PR: PR number `#1234` (its repository is not recorded)" in body and f"{SLUG}#" not in body
    # Nor does the subject link it to the PR of that number where the PR is opened: a code span, no link.
    assert "1. **this PR**: Fix the parser upstream (`#1234`)" in body and "(#1234)" not in body.split("PR body")[1]
    run = world.tmp / "run.json"
    run.write_text(world.gg("check", "s", "--onto", "up", "--json").stdout)
    markdown = world.ok("report", str(run), "--format", "markdown").stdout
    assert "Fix the parser upstream (`#1234`)" in markdown and "(#1234)" not in markdown
    # With target.fork (init --fork), target.repo is upstream (where the fork's PRs go): the number is its PR.
    world.ok("init", "u", "--repo-slug", SLUG, "--fork", "me/mine", "--base", "main")
    assert 'fork = "me/mine"' in (world.patches / "u" / "stack.toml").read_text()
    world.fork.commit("Fix the lexer upstream (#77)", {"g.txt": "y\n"})
    world.ok("import", "u", "HEAD")
    (p,) = json.loads(world.ok("list", "u", "--json").stdout)["u"]
    assert p["original_pr"] == f"{SLUG}#77"


def test_original_pr_option_wins_over_the_subject(world: World) -> None:
    sha = world.fork.commit("Something (#7)", {"f.txt": "x\n"})
    world.ok("import", "s", sha, "--original-pr", "up/stream#130")
    assert listed(world)[0]["original_pr"] == "up/stream#130"


def test_original_pr_may_be_a_bare_number_as_in_the_patch_file(world: World) -> None:
    # "#N" (repository not known) is what `edit` accepts in the trailer and what import keeps from a
    # subject's "(#N)"; the option takes the same values.
    sha = world.fork.commit("Something", {"f.txt": "x\n"})
    world.ok("import", "s", sha, "--original-pr", "#130")
    assert listed(world)[0]["original_pr"] == "#130"


def test_no_original_pr_when_the_subject_does_not_say(world: World) -> None:
    sha = world.fork.commit("Plain subject", {"f.txt": "x\n"})
    world.ok("import", "s", sha)
    (p,) = listed(world)
    assert p["original_pr"] is None
    assert "Original-PR" not in world.files()[0].read_text()


def test_gits_own_cherry_picked_line_is_read(world: World) -> None:
    upstream = "ab" * 20
    here = world.fork.commit(f"Backport the fix\n\n(cherry picked from commit {upstream})", {"f.txt": "x\n"})
    world.ok("import", "s", "HEAD")
    path = world.files()[0]
    # The probe (picks from pydantic's v2.12-fixes with -x): the origin is the commit git's line names,
    # not its copy on the fork branch, which the mbox From line names.
    (p,) = listed(world)
    assert (p["cherry_picked_from"], p["source_commit"]) == (upstream, here)
    assert f"Cherry-picked-from: {upstream}" in path.read_text()
    # A patch written by hand (or by an older tool) with only git's line.
    text = path.read_text()
    text = re.sub(r"^Cherry-picked-from: .*\n", "", text, flags=re.M)
    path.write_text(text)

    (p,) = listed(world)
    assert p["cherry_picked_from"] == upstream


def test_stack_patch_id_is_stable(world: World, tmp_path: Path) -> None:
    sha = world.fork.commit("Fix (#1)", {"f.txt": "x\n"})
    other = world.fork.commit("Other", {"g.txt": "y\n"})
    world.ok("import", "s", sha)
    first = listed(world)[0]["stack_patch_id"]
    assert re.fullmatch(r"I[0-9a-f]{40}", first)

    # Re-importing the same history elsewhere regenerates the same bytes.
    again = tmp_path / "again"
    world.ok("--patches", str(again), "init", "s", "--repo-slug", SLUG, "--base", "main")
    world.ok("--patches", str(again), "import", "s", sha)
    assert snapshot(again / "s") == snapshot(world.stack)

    # Moving does not change it; importing the same commit twice is refused.
    world.ok("import", "s", other)
    world.ok("move", "s", "2", "--to", "1")
    assert [p["stack_patch_id"] for p in listed(world)][1] == first
    before = snapshot(world.stack)
    proc = world.gg("import", "s", sha)
    assert proc.returncode == 2
    assert "already in the stack" in proc.stderr
    assert snapshot(world.stack) == before


def test_a_commit_that_carries_a_stack_patch_id_keeps_it(world: World) -> None:
    world.fork.commit("Replayed\n\nStack-Patch-Id: I" + "deadbeef" * 5, {"f.txt": "x\n"})
    world.ok("import", "s", "HEAD")
    assert listed(world)[0]["stack_patch_id"] == "I" + "deadbeef" * 5
    assert world.files()[0].read_text().count("Stack-Patch-Id:") == 1


@pytest.mark.parametrize(
    "trailers,expected",
    [
        ("Stack-Patch-Id: I" + "1" * 40 + "\nStack-Patch-Id: I" + "2" * 40, "2 Stack-Patch-Id: trailers"),
        ("Stack-Patch-Id: $(touch /tmp/x)", "Stack-Patch-Id '$(touch /tmp/x)' is not 'I' and 40"),
    ],
)
def test_a_commit_whose_stack_patch_id_is_not_one_valid_id_is_refused(
    world: World, trailers: str, expected: str
) -> None:
    sha = world.fork.commit("Replayed\n\n" + trailers, {"f.txt": "x\n"})
    before = snapshot(world.patches)
    proc = world.gg("import", "s", "HEAD")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"commit {sha[:12]}: " in proc.stderr and expected in proc.stderr
    assert snapshot(world.patches) == before


def test_the_second_stack_patch_id_is_named_by_its_line(one_patch: World) -> None:
    _second_id(one_patch)
    lines = _first_patch(one_patch).read_text().split("\n")
    second = [n for n, line in enumerate(lines, 1) if line.startswith("Stack-Patch-Id:")][1]
    proc = one_patch.gg("list", "s")
    assert proc.returncode == 2 and f"0001-fix.patch:{second}: 2 Stack-Patch-Id: trailers" in proc.stderr


def test_the_users_git_config_does_not_change_the_stored_bytes(world: World, tmp_path: Path) -> None:
    sha = world.fork.commit(
        "Ünïcode fix (#9)\n\nBody.",
        {
            "f.txt": "a\n\nb\nc\nd\ne\nf\ng\nh\n",
            "z.txt": "z\n",
            "vllm/keep.py": None,
            "vllm/moved.py": "k = 1\n",
            "čeština.txt": "č\n",
        },
        author="John Q. Public <jqp@example.com>",
    )
    world.fork.git("notes", "add", "-m", "a note", sha)
    world.ok("import", "s", sha)
    clean = snapshot(world.stack)

    order = tmp_path / "order"
    order.write_text("z.txt\n")
    config = tmp_path / "noisy.gitconfig"
    config.write_text(f"""
[format]
    subjectPrefix = RFC
    suffix = .diff
    coverLetter = true
    thread = shallow
    notes = true
    to = someone@example.com
    cc = other@example.com
    headers = "X-Noise: 1\\n"
    forceInBodyFrom = true
    signature = my signature
    numbered = false
    signOff = true
    filenameMaxLength = 10
    from = true
    encodeEmailHeaders = false
[diff]
    context = 10
    interHunkContext = 10
    algorithm = patience
    orderFile = {order}
    suppressBlankEmpty = true
    noprefix = true
    mnemonicPrefix = true
    renames = false
    statGraphWidth = 5
[i18n]
    logOutputEncoding = ISO-8859-1
[core]
    quotePath = true
""")
    again = tmp_path / "again"
    store.init(str(again), "s", SLUG, "main")
    proc = run_ggstack(
        "--repo",
        str(world.fork.path),
        "--patches",
        str(again),
        "import",
        "s",
        sha,
        cwd=tmp_path,
        env={"GIT_CONFIG_GLOBAL": str(config)},
    )
    assert proc.returncode == 0, proc.stderr
    assert snapshot(again / "s") == clean


# -- partial import -----------------------------------------------------------------


def _mixed_commit(world: World) -> str:
    return world.fork.commit(
        "DCP fix with unrelated bits (#130)",
        {"vllm/keep.py": "k = 2\n", "vllm/new.py": "n = 1\n", "cmake/pin.cmake": "v2\n", "mla.py": "m = 2\n"},
    )


def test_exclude_leaves_paths_out_and_records_each(world: World) -> None:
    sha = _mixed_commit(world)

    world.ok("import", "s", sha, "--exclude", "cmake/pin.cmake", "--exclude", "mla.py")

    (p,) = listed(world)
    assert p["paths"] == ["vllm/keep.py", "vllm/new.py"]
    assert len(p["dropped"]) == 2
    assert any("cmake/pin.cmake" in d for d in p["dropped"])
    assert any("mla.py" in d for d in p["dropped"])
    text = world.files()[0].read_text()
    assert "pin.cmake" not in text.split("\n---\n", 1)[1]
    checkout = world.am(world.base)
    assert checkout.git("diff", "--name-only", world.base, "HEAD").split() == ["vllm/keep.py", "vllm/new.py"]
    dropped = [v for k, v in trailers_of(message_of(checkout)) if k == "Dropped"]
    assert len(dropped) == 2


def test_dropped_text_describes_the_left_out_parts(world: World) -> None:
    sha = _mixed_commit(world)

    world.ok(
        "import",
        "s",
        sha,
        "--only",
        "vllm/",
        "--dropped",
        "CUTLASS version pin (cmake/pin.cmake)",
        "--dropped",
        "MLA .contiguous() workaround",
    )

    (p,) = listed(world)
    assert p["paths"] == ["vllm/keep.py", "vllm/new.py"]
    assert p["dropped"] == ["CUTLASS version pin (cmake/pin.cmake)", "MLA .contiguous() workaround (mla.py)"]


def test_dropped_text_may_name_a_directory(world: World) -> None:
    sha = _mixed_commit(world)
    world.ok("import", "s", sha, "--only", "vllm/", "--dropped", "build pins (cmake/)")
    assert listed(world)[0]["dropped"] == ["build pins (cmake/)", "left out at import (mla.py)"]


def test_only_with_a_glob(world: World) -> None:
    sha = _mixed_commit(world)
    world.ok("import", "s", sha, "--only", "*.py", "--exclude", "mla.py")
    (p,) = listed(world)
    assert p["paths"] == ["vllm/keep.py", "vllm/new.py"]
    assert len(p["dropped"]) == 2


@pytest.mark.parametrize(
    "flags", [["--exclude", "vllm", "--exclude", "cmake", "--exclude", "mla.py"], ["--only", "nowhere/"]]
)
def test_an_import_leaving_an_empty_patch_is_refused(world: World, flags: list[str]) -> None:
    sha = _mixed_commit(world)
    before = snapshot(world.stack)
    proc = world.gg("import", "s", sha, *flags)
    assert proc.returncode == 2, proc.stderr
    assert "empty patch" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert snapshot(world.stack) == before


def test_an_empty_commit_is_refused(world: World) -> None:
    world.fork.commit("nothing")
    before = snapshot(world.stack)
    proc = world.gg("import", "s", "HEAD")
    assert proc.returncode == 2
    assert "change nothing (an empty commit)" in proc.stderr
    assert snapshot(world.stack) == before


# -- the stored format round-trips ----------------------------------------------------------


def test_load_save_changes_no_byte(world: World) -> None:
    world.fork.commit("one (#1)", {"f.txt": "1\n"})
    world.fork.commit("two", {"g.txt": "2\n"})
    _mixed_commit(world)
    world.ok("import", "s", f"{world.base}..HEAD~1")
    world.ok("import", "s", "HEAD", "--exclude", "mla.py")
    # A hand-edited series (comments, -p1) is kept as it is when the order did not change.
    names = series_names(world.stack)
    (world.stack / "series").write_text(f"# my comment\n{names[0]} -p1\n\n# later\n{names[1]}\n{names[2]}  # why\n")

    roundtrips(world.stack, world.patches)


def test_series_options_follow_their_patch_through_move_remove_and_import(world: World) -> None:
    """The probe: a quilt user's `-p1` after a patch name was dropped at the next rewrite of the series."""
    for s in ("alpha", "beta", "gamma"):
        world.fork.commit(s, {f"{s}.txt": s})
    world.ok("import", "s", f"{world.base}..HEAD")
    a, b, c = series_names(world.stack)
    (world.stack / "series").write_text(
        f"# mine\n\n{a} -p1\n\n# upstreamable\n{b}\n{c}  -p1 # keep for quilt\n# end of series\n"
    )

    world.ok("move", "s", "3", "--to", "1")
    assert (world.stack / "series").read_text().splitlines() == [
        "# mine",
        "",
        "0001-gamma.patch -p1 # keep for quilt",
        "0002-alpha.patch -p1",
        "",
        "# upstreamable",  # the comment above beta stays above beta
        "0003-beta.patch",
        "# end of series",
    ]
    world.ok("remove", "s", "3")
    world.fork.commit("delta", {"delta.txt": "d"})
    world.ok("import", "s", "HEAD")
    lines = (world.stack / "series").read_text().splitlines()
    assert lines == [
        "# mine",
        "",
        "0001-gamma.patch -p1 # keep for quilt",
        "0002-alpha.patch -p1",
        "0003-delta.patch",
        "# end of series",
    ]
    roundtrips(world.stack, world.patches)


def test_move_renumbers_files_subjects_and_series(world: World) -> None:
    shas = [world.fork.commit(s, {f"{s}.txt": s}) for s in ("alpha", "beta", "gamma")]
    world.ok("import", "s", f"{world.base}..HEAD")
    ids = [p["stack_patch_id"] for p in listed(world)]

    proc = world.ok("move", "s", "3", "--to", "1")

    assert proc.stdout.split() == ["0001-gamma.patch", "0002-alpha.patch", "0003-beta.patch"]
    _assert_consistent(world.stack, ["gamma", "alpha", "beta"])
    assert [p["stack_patch_id"] for p in listed(world)] == [ids[2], ids[0], ids[1]]
    # Independent patches still apply in the new order.
    checkout = world.am(world.base)
    assert checkout.tree("HEAD") == world.fork.tree(shas[-1])
    roundtrips(world.stack, world.patches)


def test_move_patches_with_the_same_slug(world: World) -> None:
    a = world.fork.commit("fix", {"a.txt": "a"})
    b = world.fork.commit("fix", {"b.txt": "b"})
    world.ok("import", "s", f"{world.base}..HEAD")
    world.ok("move", "s", "2", "--to", "1")
    _assert_consistent(world.stack, ["fix", "fix"])
    assert [p["source_commit"] for p in listed(world)] == [b, a]


def test_move_by_name_and_to_the_end(world: World) -> None:
    for s in ("alpha", "beta", "gamma"):
        world.fork.commit(s, {f"{s}.txt": s})
    world.ok("import", "s", f"{world.base}..HEAD")
    world.ok("move", "s", "0001-alpha.patch", "--to", "3")
    _assert_consistent(world.stack, ["beta", "gamma", "alpha"])
    world.ok("move", "s", "0003-alpha", "--to", "3")
    _assert_consistent(world.stack, ["beta", "gamma", "alpha"])


def test_remove_renumbers_the_rest(world: World) -> None:
    for s in ("alpha", "beta", "gamma"):
        world.fork.commit(s, {f"{s}.txt": s})
    world.ok("import", "s", f"{world.base}..HEAD")

    proc = world.ok("remove", "s", "2")

    assert "0002-beta.patch" in proc.stdout
    _assert_consistent(world.stack, ["alpha", "gamma"])
    world.ok("remove", "s", "0002-gamma.patch")
    world.ok("remove", "s", "1")
    _assert_consistent(world.stack, [])
    assert listed(world) == []


@pytest.mark.parametrize(
    "args",
    [
        ["move", "s", "9", "--to", "1"],
        ["move", "s", "1", "--to", "5"],
        ["move", "s", "1", "--to", "0"],
        ["remove", "s", "nope"],
        ["show", "s", "4"],
    ],
)
def test_move_remove_show_of_a_missing_patch(world: World, args: list[str]) -> None:
    world.fork.commit("alpha", {"a.txt": "a"})
    world.import_("HEAD")
    before = snapshot(world.stack)
    proc = world.gg(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert snapshot(world.stack) == before


def _assert_consistent(stack: Path, slugs: list[str]) -> None:
    names = [f"{i:04d}-{slug}.patch" for i, slug in enumerate(slugs, 1)]
    assert series_names(stack) == names
    assert sorted(p.name for p in stack.glob("*.patch")) == sorted(names)
    for i, name in enumerate(names, 1):
        assert f"Subject: [PATCH {i}/{len(names)}] {slugs[i - 1]}" in (stack / name).read_text()


# -- quilt ------------------------------------------------------------------------------


def test_quilt_push_applies_the_series_onto_the_base(world: World) -> None:
    quilt = shutil.which("quilt")
    if quilt is None:
        pytest.skip("quilt is not installed")
    fork = world.fork
    fork.commit("edit", {"f.txt": "a\nB\nc\n"})
    fork.commit("add and delete", {"added.txt": "new\n", "mla.py": None})
    fork.commit("rename", {"vllm/renamed.py": "k = 1\n", "vllm/keep.py": None})
    tip = fork.commit("edit the renamed file", {"vllm/renamed.py": "k = 1\nj = 2\n"})
    world.ok("import", "s", f"{world.base}..{tip}")

    checkout = world.tmp / "quilt"
    fork.git("worktree", "add", "-q", "--detach", str(checkout), world.base)
    env = {**os.environ, "QUILT_PATCHES": str(world.stack), "QUILTRC": "/dev/null"}
    proc = subprocess.run([quilt, "push", "-a"], cwd=checkout, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    wt = GitRepo(checkout)
    wt.git("add", "-A", "--", ".", ":!.pc")
    assert wt.git("write-tree") == fork.tree(tip)


# -- bad input --------------------------------------------------------------------------


def _first_patch(world: World) -> Path:
    return world.files()[0]


def _edit_patch(world: World, old: str, new: str, count: int = 1) -> None:
    path = _first_patch(world)
    text = path.read_text()
    assert old in text, (old, text)
    path.write_text(text.replace(old, new, count))


def _not_mbox(world: World) -> None:
    path = _first_patch(world)
    path.write_text("Subject: hello\n\n" + path.read_text().split("\n", 1)[1])


def _no_diff(world: World) -> None:
    path = _first_patch(world)
    text = path.read_text()
    path.write_text(text[: text.index("diff --git")])


def _series_names_missing_file(world: World) -> None:
    with open(world.stack / "series", "a") as f:
        f.write("0002-missing.patch\n")


def _file_not_in_series(world: World) -> None:
    shutil.copy(_first_patch(world), world.stack / "0002-stray.patch")


def _duplicate_id(world: World) -> None:
    shutil.copy(_first_patch(world), world.stack / "0002-copy.patch")
    with open(world.stack / "series", "a") as f:
        f.write("0002-copy.patch\n")


def _second_id(world: World) -> None:
    text = _first_patch(world).read_text()
    line = re.search(r"^Stack-Patch-Id: .*\n", text, flags=re.M).group(0)
    _first_patch(world).write_text(text.replace(line, line + "Stack-Patch-Id: I" + "1" * 40 + "\n", 1))


def _spid_value(value: str):
    def edit(world: World) -> None:
        text = _first_patch(world).read_text()
        _first_patch(world).write_text(
            re.sub(r"^Stack-Patch-Id: .*$", lambda m: "Stack-Patch-Id: " + value, text, count=1, flags=re.M)
        )

    return edit


def _toml(old: str, new: str):
    def edit(world: World) -> None:
        path = world.stack / "stack.toml"
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))

    return edit


# (name, how to break the stack, text expected in stderr: file name and line)
BAD_INPUTS = [
    ("not-mbox", _not_mbox, r"0001-fix\.patch:1: "),
    ("no-diff", _no_diff, r"0001-fix\.patch:\d+: no diff"),
    (
        "broken-hunk-header",
        lambda w: _edit_patch(w, "@@ -1,3 +1,3 @@", "@@ -1,x +1,3 @@"),
        r"0001-fix\.patch:\d+: broken hunk header",
    ),
    ("hunk-header-mangled", lambda w: _edit_patch(w, "@@ -1,3 +1,3 @@", "@ -1,3 +1,3 @@"), r"0001-fix\.patch:\d+: "),
    (
        "hunk-counts-too-big",
        lambda w: _edit_patch(w, "@@ -1,3 +1,3 @@", "@@ -1,5 +1,5 @@"),
        r"0001-fix\.patch:\d+: hunk",
    ),
    ("hunk-counts-too-small", lambda w: _edit_patch(w, "@@ -1,3 +1,3 @@", "@@ -1,2 +1,2 @@"), r"0001-fix\.patch:\d+: "),
    (
        "hunk-new-count-too-big",
        lambda w: _edit_patch(w, "@@ -1,3 +1,3 @@", "@@ -1,3 +1,4 @@"),
        r"0001-fix\.patch:\d+: hunk '@@ -1,3 \+1,4 @@': its lines do not add up to the counts in its header",
    ),
    (
        "truncated",
        lambda w: _first_patch(w).write_text(_first_patch(w).read_text().split("-b\n")[0]),
        r"0001-fix\.patch:\d+: ",
    ),
    (
        "no-headers",
        lambda w: _first_patch(w).write_text(
            _first_patch(w).read_text().split("\n", 1)[0] + "\n\n" + _first_patch(w).read_text().split("\n\n", 1)[1]
        ),
        r"0001-fix\.patch:2: missing From: header",
    ),
    (
        "no-subject",
        lambda w: _first_patch(w).write_text(re.sub(r"^Subject: .*\n", "", _first_patch(w).read_text(), flags=re.M)),
        r"0001-fix\.patch:2: missing Subject: header",
    ),
    (
        "message-not-utf8",
        lambda w: _first_patch(w).write_bytes(
            _first_patch(w).read_bytes().replace(b"\nStack-Patch-Id", b"\xff\n\nStack-Patch-Id")
        ),
        r"0001-fix\.patch:\d+: not valid UTF-8",
    ),
    (
        "no-stack-patch-id",
        lambda w: _first_patch(w).write_text(
            re.sub(r"^Stack-Patch-Id: .*\n", "", _first_patch(w).read_text(), flags=re.M)
        ),
        r"0001-fix\.patch: no Stack-Patch-Id",
    ),
    ("series-entry-without-file", _series_names_missing_file, r"series:3: .*0002-missing\.patch"),
    (
        "series-entry-twice",
        lambda w: (w.stack / "series").write_text((w.stack / "series").read_text() + "0001-fix.patch\n"),
        r"series:3: .*listed twice",
    ),
    (
        "series-entry-elsewhere",
        lambda w: (w.stack / "series").write_text((w.stack / "series").read_text() + "../s/0001-fix.patch\n"),
        r"series:3: .*must be a file in the stack directory",
    ),
    (
        "series-entry-p0",
        lambda w: (w.stack / "series").write_text((w.stack / "series").read_text().replace(".patch", ".patch -p0")),
        r"series:2: unsupported patch options '-p0'",
    ),
    ("file-not-in-series", _file_not_in_series, r"0002-stray\.patch: .*not in series"),
    ("duplicate-stack-patch-id", _duplicate_id, r"0002-copy\.patch:\d+: duplicate Stack-Patch-Id"),
    ("two-stack-patch-ids", _second_id, r"0001-fix\.patch:(\d+): 2 Stack-Patch-Id: trailers; a patch has exactly one"),
    *[
        (
            f"stack-patch-id-{label}",
            _spid_value(value),
            r"0001-fix\.patch:\d+: Stack-Patch-Id '.{1,70}' is not 'I' and 40",
        )
        for label, value in [
            ("shell", "$(touch /tmp/ggstack-pwned)"),
            ("html", "I0123--><script>alert(1)</script>"),
            ("huge", "I" + "a" * 200_000),
            ("short", "Ideadbeef"),
            ("upper-hex", "I" + "A" * 40),
        ]
    ],
    (
        "toml-unknown-key",
        _toml("draft = true", "draft = true\ncolour = 'red'"),
        r"stack\.toml:\d+: unknown key pr\.colour",
    ),
    ("toml-unknown-section", _toml("[branches]", "[branchez]"), r"stack\.toml:\d+: unknown section"),
    ("toml-wrong-type", _toml("timeout = 900", 'timeout = "soon"'), r"stack\.toml:\d+: tests\.timeout must be"),
    ("toml-wrong-list", _toml('labels = ["do-not-merge"]', "labels = [1, 2]"), r"stack\.toml:\d+: pr\.labels"),
    ("toml-bad-syntax", _toml("[pr]", "[pr"), r"stack\.toml:\d+: invalid TOML"),
    (
        "toml-not-utf8",
        lambda w: (w.stack / "stack.toml").write_bytes(b"# \xff\n" + (w.stack / "stack.toml").read_bytes()),
        r"stack\.toml:1: ",
    ),
    ("toml-no-repo", _toml(f'repo = "{SLUG}"', ""), r"stack\.toml: target\.repo"),
    # issue 16's tail: what loaded before and failed later, or was dropped without a word
    (
        "template-unknown-attribute",
        _toml('template = "gg/{stack}/{index:02d}-{slug}"', 'template = "gg/{stack.nope}"'),
        r"stack\.toml:\d+: branches\.template 'gg/\{stack\.nope\}': AttributeError",
    ),
    (
        "template-unknown-field",
        _toml('template = "gg/{stack}/{index:02d}-{slug}"', 'template = "gg/{sha}"'),
        r"stack\.toml:\d+: branches\.template 'gg/\{sha\}': KeyError",
    ),
    (
        "template-100k",
        _toml('template = "gg/{stack}/{index:02d}-{slug}"', 'template = "gg/' + "x" * 100_000 + '"'),
        r"stack\.toml:\d+: branches\.template makes branch names of 100003 characters",
    ),
    (
        "date-unparseable",
        lambda w: _edit_patch_re(w, r"^Date: .*$", "Date: the day before yesterday"),
        r"0001-fix\.patch:3: Date: 'the day before yesterday' is not a date",
    ),
    (
        "from-unparseable",
        lambda w: _edit_patch_re(w, r"^From: .*$", "From: nobody"),
        r"0001-fix\.patch:2: From: 'nobody' is not 'Name <email>'",
    ),
    (
        "second-mbox-message",
        lambda w: _first_patch(w).write_text(_first_patch(w).read_text() * 2),
        r"0001-fix\.patch:\d+: a second mail message starts here",
    ),
    (
        "diff-after-base-commit",
        lambda w: _first_patch(w).write_text(
            _first_patch(w).read_text()
            + "\ndiff --git a/g.txt b/g.txt\n--- a/g.txt\n+++ b/g.txt\n@@ -1 +1 @@\n-g\n+G\n"
        ),
        r"0001-fix\.patch:\d+: a diff after the end of the patch",
    ),
    (
        "crlf-file",
        lambda w: _first_patch(w).write_bytes(_first_patch(w).read_bytes().replace(b"\n", b"\r\n")),
        r"0001-fix\.patch:1: has CRLF line ends",
    ),
    (
        "nul-in-message",
        lambda w: _first_patch(w).write_bytes(
            _first_patch(w).read_bytes().replace(b"Subject: [PATCH 1/1] fix", b"Subject: [PATCH 1/1] f\0ix")
        ),
        r"0001-fix\.patch:\d+: contains a NUL byte",
    ),
]


def _edit_patch_re(world: World, pattern: str, new: str) -> None:
    path = _first_patch(world)
    text, n = re.subn(pattern, new, path.read_text(), count=1, flags=re.M)
    assert n == 1, pattern
    path.write_text(text)


@pytest.fixture
def one_patch(world: World) -> World:
    world.fork.commit("fix", {"f.txt": "a\nB\nc\n"})
    world.import_("HEAD")
    assert series_names(world.stack) == ["0001-fix.patch"]
    world.fork.commit("next", {"g.txt": "g\n"})
    return world


@pytest.mark.parametrize("name,breakage,expected", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_exit_2_with_file_and_line_and_writes_nothing(
    one_patch: World, name: str, breakage, expected: str
) -> None:
    world = one_patch
    breakage(world)
    before = snapshot(world.stack)
    # A command that writes; list/show/move/remove load the stack the same way first.
    for args in (["import", "s", "HEAD"],):
        proc = world.gg(*args)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2, (args, out)
        assert "Traceback" not in out
        assert re.search(expected, proc.stderr), (args, proc.stderr)
        assert snapshot(world.stack) == before, args


def test_every_command_refuses_a_broken_stack(one_patch: World) -> None:
    _edit_patch(one_patch, "@@ -1,3 +1,3 @@", "@@ -1,5 +1,5 @@")
    before = snapshot(one_patch.stack)
    for args in (
        ["list"],
        ["list", "s", "--json"],
        ["show", "s", "1"],
        ["move", "s", "1", "--to", "1"],
        ["remove", "s", "1"],
    ):
        proc = one_patch.gg(*args)
        assert proc.returncode == 2, (args, proc.stdout + proc.stderr)
        assert "Traceback" not in proc.stdout + proc.stderr
        assert re.search(r"0001-fix\.patch:\d+: ", proc.stderr), proc.stderr
        assert snapshot(one_patch.stack) == before


@pytest.mark.parametrize(
    "args,expected",
    [
        (["import", "s", "no-such-ref"], r"unknown ref 'no-such-ref'"),
        (["import", "s", "no-such-ref..HEAD"], r"unknown ref 'no-such-ref'"),
        (["import", "s", "HEAD", "--original-pr", "130"], r"--original-pr"),
        (["import", "s", "HEAD", "--only", "../outside"], r"--only \.\./outside: a path outside the repository"),
        (["import", "s", "HEAD", "--exclude", "/etc/passwd"], r"--exclude /etc/passwd: a path outside the repository"),
        (["import", "s", "HEAD~1..HEAD~1"], r"no commits to import"),
        (["import", "nostack", "HEAD"], r"no stack 'nostack'"),
        (["list", "nostack"], r"no stack 'nostack'"),
        (["show", "nostack", "1"], r"no stack 'nostack'"),
        (["init", "s", "--repo-slug", SLUG, "--base", "main"], r"already exists"),
        (["init", "t", "--repo-slug", "noslash", "--base", "main"], r"owner/name"),
        (["init", "t", "--repo-slug", SLUG, "--fork", "noslash", "--base", "main"], r"--fork must be owner/name"),
        (["init", "../escape", "--repo-slug", SLUG, "--base", "main"], r"invalid stack name"),
        (["init", "a..b", "--repo-slug", SLUG, "--base", "main"], r"invalid stack name 'a\.\.b': git refuses"),
        (["init", "x.lock", "--repo-slug", SLUG, "--base", "main"], r"invalid stack name 'x\.lock'"),
    ],
)
def test_bad_arguments_are_exit_2(one_patch: World, args: list[str], expected: str) -> None:
    before = snapshot(one_patch.patches)
    proc = one_patch.gg(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert re.search(expected, proc.stderr), proc.stderr
    assert snapshot(one_patch.patches) == before


def test_repo_that_is_not_a_git_repository(one_patch: World, tmp_path: Path) -> None:
    nowhere = tmp_path / "not-a-repo"
    nowhere.mkdir()
    before = snapshot(one_patch.patches)
    proc = one_patch.gg("import", "s", "HEAD", repo=nowhere)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    assert str(nowhere) in proc.stderr and "not a git repository" in proc.stderr
    assert snapshot(one_patch.patches) == before


def test_a_root_commit_cannot_be_imported(world: World) -> None:
    proc = world.gg("import", "s", world.base)
    assert proc.returncode == 2
    assert "root commit" in proc.stderr


# -- hard content -------------------------------------------------------------------------


def test_unicode_rename_mode_binary_crlf_round_trip(world: World) -> None:
    fork = world.fork
    fork.commit(
        "Přidat české znaky — ünïcödé 🎉 (#5)",
        {"čeština.txt": "žluťoučký kůň\n"},
        author="Jiří Novák <jiri@example.cz>",
    )
    fork.commit("rename a file", {"vllm/moved.py": "k = 1\n", "vllm/keep.py": None})
    fork.write("run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    fork.commit("add a script")
    os.chmod(fork.path / "mla.py", 0o755)
    fork.commit("make mla executable")
    fork.commit("a binary file", {"blob.bin": bytes(range(256)) * 4})
    fork.commit("change the binary", {"blob.bin": bytes(range(255, -1, -1)) * 4})
    fork.commit(
        "a path with spaces", {"dir with space/a b.txt": "x\n", 'odd "quote".txt': "q\n", "tab\tname.txt": "t\n"}
    )
    fork.commit("rename with spaces", {"dir with space/c d.txt": "x\n", "dir with space/a b.txt": None})
    fork.commit(
        "[Bugfix][Kernel] Příliš žluťoučký kůň úpěl ďábelské ódy, a předmět tak dlouhý, že ho format-patch zalomí",
        {"nonl.txt": "no newline", "empty.txt": "", "f.txt": None},
    )
    tip = fork.commit("CRLF content", {"win.txt": "one\r\ntwo\r\nthree\r\n"})
    crlf_edit = fork.commit("CRLF edit", {"win.txt": "one\r\nTWO\r\nthree\r\n"})
    tip = crlf_edit

    world.ok("import", "s", f"{world.base}..{tip}")

    patches = listed(world)
    assert patches[0]["subject"] == "Přidat české znaky — ünïcödé 🎉 (#5)"
    assert patches[0]["author"] == "Jiří Novák <jiri@example.cz>"
    assert patches[0]["original_pr"] == "#5"
    assert patches[0]["paths"] == ["čeština.txt"]
    assert patches[1]["paths"] == ["vllm/keep.py", "vllm/moved.py"]
    assert patches[6]["paths"] == ["dir with space/a b.txt", 'odd "quote".txt', "tab\tname.txt"]
    assert patches[7]["paths"] == ["dir with space/a b.txt", "dir with space/c d.txt"]
    assert "rename from vllm/keep.py" in world.files()[1].read_text()
    assert "new mode 100755" in world.files()[3].read_text()
    assert "GIT binary patch" in world.files()[4].read_text()
    assert (
        patches[8]["subject"]
        == "[Bugfix][Kernel] Příliš žluťoučký kůň úpěl ďábelské ódy, a předmět tak dlouhý, že ho format-patch zalomí"
    )
    assert patches[8]["paths"] == ["empty.txt", "f.txt", "nonl.txt"]

    # What replay applies is the parsed diff: it alone must rebuild each commit's tree.
    repo = git.Repository(str(fork.path))
    for p in store.load(str(world.patches), "s").patches:
        info = repo.commit_info(p.source_commit)
        tree, message = repo.apply_to_tree(
            repo.commit_info(info.parents[0]).tree, p.diff.encode("utf-8", "surrogateescape")
        )
        assert tree == info.tree, (p.name, message)

    # git am needs --keep-cr for CRLF content (it strips CRs from mail otherwise);
    # everything up to the CRLF patches applies with plain `git am -3`.
    # (It also strips "[Bugfix]" from subjects unless given -k: git's own behaviour.)
    checkout = world.am(world.base, world.files()[:-2])
    assert checkout.tree("HEAD") == fork.tree(f"{tip}~2")
    checkout = world.am(world.base, keep_cr=True)
    assert checkout.tree("HEAD") == fork.tree(tip)
    assert (
        checkout.git("log", "--format=%an <%ae>|%s", "--reverse", f"{world.base}..HEAD").splitlines()[0]
        == "Jiří Novák <jiri@example.cz>|Přidat české znaky — ünïcödé 🎉 (#5)"
    )
    roundtrips(world.stack, world.patches)
    world.ok("move", "s", "1", "--to", "2")
    roundtrips(world.stack, world.patches)


@pytest.mark.parametrize("author", ["John Q. Public <jqp@example.com>", "Doe, John (ACME) <doe@example.com>"])
def test_authors_that_mail_headers_quote(world: World, author: str) -> None:
    world.fork.commit("fix", {"f.txt": "x\n"}, author=author)
    world.ok("import", "s", "HEAD")
    assert listed(world)[0]["author"] == author
    assert store.load(str(world.patches), "s").patches[0].author == author


HEADS = [
    "From: Ann Author <ann@example.com>\nDate: Sun, 9 Nov 2025 00:58:21 +0200\nSubject: [PATCH 2/7] fix: a\n thing\n",
    "from: Ann <a@x>\nSUBJECT: [PATCH] one\n\ttwo  three\nSubject: a second one\nX-Other:\n",
    'From: "Doe, John" <d@x>\nSubject: =?UTF-8?q?=F0=9F=A7=AA=20Run?=\n =?UTF-8?q?=20tests?=\n',
    "From: =?UTF-8?q?Ji=C5=99=C3=AD?= <j@x>\nSubject: plain\n",
    "From: Ann <a@x>\nnot a header line\nSubject: after it\n",  # the rest is body to the email package
    "Subject: only a subject\n",
    "\n",
]


@pytest.mark.parametrize("head", HEADS)
def test_mail_headers_read_directly_are_the_email_packages(head: str) -> None:
    """A patch's From and Subject are read without the email package where every line is a
    header or its folding (format-patch's own), and come out as that package reads them."""
    import email.parser

    raw = email.parser.HeaderParser().parsestr(head, headersonly=True)
    package = {k: " ".join(str(raw[k]).split()) for k in ("From", "Subject") if raw[k] is not None}
    direct = {k: " ".join(v.split()) for k, v in mailheaders.fields(head).items() if k in ("from", "subject")}
    assert direct == {k.lower(): v for k, v in package.items()}


@pytest.mark.parametrize(
    "subject",
    [
        "=?UTF-8?q?=F0=9F=A7=AA=20Run?=\n =?UTF-8?q?=20tests?=",  # adjacent encoded words: joined
        "[PATCH 3/9] =?UTF-8?q?Fix=20na=C3=AFve?= handling",  # plain text around them: spaced
        "=?UTF-8?b?UMWZaWRhdCDEjWVzayDDqSB6bmFreQ==?=",
        # malformed, as no format-patch writes them: read as the policy reads them, never a traceback
        "=?bogus-charset?q?x?=",
        "=?UTF-8?q?=ZZ?=",
        "=?utf-8?b?//4gYWJj?=",  # not UTF-8
        "=?UTF-8?b?!!!?=",
    ],
)
def test_an_encoded_subject_is_decoded_as_the_email_packages_default_policy(subject: str) -> None:
    import email.parser
    import email.policy

    head = f"From: Ann <a@x>\nSubject: {subject}\n"
    want = email.parser.Parser(policy=email.policy.default).parsestr(head, headersonly=True)["Subject"]
    assert mailheaders.headers(head)["Subject"] == " ".join(str(want).split())


def test_a_plain_series_is_read_without_the_email_package(world: World) -> None:
    """format-patch's plain headers (no quoting, no RFC 2047 words) need no email package: a
    few milliseconds of every command that reads the stack."""
    world.fork.commit("fix the thing", {"f.txt": "x\n"}, author="Ann Author <ann@example.com>")
    world.ok("import", "s", "HEAD")
    code = (
        "import sys\nfrom ggstack.series import store\n"
        f"assert store.load({str(world.patches)!r}, 's').patches[0].subject == 'fix the thing'\n"
        "print(sorted(m for m in sys.modules if m.startswith('email')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout


def test_diff_paths_of_quoted_and_spaced_names() -> None:
    diff = "\n".join(
        [
            'diff --git "a/tab\\there.txt" "b/tab\\there.txt"',
            "diff --git a/one two.txt b/one two.txt",
            "diff --git a/x b/y.txt b/x b/z.txt",
            "similarity index 100%",
            "rename from x b/y.txt",
            "rename to x b/z.txt",
            'diff --git a/plain.txt "b/new\\"q.txt"',
            "rename from plain.txt",
            'rename to "new\\"q.txt"',
            'diff --git "a/\\303\\251t\\303\\251.txt" "b/\\303\\251t\\303\\251.txt"',
            "",
        ]
    )
    assert diff_paths(diff) == [
        "tab\there.txt",
        "one two.txt",
        "x b/y.txt",
        "x b/z.txt",
        "plain.txt",
        'new"q.txt',
        "été.txt",
    ]


# -- the command line -------------------------------------------------------------------------


def test_list_and_show_json(one_patch: World) -> None:
    world = one_patch
    data = json.loads(world.ok("list", "--json").stdout)
    assert list(data) == ["s"]
    (p,) = data["s"]
    assert p["name"] == "0001-fix.patch" and p["subject"] == "fix" and p["paths"] == ["f.txt"]

    shown = json.loads(world.ok("show", "s", "1", "--json").stdout)
    assert shown["stack_patch_id"] == p["stack_patch_id"]
    assert "Stack-Patch-Id: " in shown["message"]
    assert shown["diff"].startswith("diff --git a/f.txt b/f.txt\n")
    assert "+B" in shown["diff"]

    text = world.ok("show", "s", "0001-fix", "--patch").stdout
    assert "Stack-Patch-Id: " in text and "f.txt" in text and "+B" in text
    table = world.ok("list", "s").stdout
    assert "fix" in table and p["stack_patch_id"][:12] in table


def test_init_writes_a_stack_that_loads(tmp_path: Path) -> None:
    patches = tmp_path / "patches"
    proc = run_ggstack(
        "--patches", str(patches), "init", "gg-clean", "--repo-slug", SLUG, "--base", "dev/gilded-gnosis", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (patches / "gg-clean").iterdir()) == ["series", "stack.toml"]
    stack = store.load(str(patches), "gg-clean")
    assert (stack.config.target.repo, stack.config.target.base, stack.patches) == (SLUG, "dev/gilded-gnosis", ())
    roundtrips(patches / "gg-clean", patches)
    proc = run_ggstack("list", "gg-clean", cwd=tmp_path, env={"GGSTACK_PATCHES": str(patches)})
    assert proc.returncode == 0 and "gg-clean" in proc.stdout


def test_list_without_stacks(tmp_path: Path) -> None:
    proc = run_ggstack("--patches", str(tmp_path / "none"), "list", cwd=tmp_path)
    assert proc.returncode == 0
    assert "no stacks" in proc.stdout


@pytest.mark.parametrize("command", [[], ["init"], ["import"], ["list"], ["show"], ["remove"], ["move"]])
def test_help_explains_with_an_example(tmp_path: Path, command: list[str]) -> None:
    proc = run_ggstack(*command, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ggstack " in proc.stdout
    assert re.search(r"(Example|Typical)", proc.stdout)
