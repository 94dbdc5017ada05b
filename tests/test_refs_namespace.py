"""ggstack writes only its own refs: a patch's branch under refs/heads/ or refs/ggstack/, and
never a ref it did not write before.

A ``stack.toml`` can arrive in a pull request: its ``branches.template`` must not make
``apply`` create tags or notes, move a remote-tracking branch or replace the stash, and
``--force`` (meant for ggstack's own branches that someone moved) must not move a user's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_apply import STACK, Fork, lines


def _fork(tmp_path: Path) -> Fork:
    return Fork(
        tmp_path,
        [{"f1.txt": lines("f1", l1="p1")}, {"f2.txt": lines("f2", l2="p2")}],
        [{"f3.txt": lines("f3", l3="up")}],
    )


def _set_template(fork: Fork, template: str) -> None:
    toml = fork.patches / STACK / "stack.toml"
    toml.write_text(re.sub(r"(?m)^template = .*$", f"template = {template!r}".replace("'", '"'), toml.read_text()))


@pytest.mark.parametrize(
    "template",
    [
        "refs/tags/v{index}",
        "refs/notes/commits{index}",
        "refs/remotes/origin/{slug}",
        "refs/stash",
        "HEAD",
        "refs/heads/HEAD",
        "same-for-all",
        "refs/ggstack/{stack}/resolved/{index}",
        "refs/heads/a..{index}",
    ],
)
def test_a_template_outside_ggstacks_namespaces_is_refused_at_load_naming_the_key(
    tmp_path: Path, template: str
) -> None:
    fork = _fork(tmp_path)
    fork.g.git("tag", "v1", "main")
    _set_template(fork, template)
    refs = fork.g.refs()
    for args in (["list", STACK], ["apply", STACK], ["apply", STACK, "--force"]):
        proc = fork.ggstack(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "branches.template" in proc.stderr and "stack.toml" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert fork.g.refs() == refs


def test_a_ref_that_exists_and_ggstack_did_not_write_is_never_moved_not_even_with_force(tmp_path: Path) -> None:
    fork = _fork(tmp_path)
    _set_template(fork, "mine/{index:02d}")
    fork.g.git("branch", "mine/01", fork.old)  # the user's own branch, which the template happens to name
    refs = fork.g.refs()
    for extra in ((), ("--force",)):
        proc, _ = fork.apply(*extra)
        assert proc.returncode == 2, proc.stderr
        assert "exist and were not written by ggstack" in proc.stderr and "refs/heads/mine/01" in proc.stderr
        assert "someone else moved" not in proc.stderr and "branches.template" in proc.stderr
        assert fork.g.refs() == refs  # nothing written, not even mine/02 nor the record


def test_force_still_moves_a_branch_ggstack_wrote_and_someone_moved(tmp_path: Path) -> None:
    fork = _fork(tmp_path)
    proc, run = fork.apply()
    assert proc.returncode == 0, proc.stderr
    branch = run["patches"][0]["branch"]
    fork.g.git("update-ref", branch, fork.g.sha("main"))
    refused, _ = fork.apply()
    assert refused.returncode == 2 and "moved" in refused.stderr and "--force" in refused.stderr
    forced, again = fork.apply("--force")
    assert forced.returncode == 0, forced.stderr
    assert fork.g.git("rev-parse", branch) == again["patches"][0]["commit"]


def test_a_template_under_refs_ggstack_is_ggstacks_own(tmp_path: Path) -> None:
    fork = _fork(tmp_path)
    _set_template(fork, "refs/ggstack/{stack}/branches/{index:02d}-{slug}")
    proc, run = fork.apply()
    assert proc.returncode == 0, proc.stderr
    assert [p["branch"] for p in run["patches"]] == [
        "refs/ggstack/s/branches/01-patch-number-1",
        "refs/ggstack/s/branches/02-patch-number-2",
    ]


@pytest.mark.parametrize("prefix", ["refs/tags/try", "refs/remotes/origin", "refs/notes"])
def test_a_branch_prefix_outside_the_namespaces_is_refused(tmp_path: Path, prefix: str) -> None:
    fork = _fork(tmp_path)
    refs = fork.g.refs()
    proc, _ = fork.apply("--branch-prefix", prefix)
    assert proc.returncode == 2 and "--branch-prefix" in proc.stderr and "Traceback" not in proc.stderr
    assert fork.g.refs() == refs
