"""Import as forks really have it: ranges as ``git rebase`` replays them, and
trailers that land after the message whatever its shape.

The branch shapes are the ones long-lived fork branches have (main merged
into the branch, PR merges, a sub-branch merged back); what counts is what a
user sees: which patches are stored, what the output says was left out, and
what ``git am`` of the stored files gives.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

SLUG = "owner/repo"


class Fork:
    """A fork checkout with a ``main`` and an empty stack ``s``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.repo = GitRepo.init(tmp / "fork")
        self.patches = tmp / "patches"
        self.stack = self.patches / "s"
        self.base = self.repo.commit("base", {"f.txt": "a\nb\nc\n", "up.txt": "u0\n"})
        self.ok("init", "s", "--repo-slug", SLUG, "--base", "main")

    def gg(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_ggstack("--repo", str(self.repo.path), "--patches", str(self.patches), *args, cwd=self.tmp)

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = self.gg(*args)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        return proc

    def merge(self, branch: str, message: str) -> str:
        self.repo.git("merge", "-q", "--no-ff", "-m", message, branch, env={"GIT_COMMITTER_DATE": "1700009999 +0000"})
        return self.repo.sha("HEAD")

    def on(self, branch: str) -> None:
        self.repo.git("checkout", "-q", branch)

    def listed(self) -> list[dict]:
        return json.loads(self.ok("list", "s", "--json").stdout)["s"]

    def files(self) -> list[Path]:
        return sorted(self.stack.glob("*.patch"))

    def am(self, onto: str) -> GitRepo:
        wt = self.tmp / f"am-{len(list(self.tmp.glob('am-*')))}"
        self.repo.git("worktree", "add", "-q", "--detach", str(wt), onto)
        checkout = GitRepo(wt)
        checkout.git("am", "-3", *map(str, self.files()))
        return checkout


@pytest.fixture
def fork(tmp_path: Path) -> Fork:
    return Fork(tmp_path)


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _branch_that_merged_main_twice(fork: Fork) -> tuple[list[str], list[str]]:
    """fix/x: own commits c1, c2, c3, with main merged in twice between them
    (git's own one-line message), main moving on each time with work of its own."""
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "fix/x")
    own = [repo.commit("fix: first", {"fix.py": "x = 1\n"})]
    fork.on("main")
    repo.commit("upstream: one", {"up.txt": "u1\n", **{f"up/{i}.py": f"{i}\n" for i in range(26)}})
    fork.on("fix/x")
    merges = [fork.merge("main", "Merge branch 'main' into fix/x")]
    own.append(repo.commit("fix: second", {"fix.py": "x = 2\n"}))
    fork.on("main")
    repo.commit("upstream: two", {"up.txt": "u2\n"})
    fork.on("fix/x")
    merges.append(fork.merge("main", "Merge branch 'main' into fix/x"))
    own.append(repo.commit("fix: third", {"f.txt": "a\nB\nc\n"}))
    return own, merges


def test_a_range_imports_the_branchs_own_commits_and_names_the_merges_it_left_out(fork: Fork) -> None:
    own, merges = _branch_that_merged_main_twice(fork)

    proc = fork.ok("import", "s", "main..fix/x")

    assert [p["source_commit"] for p in fork.listed()] == own
    assert [p["subject"] for p in fork.listed()] == ["fix: first", "fix: second", "fix: third"]
    assert "left out 2 merges of the base: " in proc.stdout
    for m in merges:
        assert f"{m[:12]} \"Merge branch 'main' into fix/x\"" in proc.stdout
    # The stored series is the branch's work: git am onto main gives fix/x's tree.
    assert fork.am("main").tree("HEAD") == fork.repo.tree("fix/x")


