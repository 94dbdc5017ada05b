"""``ggstack check``: every trap of issue 4, each built as a real git history.

The fork's change is a commit on branch ``fork``; the base is ``main``,
which did (or did not) take the change in the way each test describes.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import git, importing
from ggstack.check.commits import check_commits
from ggstack.check.stack import check_stack
from ggstack.model import Recommendation, Verdict
from ggstack.series import store

LINES = [f"line {i}" for i in range(1, 41)]
OTHER = "Upstream Person <upstream@example.org>"


def text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def edited(lines: list[str], **at: str | list[str] | None) -> list[str]:
    """``lines`` with line N (1-based, key ``l<N>``) replaced by a line, a list, or removed."""
    out: list[str] = []
    for i, line in enumerate(lines, 1):
        new = at.get(f"l{i}", line)
        if new is None:
            continue
        out += new if isinstance(new, list) else [new]
    return out


@pytest.fixture
def world(repo: GitRepo) -> GitRepo:
    repo.commit("root", {"f.txt": text(LINES), "other.txt": "other\n"})
    repo.git("branch", "fork")
    return repo


def on(repo: GitRepo, branch: str, message: str, files: dict) -> str:
    repo.git("checkout", "-q", branch)
    sha = repo.commit(message, files)
    repo.git("checkout", "-q", "main")
    return sha


def judge(repo: GitRepo, *commits: str, base: str = "main"):
    run = check_commits(git.Repository(str(repo.path)), list(commits), base)
    return run.outcomes if len(commits) > 1 else run.outcomes[0]


def kinds(outcome) -> dict[str, list]:
    out: dict[str, list] = {}
    for e in outcome.evidence:
        out.setdefault(e.kind, []).append(e)
    return out


def rule(outcome) -> str:
    """The rule of the verdict table that decided."""
    return kinds(outcome)["rule"][0].data["rule"]


def applies_to(repo: GitRepo, rev: str, diff: str) -> bool:
    env = {**os.environ, "GIT_INDEX_FILE": str(repo.path / ".git" / "test-index")}
    subprocess.run(["git", "-C", str(repo.path), "read-tree", rev], check=True, env=env)
    proc = subprocess.run(
        ["git", "-C", str(repo.path), "apply", "--cached", "--check", "-"],
        input=diff.encode(),
        env=env,
        capture_output=True,
    )
    return proc.returncode == 0


THREE_HUNKS = dict(l5="line five", l20="line twenty", l35=["line 35", "extra after 35"])


# -- exact picks, reverts, squashes ----------------------------------------------------


def test_exact_pick_is_represented_by_the_pick(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, **THREE_HUNKS))})
    world.commit("unrelated", {"other.txt": "other 2\n"})
    world.git("cherry-pick", c)
    pick = world.sha("HEAD")
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    assert o.represented_by == [pick]
    assert o.represented_fraction == 1.0
    ev = kinds(o)
    assert ev["patch-id"][0].data["match"] and ev["patch-id"][0].commits == [pick]
    assert "empty" not in ev and "conflict" not in ev  # patch-id and content agree: no merge spent on it
    assert ev["rule"][0].data["rule"] == "picked"
    assert ev["reverse-apply"][0].data["applies"] is True
    assert ev["blame"][0].detail == f"100% of added lines come from {pick[:10]}"
    assert o.recommendation is Recommendation.DO_NOT_OPEN


def test_picked_then_reverted_upstream_is_unique(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, **THREE_HUNKS))})
    world.git("cherry-pick", "-x", c)
    pick = world.sha("HEAD")
    world.git("revert", "--no-edit", "HEAD")
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE
    assert o.represented_by == []
    ev = kinds(o)
    assert ev["patch-id"][0].commits == [pick]  # patch-id matches ...
    assert ev["identity"][0].data["match"]  # ... and so does -x's "(cherry picked from ...)"
    assert ev["revert"][0].data == {"reverted_by": [world.sha("main")], "picks": [pick]}
    assert ev["rule"][0].detail == f"needed: needed again: picked as {pick[:10]}, reverted by {world.sha('main')[:10]}"
    assert o.recommendation is Recommendation.OPEN_PR  # needed again: the evidence says why the signals disagree


def test_merged_then_the_merge_reverted_names_the_revert_as_identity_evidence(world: GitRepo) -> None:
    """The seed's "merge/revert block": the PR's commit is reachable from the
    base through its merge, and ``git revert -m 1`` of that merge took it out."""
    c = on(world, "fork", "fix (#130)", {"f.txt": text(edited(LINES, **THREE_HUNKS))})
    world.git("merge", "-q", "--no-ff", "-m", "Merge pull request #130 from me/fix", "fork")
    merge = world.sha("HEAD")
    world.git("revert", "--no-edit", "-m", "1", merge)
    revert = world.sha("HEAD")
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE
    identity = kinds(o)["identity"][0]
    assert identity.data == {"match": False, "reverted_by": [revert]}
    assert identity.detail == f"the commit itself is reachable from the base, but {revert[:10]} reverted it"
    assert not any("signals disagree" in e.detail for e in o.evidence)  # the revert explains it
    assert o.recommendation is Recommendation.OPEN_PR


def test_squash_into_a_larger_base_commit_names_it(world: GitRepo) -> None:
    """The 639aeff case: the fix folded into a commit with other lifecycle work."""
    c = on(world, "fork", "fix(dcp): preallocate buffers", {"f.txt": text(edited(LINES, **THREE_HUNKS))})
    world.commit("before", {"other.txt": "before\n"})
    squash = world.commit(
        "lifecycle rework",
        {
            "f.txt": text(edited(LINES, l1="LINE ONE", **THREE_HUNKS, l40="line forty")),
            "lifecycle.py": "def start():\n    pass\n",
        },
    )
    world.commit("after", {"other.txt": "after\n"})
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    assert o.represented_by == [squash]
    ev = kinds(o)
    assert not ev["patch-id"][0].data["match"]
    assert ev["blame"][0].detail == f"100% of added lines come from {squash[:10]}"
    assert rule(o) == "content"
    assert "patch-id differs" in __import__("ggstack.report.evidence", fromlist=["x"]).verdict_words(o)


def test_shares_between_two_base_commits(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l5="five", l6="six", l7="seven", l20="twenty"))})
    a = world.commit("a", {"f.txt": text(edited(LINES, l5="five", l6="six", l7="seven"))})
    b = world.commit("b", {"f.txt": text(edited(LINES, l5="five", l6="six", l7="seven", l20="twenty"))})
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    assert o.represented_by == [a, b]
    shares = kinds(o)["blame"][0].data["shares"]
    assert shares == {a: 0.75, b: 0.25}


# -- placement traps -------------------------------------------------------------------


def test_pure_deletion_in_repeating_lines_is_not_represented(world: GitRepo) -> None:
    """git apply -R finds the deletion's context at another place; the content check does not."""
    block = ["{", "  foo();", "  bar();", "}"]
    plain = ["{", "  foo();", "}"]
    sep = ["s1", "s2", "s3"]
    lines = sep + plain + sep + block + sep + block + sep
    world.commit("blocks", {"g.c": text(lines)})
    world.git("branch", "-f", "fork", "HEAD")
    deleted = sep + plain + sep + block + sep + plain + sep
    c = on(world, "fork", "drop the second bar", {"g.c": text(deleted)})
    world.commit("unrelated", {"other.txt": "x\n"})
    assert judge(world, c).verdict is Verdict.UNIQUE
    # As a stored stack, the cumulative reverse-apply is gathered too, and disagrees.
    repo = git.Repository(str(world.path))
    stack = _stack(world, repo, c)
    o = check_stack(repo, stack, "main").outcomes[0]
    assert o.verdict is Verdict.UNIQUE
    assert kinds(o)["reverse-apply"][0].data["applies"] is True
    assert o.recommendation is Recommendation.HUMAN_LOOK


