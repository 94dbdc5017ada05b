"""Author idents without a ``git var`` a patch: still exactly git's.

``dates.stamp`` reads the dates git keeps as they are; every answer it gives
is held to ``git var``'s here, and a replayed stack of many authors, zones
and dates is held to ``git am``'s commits of the same files byte for byte
(same ids) and to ``git rebase``'s author lines.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from gitrepo import GitRepo

from ggstack import git, importing, replay
from ggstack.git import dates
from ggstack.series import store

COMMITTER = {
    "GIT_COMMITTER_NAME": "Replay Committer",
    "GIT_COMMITTER_EMAIL": "replay@example.com",
    "GIT_COMMITTER_DATE": "1750000000 +0200",
}

DATES = [
    "1700000000 +0000",
    "@1700000000 +0000",
    "@0 +0000",
    "999999999 -0800",
    "123456789 +0530",
    "99999999 +0000",  # eight digits: git reads it as a calendar date, not an epoch
    "@1700000000 -0000",
    "1700000000 -0000",
    "1700000000 +0099",
    "1700000000 +2400",
    "01700000000 +0000",
    "Tue, 14 Nov 2023 22:13:20 +0000",
    "Tue, 7 Nov 2023 22:13:20 +0000",
    "Tue, 07 Nov 2023 22:13:20 +0000",
    "Wed, 14 Nov 2023 22:13:20 +0000",  # the wrong weekday
    "Thu, 1 Jan 1970 00:00:00 +0000",
    "Wed, 31 Dec 1969 16:00:00 -0800",
    "Sat, 29 Feb 2020 23:59:59 +1245",
    "Mon, 31 Dec 2099 23:59:59 +0000",
    "Fri, 1 Jan 2100 00:00:00 +0000",
    "Sun, 31 Mar 2024 02:30:00 +0100",
    "Tue, 14 Nov 2023 22:13:60 +0000",
    "Tue, 14 Nov 2023 22:13:20 -0000",
    "Tue, 14 Nov 2023 22:13:20 -0930",
    "2023-11-14T22:13:20+00:00",
    "2023-11-14 22:13:20 +0100",
]


def git_var_date(date: str) -> str | None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_AUTHOR_DATE": date}
    proc = subprocess.run(["git", "var", "GIT_AUTHOR_IDENT"], capture_output=True, text=True, env=env)
    return proc.stdout.strip().split("> ", 1)[1] if proc.returncode == 0 else None


@pytest.mark.parametrize("date", DATES)
def test_a_stamp_is_what_git_var_says(date: str) -> None:
    ours = dates.stamp(date)
    if ours is not None:
        assert ours == git_var_date(date), date


def test_the_dates_git_writes_need_no_git_process() -> None:
    """format-patch's own Date: lines and raw commit dates are all read here."""
    for date in ("Tue, 14 Nov 2023 22:13:20 +0000", "Tue, 7 Nov 2023 22:13:20 -0930", "1700000000 +0530"):
        assert dates.stamp(date) is not None, date
    for epoch, offset in ((0, 0), (1_700_000_000, -34200), (4_102_444_799, -50400), (951_868_799, 45900)):
        assert dates.stamp(dates.rfc2822(epoch, offset)) is not None


AUTHORS = [
    ("Zoë Ünicode", "zoe@example.com", "1100000000 +0530"),
    ("Doe, John", "john@example.com", "999999999 -0800"),
    ('J. R. "Bob" Dobbs', "bob@example.com", "1700000000 +0000"),
    ("Zoë Ünicode", "zoe@example.com", "1709251199 +1245"),
    ("Far East", "far@example.com", "1700000000 +1500"),  # a zone git keeps and fast-import refuses
    ("Plain Name", "plain@example.com", "1699401600 -0000"),
    ("Plain Name", "plain@example.com", "1700000000 +0000"),
    # quoted by format-patch ([ is special in mail), with a [ in the address the email package cuts at
    ("patchback[bot]", "45432694+patchback[bot]@users.noreply.github.com", "1700000000 +0000"),
]


def test_replayed_commits_are_git_ams_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in COMMITTER.items():
        monkeypatch.setenv(key, value)
    g = GitRepo.init(tmp_path / "fork")
    old = g.commit("root", {f"f{n}.txt": f"file {n}\n" for n in range(len(AUTHORS))})
    for n, (name, email, date) in enumerate(AUTHORS):
        g.write(f"f{n}.txt", f"file {n}, patched by {name}\n")
        g.git("add", "-A")
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
        g.git("commit", "-q", "-m", f"patch {n}\n\nby {name}\n", env=env)
    tip = g.sha("HEAD")
    g.git("checkout", "-q", "-b", "upstream", old)
    new = g.commit("upstream moves", {"up.txt": "upstream\n"})

    repo = git.Repository(str(g.path))
    patches = tmp_path / "patches"
    store.init(str(patches), "s", "o/r", "upstream")
    store.save(importing.commits(repo, store.load(str(patches), "s"), [f"{old}..{tip}"]).stack)
    stack = store.load(str(patches), "s")
    run = replay.apply(repo, stack, new, write=False)

    # git am of the stored files onto the same base: its commits are the ones apply must write.
    g.git("checkout", "-q", "--detach", new)
    g.git("-c", "core.hooksPath=/dev/null", "am", "-q", *(os.path.join(stack.path, p.name) for p in stack.patches))
    theirs = g.git("rev-list", "--reverse", f"{new}..HEAD").split()
    for outcome, commit in zip(run.outcomes, theirs, strict=True):
        assert g.git("cat-file", "commit", outcome.commit or "") == g.git("cat-file", "commit", commit)
    assert [o.commit for o in run.outcomes] == theirs
    # and git rebase of the commits agrees on every author line
    g.git("checkout", "-q", "--detach", tip)
    g.git("-c", "core.hooksPath=/dev/null", "rebase", "-q", "--onto", new, old)
    rebased = g.git("rev-list", "--reverse", f"{new}..HEAD").split()
    assert [author(g, o.commit or "") for o in run.outcomes] == [author(g, c) for c in rebased]


def author(g: GitRepo, commit: str) -> str:
    return next(line for line in g.git("cat-file", "commit", commit).splitlines() if line.startswith("author "))


def test_a_name_folded_into_several_encoded_words_is_the_commits_author(tmp_path: Path) -> None:
    """format-patch folds a long non-ASCII name into adjacent RFC 2047 words; they are joined as
    they were written (no space at a fold), so the replayed author is the source's, as git
    rebase keeps it. (git 2.39's ``git am`` reads such a header as the bare address.)"""
    name = "🇺🇦 Sviatoslav Sydorenko (Святослав Сидоренко)"
    g = GitRepo.init(tmp_path / "fork")
    old = g.commit("root", {"a.txt": "a\n"})
    g.write("a.txt", "b\n")
    g.git("commit", "-qam", "b", env={"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": "wk@example.com"})
    repo = git.Repository(str(g.path))
    patches = tmp_path / "patches"
    store.init(str(patches), "s", "o/r", "main")
    store.save(importing.commits(repo, store.load(str(patches), "s"), [f"{old}..HEAD"]).stack)
    stack = store.load(str(patches), "s")
    assert "=?UTF-8?q?" in stack.patches[0].raw.decode()  # the header is encoded words, folded
    assert stack.patches[0].author == f"{name} <wk@example.com>"
    run = replay.apply(repo, stack, old, write=False)
    assert author(g, run.outcomes[0].commit or "").startswith(f"author {name} <wk@example.com> ")