def test_a_range_from_the_fork_point_leaves_out_the_commits_the_stacks_base_already_has(fork: Fork) -> None:
    """From the fork point (not from main), the range reaches main's own commits through the
    merges, and git rebase would replay them: the branch's own commits are what a maintainer
    means, so main's are left out and listed; --keep-merged imports them."""
    own, _ = _branch_that_merged_main_twice(fork)

    proc = fork.ok("import", "s", f"{fork.base}..fix/x")

    assert [p["source_commit"] for p in fork.listed()] == own
    said = " ".join(proc.stdout.split())
    assert "left out 2 commits already on the stack's base 'main'" in said, proc.stdout
    assert "'upstream: one'" in said and "'upstream: two'" in said and "--keep-merged" in said
    fork.ok("init", "s2", "--repo-slug", SLUG, "--base", "main")
    kept = fork.ok("import", "s2", "--keep-merged", f"{fork.base}..fix/x")
    subjects = [p["subject"] for p in json.loads(fork.ok("list", "s2", "--json").stdout)["s2"]]
    assert "upstream: one" in subjects and "fix: third" in subjects
    assert "2 imported commit(s) are already on the stack's base 'main'" in kept.stdout, kept.stdout
    fork.ok("init", "s3", "--repo-slug", SLUG, "--base", "main")
    plain = fork.ok("import", "s3", "main..fix/x")
    assert [p["source_commit"] for p in json.loads(fork.ok("list", "s3", "--json").stdout)["s3"]] == own
    assert "already on the stack's base" not in plain.stdout


def test_a_branch_that_merged_a_newer_main_than_the_local_base_ref_imports_its_own_commits(fork: Fork) -> None:
    """A stale origin/main: the branch merged a newer main, whose commits are in origin/main..branch.
    They are not the fork's carry patches: left out, with the hint that the base ref looks behind."""
    repo = fork.repo
    repo.git("update-ref", "refs/remotes/origin/main", fork.base)  # the last fetch: before upstream moved
    repo.git("checkout", "-q", "-b", "fix/x")
    own = [repo.commit("fix: first", {"fix.py": "x = 1\n"})]
    fork.on("main")
    upstream = [repo.commit(f"upstream: {i}", {f"up{i}.txt": f"{i}\n"}) for i in range(3)]
    fork.on("fix/x")
    fork.merge("main", "Merge remote-tracking branch 'origin/main' into fix/x")
    own.append(repo.commit("fix: second", {"fix.py": "x = 2\n"}))
    repo.git("branch", "-q", "-f", "main", fork.base)  # the local main is as old as origin/main
    fork.ok("init", "t", "--repo-slug", SLUG, "--base", "main")

    proc = fork.ok("import", "t", "origin/main..fix/x")

    got = json.loads(fork.ok("list", "t", "--json").stdout)["t"]
    assert [p["source_commit"] for p in got] == own
    said = " ".join(proc.stdout.split())
    assert "left out 3 commits that a merge of the base brought in" in said, proc.stdout
    assert "looks behind" in said and "git fetch origin" in said
    assert all(c[:12] in said for c in upstream)
    fork.ok("init", "u", "--repo-slug", SLUG, "--base", "main")
    fork.ok("import", "u", "--keep-merged", "origin/main..fix/x")
    kept = json.loads(fork.ok("list", "u", "--json").stdout)["u"]
    assert [p["source_commit"] for p in kept] == [own[0], *upstream, own[1]]


def test_a_second_import_of_the_range_names_the_file_that_has_it(fork: Fork) -> None:
    _branch_that_merged_main_twice(fork)
    fork.ok("import", "s", "main..fix/x")
    before = snapshot(fork.stack)

    proc = fork.gg("import", "s", "main..fix/x")

    assert proc.returncode == 2, proc.stderr
    assert "already in the stack as 0001-fix-first.patch" in proc.stderr
    assert (fork.stack / "0001-fix-first.patch").is_file()
    assert snapshot(fork.stack) == before


def test_a_pr_merge_in_a_range_is_the_prs_combined_change(fork: Fork) -> None:
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "release")
    first = repo.commit("release: prep", {"rel.txt": "1\n"})
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit("feature: part one", {"feat.py": "a = 1\n"})
    repo.commit("feature: part two", {"feat.py": "a = 2\n"})
    fork.on("release")
    pr = fork.merge("feature", "Merge pull request #7 from someone/feature\n\nAdd the feature")
    last = repo.commit("release: after", {"rel.txt": "2\n"})

    proc = fork.ok("import", "s", "main..release")

    got = fork.listed()
    assert [p["source_commit"] for p in got] == [first, pr, last]
    assert got[1]["subject"] == "Add the feature"
    assert got[1]["original_pr"] == f"{SLUG}#7"
    assert "left out" not in proc.stdout
    assert fork.am("main").tree("HEAD") == repo.tree("release")