def test_same_added_lines_elsewhere_or_in_another_file_are_not_represented(world: GitRepo) -> None:
    added = ["def helper():", "    return compute(1, 2)", "    # shared"]
    c = on(world, "fork", "add helper", {"f.txt": text(edited(LINES, l10=["line 10", *added]))})
    world.commit("copy elsewhere", {"f.txt": text(LINES + added), "copy.py": text(added)})
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE
    assert o.represented_fraction == 0.0
    assert "elsewhere in the file" in kinds(o)["content"][0].detail


def test_identical_changed_lines_different_context_is_represented(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, **THREE_HUNKS))})
    # Upstream edited the lines around every hunk, then took the change.
    world.commit(
        "context moves on",
        {"f.txt": text(edited(LINES, l4="line 4 (new)", l6="line 6 (new)", l19="x", l21="y", l34="z", l36="w"))},
    )
    both = world.commit(
        "take the fix",
        {
            "f.txt": text(
                edited(LINES, l4="line 4 (new)", l6="line 6 (new)", l19="x", l21="y", l34="z", l36="w", **THREE_HUNKS)
            )
        },
    )
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    assert o.represented_by == [both]
    ev = kinds(o)
    assert not ev["patch-id"][0].data["match"]
    assert ev["reverse-apply"][0].data["applies"] is False  # git apply -R misses it