def test_a_pr_merge_is_applied_from_the_merge_itself_as_git_am_of_its_file_would(fork: Fork) -> None:
    """apply picks a PR merge's patch from the merge commit itself, its first parent the
    recorded one (merged with that as the base, whatever its other parent, it is the patch's
    change): no commit is written for any patch, and the replayed stack on a moved base, one
    that changes the lines the PR's file sits beside, is what ``git am`` of the files gives."""
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "release")
    repo.commit("release: prep", {"rel.txt": "1\n", "f.txt": "a\nb\nc\nrelease\n"})
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit("feature: part one", {"feat.py": "a = 1\n"})
    repo.commit("feature: part two", {"feat.py": "a = 2\n", "f.txt": "feature\na\nb\nc\nrelease\n"})
    fork.on("release")
    fork.merge("feature", "Merge pull request #7 from someone/feature\n\nAdd the feature")
    repo.commit("release: after", {"rel.txt": "2\n"})
    fork.ok("import", "s", "main..release")
    fork.on("main")
    repo.commit("upstream moves", {"up.txt": "u1\n", "f.txt": "a\nb, upstream\nc\n"})
    trace = fork.tmp / "apply.trace"
    proc = run_ggstack(
        "--repo", str(repo.path), "--patches", str(fork.patches), "apply", "s", "--onto", "main", "--json",
        cwd=fork.tmp, env={"GIT_TRACE": str(trace)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    assert [p["applied"] for p in run["patches"]] == ["applied"] * 3
    assert trace.read_text().count("built-in: git fast-import") == 1  # the replayed chain's only
    assert repo.tree(run["patches"][-1]["commit"]) == fork.am("main").tree("HEAD")


def test_a_merged_sub_branch_is_replayed_commit_by_commit(fork: Fork) -> None:
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "fix/x")
    a = repo.commit("fix: a", {"fix.py": "a\n"})
    repo.git("checkout", "-q", "-b", "sub")
    b = repo.commit("sub: b", {"sub.py": "b\n"})
    fork.on("fix/x")
    c = repo.commit("fix: c", {"f.txt": "a\nb\nC\n"})
    merge = fork.merge("sub", "Merge branch 'sub' into fix/x")

    proc = fork.ok("import", "s", "main..fix/x")

    assert {p["source_commit"] for p in fork.listed()} == {a, b, c}
    assert f"left out 1 merge of commits imported on their own: {merge[:12]}" in proc.stdout
    assert fork.am("main").tree("HEAD") == repo.tree("fix/x")


def test_a_commit_the_base_already_has_by_patch_id_is_kept_and_said(fork: Fork) -> None:
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "fix/x")
    picked = repo.commit("fix: taken upstream", {"fix.py": "x = 1\n"})
    other = repo.commit("fix: not taken", {"other.py": "y = 1\n"})
    fork.on("main")
    repo.git("cherry-pick", picked)

    proc = fork.ok("import", "s", "main..fix/x")

    assert [p["source_commit"] for p in fork.listed()] == [picked, other]
    assert "kept 1 already upstream by patch-id" in proc.stdout
    assert "0001-fix-taken-upstream.patch" in proc.stdout


def test_a_range_of_merges_only_says_so(fork: Fork) -> None:
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "fix/x")
    fork.on("main")
    repo.commit("upstream: one", {"up.txt": "u1\n"})
    fork.on("fix/x")
    fork.merge("main", "Merge branch 'main' into fix/x")

    proc = fork.gg("import", "s", "main~1..fix/x")

    # main~1..fix/x holds main's own commit and the merge: the branch has nothing of its own.
    assert proc.returncode == 2, proc.stderr
    assert "no commits to import: the base has them or a merge of the base brought them" in proc.stderr
    assert "--keep-merged" in proc.stderr and snapshot(fork.stack) == snapshot(fork.stack)
    proc = fork.gg("import", "s", "--keep-merged", "main~1..fix/x")
    assert proc.returncode == 0, proc.stderr
    # Asked for: the commit is imported, the merge is left out.
    assert [p["subject"] for p in fork.listed()] == ["upstream: one"]
    assert "left out 1 merge of commits imported on their own" in proc.stdout
    fork.ok("remove", "s", "1")
    before = snapshot(fork.stack)
    proc = fork.gg("import", "s", "main..fix/x")
    assert proc.returncode == 2
    assert "main..fix/x: no commits to import: it holds only merges (left out, as git rebase does)" in proc.stderr
    assert snapshot(fork.stack) == before


# -- trailers, whatever the message's shape ---------------------------------------------

MESSAGES = {
    "one line, no newline": "Merge branch 'main' into fix/x",
    "subject only": "subject only\n",
    "body without a final newline": "subject\n\nbody line without newline",
    "existing trailers": "subject\n\nbody\n\nSigned-off-by: A U Thor <a@example.com>\n",
    "a trailer-looking last body line": "subject\n\nbody\nKey: value-looking",
    "dashes in the body": "subject\n\nbody\n---\nafter the dashes\n",
}


def _commit_with_message(repo: GitRepo, message: str, n: int) -> str:
    """A commit whose message is exactly ``message`` (``git commit`` would add a newline)."""
    repo.write("f.txt", f"a\nb\nc{n}\n")
    repo.git("add", "-A")
    tree = repo.git("write-tree")
    env = {"GIT_AUTHOR_DATE": f"{1_700_000_000 + n} +0000", "GIT_COMMITTER_DATE": f"{1_700_000_000 + n} +0000"}
    sha = repo.git("commit-tree", tree, "-p", "HEAD", input=message, env=env)
    repo.git("update-ref", "refs/heads/main", sha)
    repo.git("reset", "-q", "--hard", sha)
    return sha


@pytest.mark.parametrize("shape", list(MESSAGES))
def test_trailers_follow_the_message_after_a_blank_line(fork: Fork, shape: str) -> None:
    message = MESSAGES[shape]
    sha = _commit_with_message(fork.repo, message, 1)

    proc = fork.ok("import", "s", sha)

    (patch,) = fork.listed()
    assert (
        patch["source_commit"] == sha
        and patch["cherry_picked_from"] is None
        and patch["stack_patch_id"].startswith("I")
    )
    trailers = f"Stack-Patch-Id: {patch['stack_patch_id']}\n"  # its own commit: the From line names it, no pick trailer
    in_block = shape == "existing trailers"
    expected = message.rstrip("\n") + ("\n" if in_block else "\n\n") + trailers
    # What ggstack itself replays (apply writes the whole message) ...
    run = json.loads(fork.gg("apply", "s", "--onto", f"{sha}~1", "--json").stdout)
    raw = subprocess.run(
        ["git", "-C", str(fork.repo.path), "cat-file", "commit", run["patches"][0]["commit"]],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    assert raw.split("\n\n", 1)[1] == expected
    # ... and what git am makes of the stored file: the same, except that git am
    # ends a message at a "---" line, and import says so.
    checkout = fork.am(f"{sha}~1")
    got = checkout.git("log", "-1", "--format=%B") + "\n"
    if shape == "dashes in the body":
        assert got == "subject\n\nbody\n"
        assert "0001-subject.patch: its message has a line git am ends it at (line 4: '---')" in proc.stdout
    else:
        assert got == expected
        assert "git am ends it" not in proc.stdout


# -- existing series: format-patch files, an mbox, quilt with DEP-3 ------------------------


def _two_commits_on_a_branch(fork: Fork) -> list[str]:
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "carry")
    shas = [
        repo.commit("carry: one\n\nThe first.", {"one.py": "1\n"}, author="Ann Other <ann@example.com>"),
        repo.commit("carry: two", {"f.txt": "a\nb\nC\n"}),
    ]
    fork.on("main")
    return shas