# -- adapted picks ------------------------------------------------------------------------


def test_adapted_pick_with_a_dropped_hunk_is_partial_with_that_hunk_left(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, **THREE_HUNKS))})
    world.commit("unrelated", {"f.txt": text(edited(LINES, l1="LINE ONE"))})
    world.commit(
        "pick without the middle hunk",
        {"f.txt": text(edited(LINES, l1="LINE ONE", l5="line five", l35=["line 35", "extra after 35"]))},
    )
    o = judge(world, c)
    assert o.verdict is Verdict.PARTIAL and rule(o) == "partial"
    assert 0 < o.represented_fraction < 1
    assert o.recommendation is Recommendation.OPEN_PR
    diff = o.remaining_diff
    assert diff and "+line twenty" in diff and "-line 20" in diff
    assert "line five" not in diff.replace(" line five", "") and "extra after 35" not in diff
    assert applies_to(world, "main", diff)


def test_adapted_pick_with_a_changed_hunk_names_it_and_never_undoes_the_adaptation(world: GitRepo) -> None:
    """The base changed that place its own way: a remaining diff that put the patch's line over
    the base's would undo upstream's work (and on real code leave it broken). It is left out,
    named with its line, to port by hand: a rework, not a PR."""
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l5="line five", l20="line twenty", l30="line thirty"))})
    world.commit(
        "adapted pick", {"f.txt": text(edited(LINES, l5="line five", l20="line TWENTY (adapted)"))}, author=OTHER
    )
    o = judge(world, c)
    assert o.verdict is Verdict.PARTIAL
    diff = o.remaining_diff
    assert diff and "+line thirty" in diff and "-line 30" in diff and applies_to(world, "main", diff)
    assert "TWENTY" not in diff and "line twenty" not in diff
    left = [e for e in o.evidence if "left_out" in e.data]
    assert left and left[0].data["left_out"] == ["f.txt line 20 (hunk @@ -17,7 +17,7 @@)"], left
    assert o.recommendation is Recommendation.REWORK


def test_a_missing_block_whose_removed_line_the_patch_moves_is_left_out_not_spliced(world: GitRepo) -> None:
    """Found on ipython: the patch moves an import up and puts other imports where it was;
    upstream has the moved import but not all of the others. git's alignment pairs the line the
    missing block removes with upstream's moved import (the same text): splicing there would
    delete upstream's import. A block removing a line the patch puts back elsewhere is left out."""
    tail = ["", 'MULTILINE_MAGIC = ("""\\', "a = f()", '""")', "", "def test_body():", "    return dedent(ipt2.x)"]
    ipt2 = "from IPython.core import inputtransformer2 as ipt2"
    find = "from IPython.core.inputtransformer2 import _find_assign_op, make_tokens_by_line"
    doc = '"""Tests for the token-based transformers."""'
    head = [doc, "import nose.tools as nt", "import string", "", ipt2]
    head += ["from IPython.core.inputtransformer2 import make_tokens_by_line, _find_assign_op"]
    head += ["", "from textwrap import dedent", *tail]
    world.commit("imports", {"imp.py": text(head)})
    world.git("branch", "-f", "fork", "main")
    patched = [*head[:3], "import sys", "from textwrap import dedent", "", "import pytest", "", ipt2, find]
    patched += ["from IPython.testing.decorators import skip", *tail]
    c = on(world, "fork", "Backport PR #13270: use skip", {"imp.py": text(patched)})
    upstream = [doc, "", "import platform", "import string", "import sys", "from textwrap import dedent", ""]
    upstream += ["import pytest", "", ipt2 + "  # noqa: F401", find, *tail]
    world.commit("upstream tidies its imports", {"imp.py": text(upstream)}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.PARTIAL, o.evidence
    diff = o.remaining_diff or ""
    assert "-from textwrap import dedent" not in diff, diff
    assert o.recommendation is Recommendation.REWORK


def test_conflict_resolved_pick_with_every_change_present_is_represented(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, **THREE_HUNKS))})
    world.commit(
        "resolved pick",
        {
            "f.txt": text(
                edited(
                    LINES, l5="line five", l6="resolved neighbour", l20="line twenty", l35=["line 35", "extra after 35"]
                )
            )
        },
    )
    assert judge(world, c).verdict is Verdict.REPRESENTED


# -- conflicts -------------------------------------------------------------------------------


def test_conflict_only_because_the_change_is_there_is_represented(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l10="x = 2"))})
    world.commit("has it, and changed the next line", {"f.txt": text(edited(LINES, l10="x = 2", l11="y = 3"))})
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    ev = kinds(o)
    assert ev["conflict"][0].data["paths"] == ["f.txt"]
    assert any(e.data.get("spurious") for e in ev["conflict"])


def test_genuine_conflict_stays_conflict_with_its_paths(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l10="x = 2"))})
    world.commit("did something else there", {"f.txt": text(edited(LINES, l10="x = 3"))}, author=OTHER)
    o = judge(world, c)
    assert o.verdict is Verdict.CONFLICT and rule(o) == "needed"
    assert o.conflict.paths == ["f.txt"]
    assert o.recommendation is Recommendation.REWORK


def test_the_same_author_changing_the_same_lines_another_way_is_superseded(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l10="x = 2"))})
    other = world.commit("did something else there", {"f.txt": text(edited(LINES, l10="x = 3"))})
    o = judge(world, c)
    assert o.verdict is Verdict.CONFLICT and o.recommendation is Recommendation.HUMAN_LOOK
    hint = kinds(o)["hint"][0]
    assert hint.commits == [other] and hint.detail.startswith("superseded?")
    assert rule(o) == "superseded?"


def test_unique_commit_applies(world: GitRepo) -> None:
    c = on(world, "fork", "new thing", {"f.txt": text(edited(LINES, l30="line thirty"))})
    world.commit("upstream elsewhere", {"f.txt": text(edited(LINES, l2="two"))})
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE and o.recommendation is Recommendation.OPEN_PR


# -- files: renames, modes, binaries, whitespace, deletions, additions --------------------------


def test_rename_with_change(world: GitRepo) -> None:
    world.git("checkout", "-q", "fork")
    world.git("mv", "f.txt", "g.txt")
    world.write("g.txt", text(edited(LINES, l5="line five")))
    c = world.commit("rename and fix")
    world.git("checkout", "-q", "main")
    assert judge(world, c).verdict is Verdict.UNIQUE
    world.git("cherry-pick", c)
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    assert "renamed f.txt → g.txt in the base" in kinds(o)["content"][0].detail


def test_rename_done_upstream_without_the_change_is_partial(world: GitRepo) -> None:
    world.git("checkout", "-q", "fork")
    world.git("mv", "f.txt", "g.txt")
    world.write("g.txt", text(edited(LINES, l5="line five")))
    c = world.commit("rename and fix")
    world.git("checkout", "-q", "main")
    world.git("mv", "f.txt", "g.txt")
    world.commit("rename only")
    o = judge(world, c)
    assert o.verdict is Verdict.PARTIAL
    assert "+line five" in o.remaining_diff and applies_to(world, "main", o.remaining_diff)


def test_mode_change(world: GitRepo) -> None:
    world.commit("script", {"run.sh": "#!/bin/sh\necho hi\n"})
    world.git("branch", "-f", "fork", "HEAD")
    world.git("checkout", "-q", "fork")
    world.write("run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    c = world.commit("make it executable")
    world.git("checkout", "-q", "main")
    assert judge(world, c).verdict is Verdict.UNIQUE
    world.commit("other", {"other.txt": "o\n"})
    world.write("run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    world.commit("chmod upstream too")
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    assert "mode 100755 in the base" in kinds(o)["content"][0].detail


def test_binary_files(world: GitRepo) -> None:
    png = bytes(range(256)) * 4
    c = on(world, "fork", "add logo", {"logo.bin": png})
    assert judge(world, c).verdict is Verdict.UNIQUE
    world.commit("different logo", {"logo.bin": png[::-1]})
    o = judge(world, c)
    assert o.verdict is Verdict.CONFLICT
    assert "binary" in kinds(o)["content"][0].detail
    world.commit("same logo", {"logo.bin": png})
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    assert "same content" in kinds(o)["content"][0].detail


def test_whitespace_only_differences(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l10="x = 2"))})
    world.commit("same change, trailing blanks", {"f.txt": text(edited(LINES, l10="x = 2   "))})
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    assert "ignoring trailing whitespace" in kinds(o)["content"][0].detail