def test_a_directory_of_format_patch_files_comes_in_with_stack_patch_ids(fork: Fork) -> None:
    shas = _two_commits_on_a_branch(fork)
    out = fork.tmp / "outgoing"
    fork.repo.git("format-patch", "-q", "-o", str(out), "main..carry")

    proc = fork.ok("import", "s", "--from", str(out))

    got = fork.listed()
    assert [p["subject"] for p in got] == ["carry: one", "carry: two"]
    assert [p["source_commit"] for p in got] == shas  # the From line names the commit it was taken from
    assert all(p["stack_patch_id"].startswith("I") for p in got)
    # The same commits imported as a range record the same source, and neither path calls them picks.
    fork.ok("init", "s2", "--repo-slug", "o/r", "--base", "main")
    fork.ok("import", "s2", "main..carry")
    ranged = json.loads(fork.ok("list", "s2", "--json").stdout)["s2"]
    assert [(p["source_commit"], p["cherry_picked_from"]) for p in ranged] == [(s, None) for s in shas]
    assert [(p["source_commit"], p["cherry_picked_from"]) for p in got] == [(s, None) for s in shas]
    assert "imported 0001-carry-one.patch" in proc.stdout
    checkout = fork.am("main")
    assert checkout.tree("HEAD") == fork.repo.tree("carry")
    assert checkout.git("log", "-1", "--format=%an <%ae>", "HEAD~1") == "Ann Other <ann@example.com>"
    assert checkout.git("log", "-1", "--format=%B", "HEAD~1").startswith("carry: one\n\nThe first.\n\n")


def test_an_author_name_git_mailinfo_gives_up_on_is_kept(fork: Fork) -> None:
    """git mailinfo keeps only the address of a From: name over 60 bytes (a long name, or a
    shorter one in a script of 3-byte characters); import kept "x@y <x@y>" and lost the name."""
    name = "Jürgen Ölmüller-Übermannstraße van der Großenhausen-Ärzteschaft"
    fork.repo.git("checkout", "-q", "-b", "carry")
    fork.repo.commit("carry: one", {"one.py": "1\n"}, author=f"{name} <j@example.de>")
    fork.on("main")
    out = fork.tmp / "outgoing"
    fork.repo.git("format-patch", "-q", "-o", str(out), "main..carry")
    assert "\n =?UTF-8?q?" in next(out.iterdir()).read_text()  # format-patch folded the encoded name

    fork.ok("import", "s", "--from", str(out))

    assert fork.listed()[0]["author"] == f"{name} <j@example.de>"
    fork.ok("apply", "s", "--onto", "main")
    applied = fork.repo.git("for-each-ref", "--format=%(authorname)", "refs/heads/gg/")
    assert applied == name


def test_an_mbox_comes_in(fork: Fork) -> None:
    shas = _two_commits_on_a_branch(fork)
    mbox = fork.tmp / "series.mbox"
    mbox.write_bytes(
        subprocess.run(
            ["git", "-C", str(fork.repo.path), "format-patch", "--stdout", "main..carry"],
            capture_output=True,
            check=True,
        ).stdout
    )

    fork.ok("import", "s", "--from", str(mbox))

    assert [p["source_commit"] for p in fork.listed()] == shas
    assert fork.am("main").tree("HEAD") == fork.repo.tree("carry")


def test_a_quilt_series_with_dep3_headers_keeps_its_provenance(fork: Fork) -> None:
    upstream = "ab" * 20
    quilt = fork.tmp / "debian" / "patches"
    quilt.mkdir(parents=True)
    (quilt / "fix-b.patch").write_text(
        "Description: Fix the b line\n"
        " The b line was wrong.\n"
        " .\n"
        " Now it is right.\n"
        "Author: Deb Maintainer <deb@example.org>\n"
        f"Origin: upstream, https://github.com/up/proj/commit/{upstream}\n"
        "Forwarded: https://github.com/up/proj/pull/130\n"
        "Bug: https://bugs.example.org/42\n"
        "Applied-Upstream: 2.1, commit:" + upstream + "\n"
        "Last-Update: 2024-05-01\n"
        "---\n"
        "--- a/f.txt\n"
        "+++ b/f.txt\n"
        "@@ -1,3 +1,3 @@\n"
        " a\n"
        "-b\n"
        "+B\n"
        " c\n"
    )
    (quilt / "add-g.diff").write_text(
        "--- a/g.txt\n+++ b/g.txt\n@@ -0,0 +1 @@\n+g\n".replace("--- a/g.txt", "--- /dev/null")
    )
    (quilt / "series").write_text("# the Debian series\nfix-b.patch\nadd-g.diff -p1\n")

    proc = fork.ok("import", "s", "--from", str(quilt))

    one, two = fork.listed()
    assert one["subject"] == "Fix the b line"
    assert one["cherry_picked_from"] == upstream
    assert one["original_pr"] == "up/proj#130"
    assert two["subject"] == "add-g"  # no header: the file's name
    text = sorted(fork.stack.glob("0001-*.patch"))[0].read_text()
    for trailer in (
        f"Origin: upstream, https://github.com/up/proj/commit/{upstream}",
        "Forwarded: https://github.com/up/proj/pull/130",
        "Bug: https://bugs.example.org/42",
        f"Applied-Upstream: 2.1, commit:{upstream}",
    ):
        assert trailer in text
    assert "From: Deb Maintainer <deb@example.org>" in text
    checkout = fork.am("main")
    assert checkout.read("f.txt") == "a\nB\nc\n" and checkout.read("g.txt") == "g\n"
    assert checkout.git("log", "-1", "--format=%B", "HEAD~1").startswith(
        "Fix the b line\n\nThe b line was wrong.\n\nNow it is right.\n\n"
    )
    assert "0002-add-g.patch" in proc.stdout


def test_a_pull_url_in_a_dep3_bug_field_is_the_original_pr(fork: Fork) -> None:
    """DEP-3's Bug and Bug-<Vendor> fields name where the fix was reported; a GitHub pull URL there
    is the PR that made it, when Origin and Forwarded name none."""
    quilt = fork.tmp / "q"
    quilt.mkdir()
    (quilt / "fix-b.patch").write_text(
        "Description: Fix the b line\nAuthor: Deb <deb@example.org>\n"
        "Bug-Upstream: https://github.com/up/proj/pull/77\n---\n"
        "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    )
    (quilt / "series").write_text("fix-b.patch\n")
    fork.ok("import", "s", "--from", str(quilt))
    (one,) = fork.listed()
    assert one["original_pr"] == "up/proj#77"


@pytest.mark.parametrize(
    "files,expected",
    [
        ({"x.patch": "not a patch\n"}, "x.patch:1: not an mbox"),
        ({"series": "missing.patch\n"}, "series:1: series names 'missing.patch'"),
        (
            {"series": "a.patch\n", "a.patch": "--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-x\n+y\n"},
            "a.patch:1: does not apply onto",
        ),
        (
            {"series": "a.patch\n", "a.patch": "Author: nobody\n---\n--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+n\n"},
            "a.patch:1: Author: 'nobody' is not 'Name <email>'",
        ),
        ({"series": "a.patch -p0\n", "a.patch": ""}, "series:1: unsupported patch options '-p0'"),
    ],
)
def test_a_bad_series_is_exit_2_naming_the_file_and_nothing_is_written(
    fork: Fork, files: dict[str, str], expected: str
) -> None:
    incoming = fork.tmp / "incoming"
    incoming.mkdir()
    for name, text in files.items():
        (incoming / name).write_text(text)
    before = snapshot(fork.stack)

    proc = fork.gg("import", "s", "--from", str(incoming))

    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(fork.stack) == before


def test_many_messages_git_am_would_cut_are_said_in_one_line(fork: Fork) -> None:
    """A bot's messages (dependabot's "---" before its commands): one line, not one a patch."""
    fork.repo.git("checkout", "-q", "-b", "bumps")
    for i in range(5):
        fork.repo.commit(f"Bump dep {i}\n\nbody\n---\nupdated-dependencies:\n- dep {i}", {f"d{i}.txt": f"{i}\n"})
    fork.on("main")
    proc = fork.ok("import", "s", "main..bumps")
    said = " ".join(proc.stdout.split())
    assert said.count("git am ends") == 1, proc.stdout
    assert "5 messages have a line git am ends them at (such as '---')" in said, proc.stdout


def test_a_commit_made_from_a_stored_patch_gets_a_new_stack_patch_id_and_says_whose_it_carried(fork: Fork) -> None:
    # git am of stack s's files (README's way to build a fork branch) gives commits carrying s's ids.
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "fix/x")
    repo.commit("fix: first", {"fix.py": "x = 1\n"})
    repo.commit("fix: second", {"fix2.py": "y = 2\n"})
    fork.ok("import", "s", "main..fix/x")
    ids = [p["stack_patch_id"] for p in fork.listed()]
    amfork = fork.am("main")
    fork.ok("init", "t", "--repo-slug", SLUG, "--base", "main")

    proc = fork.ok("import", "t", f"main..{amfork.sha('HEAD')}")

    got = json.loads(fork.ok("list", "t", "--json").stdout)["t"]
    new = [p["stack_patch_id"] for p in got]
    assert len(new) == 2 and not set(new) & set(ids) and len(set(new)) == 2
    for patch, old, theirs in zip(got, ids, ["s/0001-fix-first.patch", "s/0002-fix-second.patch"]):
        assert f"{patch['name']}: given a new Stack-Patch-Id {patch['stack_patch_id']}; " in proc.stdout
        assert f"the one its source carried, {old}, is {theirs}'s" in proc.stdout
    text = (fork.patches / "t" / got[0]["name"]).read_text()
    assert text.count("Stack-Patch-Id:") == 1 and ids[0] not in text
    # The same commits into s itself: its own patches again, refused (exit 2), s unchanged.
    before = (fork.stack / "series").read_text()
    bad = fork.gg("import", "s", f"main..{amfork.sha('HEAD')}")
    assert (
        bad.returncode == 2
        and "is already in the stack as 0001-fix-first.patch (same Stack-Patch-Id: imported before, or made from that patch); nothing was imported"
        in bad.stderr
    )
    assert [p["stack_patch_id"] for p in fork.listed()] == ids and (fork.stack / "series").read_text() == before