def test_whitespace_only_patch_is_not_represented_by_the_unstripped_base(world: GitRepo) -> None:
    world.commit("blanks", {"f.txt": text(edited(LINES, l10="line 10   "))})
    world.git("branch", "-f", "fork", "HEAD")
    c = on(world, "fork", "strip trailing blanks", {"f.txt": text(LINES)})
    world.commit("unrelated", {"other.txt": "x\n"})
    assert judge(world, c).verdict is Verdict.UNIQUE


def test_file_deleted_by_the_patch(world: GitRepo) -> None:
    c = on(world, "fork", "drop other", {"other.txt": None})
    assert judge(world, c).verdict is Verdict.UNIQUE
    world.commit("drop it upstream", {"other.txt": None})
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    assert "file already deleted in the base" in kinds(o)["content"][0].detail


def test_file_added_by_the_patch_already_in_the_base(world: GitRepo) -> None:
    c = on(world, "fork", "add module", {"mod.py": "def f():\n    return 1\n"})
    world.commit("same module upstream", {"mod.py": "def f():\n    return 1\n"})
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED
    assert "already exists in the base with the same content" in kinds(o)["content"][0].detail


def test_file_added_by_the_patch_inside_a_larger_base_file(world: GitRepo) -> None:
    c = on(world, "fork", "add module", {"mod.py": "def f():\n    return 1\n"})
    world.commit(
        "module upstream, grown", {"mod.py": "import os\n\ndef f():\n    return 1\n\ndef g():\n    return 2\n"}
    )
    assert judge(world, c).verdict is Verdict.REPRESENTED


# -- a stored stack, cumulatively ---------------------------------------------------------------


def _stack(world: GitRepo, repo: git.Repository, *commits: str):
    patches = world.path / "patches"
    store.init(str(patches), "s", "owner/repo", "main")
    stack = importing.commits(repo, store.load(str(patches), "s"), list(commits)).stack
    store.save(stack)
    return store.load(str(patches), "s")


def test_stack_dependent_patches_and_earlier_needed_ones(world: GitRepo) -> None:
    p1 = on(world, "fork", "add x", {"f.txt": text(edited(LINES, l10=["line 10", "x = 1"]))})
    p2 = on(world, "fork", "tune x", {"f.txt": text(edited(LINES, l10=["line 10", "x = 2"]))})
    p3 = on(world, "fork", "use x", {"f.txt": text(edited(LINES, l10=["line 10", "x = 2"], l30="print(x)"))})
    repo = git.Repository(str(world.path))
    stack = _stack(world, repo, p1, p2, p3)
    # The base squashed p1+p2 (so p1's own line "x = 1" is not there) but not p3.
    squash = world.commit("x, squashed", {"f.txt": text(edited(LINES, l10=["line 10", "x = 2"]))})
    run = check_stack(repo, stack, "main")
    v = {o.name[:4]: o for o in run.outcomes}
    assert v["0002"].verdict is Verdict.REPRESENTED and v["0002"].represented_by == [squash]
    assert v["0001"].verdict is Verdict.REPRESENTED  # caught through p2, as StGit --merged does
    assert v["0003"].verdict is Verdict.UNIQUE
    assert run.merge_base == world.sha("fork~3")


def test_stack_cherry_picked_from_reachable_is_identity_evidence(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l10="x = 2"))})
    repo = git.Repository(str(world.path))
    stack = _stack(world, repo, c)
    world.git("merge", "-q", "--no-edit", "fork")
    o = check_stack(repo, stack, "main").outcomes[0]
    assert o.verdict is Verdict.REPRESENTED
    assert kinds(o)["empty"][0].data["empty"] is True
    assert kinds(o)["identity"][0].data["match"]
    assert "reachable from the base" in kinds(o)["identity"][0].detail


# -- the command line ------------------------------------------------------------------------------