def test_a_stored_series_imported_again_as_another_stack_gets_new_ids(fork: Fork) -> None:
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "fix/x")
    repo.commit("fix: first", {"fix.py": "x = 1\n"})
    fork.ok("import", "s", "main..fix/x")
    fork.ok("init", "t", "--repo-slug", SLUG, "--base", "main")

    proc = fork.ok("import", "t", "--from", str(fork.stack))

    (old,) = [p["stack_patch_id"] for p in fork.listed()]
    (new,) = [p["stack_patch_id"] for p in json.loads(fork.ok("list", "t", "--json").stdout)["t"]]
    assert new != old and f"the one its source carried, {old}, is s/0001-fix-first.patch's" in proc.stdout


def test_an_empty_commit_in_a_range_is_left_out_and_listed_as_git_rebase_drops_it(fork: Fork) -> None:
    """The probe (P-s): ipython's 8.x has an empty 'Backport security fix' commit; the whole import refused."""
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "fix/x")
    repo.commit("fix: first", {"fix.py": "x = 1\n"})
    repo.git("commit", "-q", "--allow-empty", "-m", "Backport security fix to 8.x")
    empty = repo.sha("HEAD")
    repo.commit("fix: second", {"fix2.py": "y = 2\n"})

    proc = fork.ok("import", "s", "main..fix/x")

    assert [p["subject"] for p in fork.listed()] == ["fix: first", "fix: second"]
    said = " ".join(proc.stdout.split())
    assert f"left out 1 empty commit (they change nothing): {empty[:12]} 'Backport security fix to 8.x'" in said
    # Only an empty commit: nothing to import, said so; --only emptying a commit stays an error.
    assert "change nothing" in fork.gg("import", "s", empty).stderr
    bad = fork.gg("import", "s", "fix/x", "--only", "nothere.py")
    assert bad.returncode == 2 and "would leave an empty patch (--only/--exclude keep none of: fix2.py)" in bad.stderr