def test_cli_many_commits_json_shape_and_exit_code(world: GitRepo) -> None:
    commits = []
    for i in range(1, 31):
        commits.append(on(world, "fork", f"change {i}", {f"m{i}.txt": f"module {i}\n"}))
    for sha in commits[:10]:
        world.git("cherry-pick", sha)
    proc = run_ggstack("check", "--onto", "main", "--commits", *commits, "--json", cwd=world.path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    # ggstack's own indented writer prints what json.dumps(indent=2) would, character for character
    assert proc.stdout == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    assert data["base"] == world.sha("main") and data["merge_base"]
    assert len(data["patches"]) == 30
    for p in data["patches"]:
        assert {
            "name",
            "source_commit",
            "verdict",
            "represented_by",
            "represented_fraction",
            "evidence",
            "remaining_diff",
            "recommendation",
        } <= set(p)
        assert all({"kind", "detail"} <= set(e) for e in p["evidence"])
    verdicts = [p["verdict"] for p in data["patches"]]
    assert verdicts == ["represented"] * 10 + ["unique"] * 20


def test_cli_table_and_exit_one_on_partial(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, **THREE_HUNKS))})
    world.commit(
        "pick without the middle hunk",
        {"f.txt": text(edited(LINES, l5="line five", l35=["line 35", "extra after 35"]))},
    )
    proc = run_ggstack("check", "--onto", "main", "--commits", c, cwd=world.path)
    assert proc.returncode == 1, proc.stderr
    assert "partial" in proc.stdout and "open PR" in proc.stdout
    bad = run_ggstack("check", "--onto", "main", "--commits", "nope", cwd=world.path)
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_patch_ids_are_cached_by_commit_so_a_moved_base_costs_only_the_new_commits(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l10="x = 2"))})
    for i in range(5):
        world.commit(f"upstream {i}", {"f.txt": text(edited(LINES, l30=f"upstream {i}"))})
    repo = git.Repository(str(world.path))
    check_commits(repo, [c], "main")
    cache = world.path / ".git" / "ggstack" / "cache" / "patch-ids-v1.json"
    first = json.loads(cache.read_text())
    assert set(world.git("rev-list", "main", "^" + c).split()) <= set(first)
    moved = world.commit("upstream moves on", {"f.txt": text(edited(LINES, l30="moved"))})
    check_commits(repo, [c], "main")
    second = json.loads(cache.read_text())
    assert set(second) - set(first) == {moved}