def test_a_patch_to_a_latin1_file_keeps_its_bytes_through_import_check_and_apply(fork: Fork) -> None:
    """The probe: format-patch writes a latin-1 file's lines as they are; import refused its own file."""
    repo = fork.repo
    head = b"caf\xe9 = 1\n" + b"".join(b"%d\n" % d for d in range(20))
    repo.commit("latin-1 source", {"lat.txt": head})
    repo.git("branch", "-f", "base-side")
    repo.git("checkout", "-q", "-b", "fix/x")
    patched = b'caf\xe9 = 1\nfirst = "\xe9t\xe9"\n' + head[len(b"caf\xe9 = 1\n") :] + b'last = "na\xefve"\n'
    repo.commit("fix: two blocks in a latin-1 file", {"lat.txt": patched})
    fork.on("base-side")
    carried = repo.commit("upstream: the first block", {"lat.txt": b'caf\xe9 = 1\nfirst = "\xe9t\xe9"\n' + head[9:]})
    fork.on("main")

    fork.ok("import", "s", "base-side~1..fix/x")
    assert [p["paths"] for p in fork.listed()] == [["lat.txt"]]
    # Applied onto where it came from: the file's bytes are the commit's, byte for byte.
    fork.ok("apply", "s", "--onto", "base-side~1")
    assert repo.git("rev-parse", "gg/s/01-fix-two-blocks-in-a-latin-1-file:lat.txt") == repo.git(
        "rev-parse", "fix/x:lat.txt"
    )
    # Judged on a base that carries one block: the remaining diff in the JSON keeps the other block's bytes.
    proc = fork.gg("check", "s", "--onto", carried, "--json")
    assert proc.returncode == 1, proc.stderr
    (outcome,) = json.loads(proc.stdout)["patches"]
    assert outcome["verdict"] == "partial"
    remaining = outcome["remaining_diff"].encode("utf-8", "surrogateescape")
    assert b'+last = "na\xefve"\n' in remaining and b"first" not in remaining
    # A conflict's hunks too; and the saved Run reads back, as Markdown (a human's text) and as the same JSON.
    repo.git("checkout", "-q", "-b", "other", "base-side~1")
    repo.commit("upstream: another first line", {"lat.txt": b'caf\xe9 = 1\nfirst = "\xe0"\n' + head[9:]})
    run = fork.tmp / "run.json"
    proc = fork.gg("sync", "s", "--onto", "other", "--dry-run", "--gpu", "off", "--run-json", str(run))
    assert proc.returncode == 1, proc.stderr
    (outcome,) = json.loads(run.read_bytes().decode("utf-8"))["patches"]
    assert b'first = "\xe0"' in outcome["conflict"]["hunks"].encode("utf-8", "surrogateescape")
    # Text output carries the file's bytes as git diff shows them.
    shown = subprocess.run(
        [sys.executable, "-m", "ggstack", "report", str(run), "--format", "markdown"], capture_output=True
    )
    assert shown.returncode == 0 and b'first = "\xe0"' in shown.stdout, shown.stderr
    assert json.loads(fork.ok("report", str(run), "--format", "json").stdout) == json.loads(run.read_text())


def test_a_series_made_on_an_older_commit_that_the_base_took_a_patch_of_asks_for_onto(tmp_path: Path) -> None:
    """format-patch without --base, imported onto a base that cherry-picked its first patch."""
    repo = GitRepo.init(tmp_path / "fork")
    repo.commit("base", {"a.txt": "a\n", "b.txt": "b\n"})
    start = repo.sha("HEAD")
    repo.git("checkout", "-q", "-b", "fork")
    first = repo.commit("fix a", {"a.txt": "A\n"})
    repo.commit("fix b", {"b.txt": "B\n"})
    repo.git("checkout", "-q", "main")
    repo.git("cherry-pick", first)
    series_dir = tmp_path / "series"
    repo.git("format-patch", "-q", "-o", str(series_dir), f"{start}..fork")
    gg = ["--repo", str(repo.path), "--patches", str(tmp_path / "patches")]
    assert run_ggstack(*gg, "init", "s", "--repo-slug", SLUG, "--base", "main", cwd=tmp_path).returncode == 0
    bad = run_ggstack(*gg, "import", "s", "--from", str(series_dir), cwd=tmp_path)
    assert bad.returncode == 2 and "0001-fix-a.patch:1: changes nothing on" in bad.stderr, bad.stderr
    assert "one that commit already has; give --onto the commit the series was made on" in bad.stderr
    good = run_ggstack(*gg, "import", "s", "--from", str(series_dir), "--onto", start, cwd=tmp_path)
    assert good.returncode == 0, good.stderr


def test_many_commits_already_upstream_are_counted_and_the_first_ten_named(fork: Fork) -> None:
    repo = fork.repo
    repo.git("checkout", "-q", "-b", "fix/many")
    picks = [repo.commit(f"fix {i}", {f"f{i}.py": f"x = {i}\n"}) for i in range(12)]
    fork.on("main")
    repo.git("cherry-pick", *picks)
    out = fork.ok("import", "s", "main..fix/many").stdout
    (line,) = [line for line in out.splitlines() if line.startswith("kept 12 already upstream")]
    assert line.endswith("0010-fix-9.patch and 2 more") and "0011-fix-10" not in line