def test_cli_check_stack(world: GitRepo) -> None:
    c1 = on(world, "fork", "fix one", {"f.txt": text(edited(LINES, l10="x = 2"))})
    c2 = on(world, "fork", "fix two", {"f.txt": text(edited(LINES, l10="x = 2", l30="y = 3"))})
    repo = git.Repository(str(world.path))
    _stack(world, repo, c1, c2)
    world.git("cherry-pick", c1)
    proc = run_ggstack(
        "--patches", str(world.path / "patches"), "check", "s", "--onto", "main", "--json", cwd=world.path
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [p["verdict"] for p in data["patches"]] == ["represented", "unique"]
    assert data["patches"][0]["represented_by"] == [world.sha("main")]
    table = run_ggstack("--patches", str(world.path / "patches"), "check", "s", "--onto", "main", cwd=world.path)
    assert table.returncode == 0 and "represented" in table.stdout and "do not open" in table.stdout


def test_commit_that_is_itself_in_the_base(world: GitRepo) -> None:
    c = on(world, "fork", "fix", {"f.txt": text(edited(LINES, l10="x = 2"))})
    world.commit("upstream", {"other.txt": "u\n"})
    world.git("merge", "-q", "--no-edit", "fork")
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED and o.represented_by == [c]
    assert "the commit itself is reachable from the base" in kinds(o)["identity"][0].detail
    # ... and once reverted on top, it is needed again.
    world.git("revert", "--no-edit", c)
    o = judge(world, c)
    assert o.verdict is Verdict.UNIQUE and o.recommendation is Recommendation.OPEN_PR


def test_an_empty_commit_needs_nothing(world: GitRepo) -> None:
    world.git("checkout", "-q", "fork")
    c = world.commit("nothing")
    world.git("checkout", "-q", "main")
    o = judge(world, c)
    assert o.verdict is Verdict.REPRESENTED and o.recommendation is Recommendation.DO_NOT_OPEN
    assert "changes nothing" in kinds(o)["content"][-1].detail
    assert rule(o) == "changes nothing"


def test_check_after_apply_keeps_the_apply_facts(world: GitRepo) -> None:
    from ggstack import replay

    c1 = on(world, "fork", "fix one", {"f.txt": text(edited(LINES, l10="x = 2"))})
    c2 = on(world, "fork", "fix two", {"f.txt": text(edited(LINES, l10="x = 2", l30="y = 3"))})
    repo = git.Repository(str(world.path))
    stack = _stack(world, repo, c1, c2)
    world.git("cherry-pick", c1)
    applied = replay.apply(repo, stack, "main", write=False)
    before = [(o.applied, o.commit) for o in applied.outcomes]
    run = check_stack(repo, stack, "main", run=applied)
    assert run.stages["check"] == "ok" and run.stages["apply"] == "ok"
    assert run is not applied and "check" not in applied.stages  # a stage returns a new Run: apply's stays apply's
    assert [(o.applied, o.commit) for o in run.outcomes] == before
    assert [o.verdict for o in run.outcomes] == [Verdict.REPRESENTED, Verdict.UNIQUE]


def test_reverse_apply_in_turn_carries_on_from_what_applied(tmp_path) -> None:
    """StGit's cumulative reverse on one index: a patch that does not reverse-apply leaves the
    tree as the later ones left it, and the next one is reverse-applied to that."""
    r = GitRepo.init(tmp_path / "r")
    r.commit("root", {"a.txt": "one\n", "b.txt": "x\n"})
    r.commit("a", {"a.txt": "two\n"})
    first = r.git("diff", "HEAD~1", "HEAD")
    r.commit("a again", {"a.txt": "three\n"})
    second = r.git("diff", "HEAD~1", "HEAD")
    r.commit("b", {"b.txt": "y\n"})
    third = r.git("diff", "HEAD~1", "HEAD")
    repo = git.Repository(str(r.path))
    # later patches first: b; b a second time (does not apply: b is out already); "a again";
    # then a, which applies only once "a again" is out
    patches = [(p + "\n").encode() for p in (third, third, second, first)]
    trees = repo.reverse_apply_in_turn(r.tree("HEAD"), patches)
    assert trees == [r.tree("HEAD~1"), None, r.tree("HEAD~2"), r.tree("HEAD~3")]


def test_stack_run_folded_into_bigger_work_found_after_its_longest_run_failed(world: GitRepo) -> None:
    """The whole branch (0001-0004) is not in the base, the run 0001-0003 is, folded into one bigger
    commit; 0004 is not (the base changed its line: no line of it is the bigger commit's)."""
    x1 = edited(LINES, l10=["line 10", "x = 1"])
    p1 = on(world, "fork", "add x", {"f.txt": text(x1)})
    x2 = edited(LINES, l10=["line 10", "x = 2"], l20=["line 20", "y = 3"])
    p2 = on(world, "fork", "tune x, add y", {"f.txt": text(x2)})
    x3 = edited(LINES, l10=["line 10", "x = 2"], l20=["line 20", "y = 3"], l30="print(x, y)")
    p3 = on(world, "fork", "print them", {"f.txt": text(x3)})
    x4 = edited(LINES, l10=["line 10", "x = 2"], l20=["line 20", "y = 3"], l30="print(x, y)", l35="fork 35")
    p4 = on(world, "fork", "fork's own 35", {"f.txt": text(x4)})
    repo = git.Repository(str(world.path))
    stack = _stack(world, repo, p1, p2, p3, p4)
    big = edited(LINES, l10=["line 10", "x = 2"], l20=["line 20", "y = 3"], l30="print(x, y)", l35="upstream 35")
    rework = world.commit("rework", {"f.txt": text(big), "other.txt": "other work\n"}, author=OTHER)
    run = check_stack(repo, stack, "main")
    v = {o.name[:4]: o for o in run.outcomes}
    for name in ("0001", "0002", "0003"):
        assert v[name].verdict is Verdict.REPRESENTED and v[name].represented_by == [rework], name
    assert v["0001"].group == [v["0001"].name, v["0002"].name, v["0003"].name]
    assert f"together are in the base as {rework[:10]}" in kinds(v["0001"])["group"][0].detail
    assert v["0004"].verdict is not Verdict.REPRESENTED
