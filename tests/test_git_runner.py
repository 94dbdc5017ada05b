"""Every git ggstack starts runs in the repository it was given, whatever an enclosing git exported."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import git


def test_an_enclosing_gits_repository_index_and_objects_are_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n"})
    head = fork.commit("change", {"a.txt": "b\n"})
    other = GitRepo.init(tmp_path / "other")
    other.commit("elsewhere", {"x.txt": "x\n"})
    index = (tmp_path / "fork" / ".git" / "index").read_bytes()
    other_objects = other.git("count-objects", "-v")
    repo = git.Repository(str(fork.path))
    # What a hook of another repository would export (a pre-commit hook's GIT_INDEX_FILE is the user's index).
    monkeypatch.setenv("GIT_DIR", str(other.path / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other.path))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "fork" / ".git" / "index"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(other.path / ".git" / "objects"))

    assert repo.resolve("HEAD") == head
    assert list(repo.patch_ids_of_commits([(head, None)])) == [head]  # the popen path
    blob = repo.hash_blob(b"new\n")
    tree = repo.edit_tree(repo.resolve("HEAD", "tree"), {"n.txt": ("100644", blob)})
    repo.add_worktree(str(tmp_path / "wt"), head)

    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    monkeypatch.delenv("GIT_INDEX_FILE")
    monkeypatch.delenv("GIT_OBJECT_DIRECTORY")
    assert fork.git("cat-file", "-t", tree) == "tree"
    assert (tmp_path / "wt" / "a.txt").read_text() == "b\n"
    assert (tmp_path / "fork" / ".git" / "index").read_bytes() == index
    assert other.git("count-objects", "-v") == other_objects


def test_the_repository_is_found_as_gitpython_finds_it(tmp_path: Path) -> None:
    """rev-parse finds the checkout and a bare repository (no GitPython import); where it
    declines (a path inside the git dir, a path through a link) GitPython's discovery does,
    and for the checkout, a subdirectory, a linked worktree and a bare one the two agree."""
    from ggstack.git import repository

    fork = GitRepo.init(tmp_path / "fork")
    head = fork.commit("root", {"sub/a.txt": "a\n"})
    fork.git("worktree", "add", "-q", str(tmp_path / "linked"), head)
    GitRepo.init(tmp_path / "bare.git", bare=True)
    (tmp_path / "link").symlink_to(tmp_path / "fork")
    subprocess.run(["git", "init", "-q", "--bare", "--object-format=sha256", str(tmp_path / "bare256.git")], check=True)
    for path in (fork.path, fork.path / "sub", tmp_path / "linked", tmp_path / "bare.git", tmp_path / "bare256.git"):
        found = repository._discover(str(path))
        assert found is not None and found == repository._discover_with_gitpython(str(path))
        repo = git.Repository(str(path))
        assert (repo.git_dir, repo.common_dir, repo.worktree, repo.object_format) == found
    assert repository._discover(str(tmp_path / "bare.git")) == (str(tmp_path / "bare.git"),) * 2 + (None, "sha1")
    assert repository._discover(str(tmp_path / "bare256.git"))[3] == "sha256"
    for path in (tmp_path / "bare.git" / "objects", fork.path / ".git", tmp_path / "link"):
        assert repository._discover(str(path)) is None
        repo = git.Repository(str(path))
        assert repo.worktree is None if path.parent.name == "bare.git" else repo.resolve("HEAD") == head


def test_many_commits_are_read_in_one_request_and_what_is_absent_is_left_out(tmp_path: Path) -> None:
    fork = GitRepo.init(tmp_path / "fork")
    first = fork.commit("first\n\nwith a body", {"a.txt": "a\n"})
    second = fork.commit("second", {"a.txt": "b\n"})
    tree = fork.git("rev-parse", f"{second}^{{tree}}")
    repo = git.Repository(str(fork.path))
    found = repo.read_commits([second, first, "0" * 40, tree, second, ""])
    assert list(found) == [second, first]  # the absent id, the tree and the empty name are left out
    assert found == {sha: repo.read_commit(sha) for sha in (second, first)}
    assert found[second].parents == (first,) and found[first].message.startswith("first\n\nwith a body")


def test_trailers_are_read_the_same_wherever_the_messages_are_written(tmp_path: Path, monkeypatch) -> None:
    """In memory where there is a /dev/shm, in TMPDIR when it is set, else in the usual place."""
    from ggstack.git import trailers

    messages = ["fix: a\n\nbody\n\nStack-Patch-Id: I1\nCo-authored-by: B <b@x>\n", "no trailers\n", "t\n\nA: 1\n"]
    want = [[("Stack-Patch-Id", "I1"), ("Co-authored-by", "B <b@x>")], [], [("A", "1")]]
    monkeypatch.delenv("TMPDIR", raising=False)
    assert git.parse_trailers(messages) == want
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(trailers.tempfile, "tempdir", None)  # read TMPDIR again
    assert git.parse_trailers(messages) == want and list((tmp_path / "tmp").iterdir()) == []
    monkeypatch.delenv("TMPDIR")
    monkeypatch.setattr(trailers, "_MEMORY", str(tmp_path / "not-a-directory"))
    (tmp_path / "not-a-directory").write_text("")
    assert git.parse_trailers(messages) == want
    assert trailers.add_trailers("s\n\nbody\n\nA: 1\n", [("B", "2")]) == "s\n\nbody\n\nA: 1\nB: 2\n"


def test_a_users_log_show_signature_does_not_change_what_ggstack_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``log.showSignature = true`` makes every ``git log`` print gpg's verdict on a signed commit
    before the commit: ggstack's reads of the range must not see it."""
    fork = GitRepo.init(tmp_path / "fork")
    root = fork.commit("root", {"a.txt": "a\n"})
    tree = fork.git("rev-parse", "HEAD^{tree}")
    signed = (
        f"tree {tree}\nparent {root}\nauthor A <a@example.org> 1700000000 +0000\n"
        "committer A <a@example.org> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n"
        " iQEzBAABCAAdFiEEnotarealsignature\n -----END PGP SIGNATURE-----\n\nsigned change\n"
    )
    sha = fork.git("hash-object", "-t", "commit", "-w", "--stdin", input=signed)
    config = tmp_path / "signer.gitconfig"
    config.write_text("[log]\n\tshowSignature = true\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")  # the caller's own overrides are kept
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.name")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "Caller")
    repo = git.Repository(str(fork.path))

    assert repo.out("config", "log.showSignature").strip() == "false"
    assert repo.out("config", "user.name").strip() == "Caller"
    assert [(c, m.strip()) for c, _, m in repo.range_messages([sha], [root])] == [(sha, "signed change")]


def test_a_users_hooks_are_not_told_of_ggstacks_scratch_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``post-index-change`` runs for every index git writes; ggstack's scratch indexes are not
    the user's, so a user's hooks (``core.hooksPath``) never hear of them."""
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n"})
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    marker = tmp_path / "ran"
    hook = hooks / "post-index-change"
    hook.write_text(f"#!/bin/sh\necho ran >> '{marker}'\n")
    hook.chmod(0o755)
    config = tmp_path / "hooked.gitconfig"
    config.write_text(f"[core]\n\thooksPath = {hooks}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    fork.git("update-index", "--refresh", check=False)
    fork.git("read-tree", "HEAD")  # the user's own index: their hook runs
    assert marker.exists()
    marker.unlink()

    repo = git.Repository(str(fork.path))
    tree = repo.edit_tree(repo.resolve("HEAD", "tree"), {"n.txt": ("100644", repo.hash_blob(b"n\n"))})

    assert repo.out("ls-tree", "--name-only", tree).split() == ["a.txt", "n.txt"]
    assert not marker.exists()


def test_a_name_with_a_line_end_does_not_put_the_shared_reader_out_of_step(tmp_path: Path) -> None:
    """git allows a line end in a path; asked of the one long-lived ``cat-file --batch`` it
    would be two requests, and every later read would get the answer before its own."""
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n", "new\nline": "odd\n"})
    repo = git.Repository(str(fork.path))
    blob = fork.git("rev-parse", "HEAD:a.txt")

    odd = repo.cat_file_batch(["HEAD:new\nline", "HEAD:a.txt"])

    assert odd[0] is None and odd[1] is not None and odd[1][0] == blob
    after = repo.cat_file_batch(["HEAD:a.txt"])
    assert after[0] is not None and after[0][0] == blob and after[0][2] == b"a\n"


def test_many_merges_in_one_merge_tree_are_the_merges_one_by_one(tmp_path: Path) -> None:
    """``merge_many`` (one ``merge-tree --stdin``) gives, pair for pair, what ``merge_trees``
    gives: the tree, clean or not, the conflicted paths and git's messages."""
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"f.txt": "a\nb\nc\n", "g.txt": "1\n"})
    fork.git("checkout", "-q", "-b", "side")
    side = fork.commit("side", {"f.txt": "a\nX\nc\n", "h.txt": "new\n"})
    more = fork.commit("more on side", {"g.txt": "2\n"})
    fork.git("checkout", "-q", "main")
    main = fork.commit("main", {"f.txt": "a\nY\nc\n", "g.txt": None})
    repo = git.Repository(str(fork.path))
    pairs = [(main, side), (side, more), (main, more), (more, side), (main, side)]
    one_by_one = [repo.merge_trees(ours, theirs) for ours, theirs in pairs]
    assert repo.merge_many(pairs) == one_by_one
    assert [m.clean for m in one_by_one] == [False, True, False, True, False]
    assert one_by_one[0].conflicted_paths == ("f.txt",) and "CONFLICT (content)" in one_by_one[0].messages
    assert set(one_by_one[2].conflicted_paths) == {"f.txt", "g.txt"}
    assert repo.merge_many([]) == []
    # Many merges are dealt to two merge-tree processes: still in order, pair for pair.
    assert repo.merge_many(pairs * 4) == one_by_one * 4


def test_only_the_runner_starts_git() -> None:
    """A habit check on the sources: every process ggstack starts is in one of three modules
    (git's runner; the tests ``test`` runs and its probes; ``secrets`` starting ggstack again),
    and only the runner names git, so one environment policy covers every git."""
    import ast

    import ggstack

    root = Path(ggstack.__file__).parent
    starters = {"run", "Popen", "call", "check_call", "check_output", "execve", "execv", "spawnv", "system"}
    starting: dict[str, list[str]] = {}
    for source in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            func = node.func if isinstance(node, ast.Call) else None
            if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
                continue
            if func.value.id in ("subprocess", "os") and func.attr in starters:
                argv = node.args[1 if func.attr.startswith(("exec", "spawn")) else 0] if node.args else None
                first = argv.elts[0] if isinstance(argv, ast.List) and argv.elts else None
                name = first.value if isinstance(first, ast.Constant) else "?"
                starting.setdefault(str(source.relative_to(root)), []).append(str(name))
    assert set(starting) == {"git/runner.py", "testing/processes.py", "secrets.py"}, starting
    assert not [m for m, names in starting.items() if m != "git/runner.py" and "git" in names]


def test_merges_asked_of_one_merge_tree_are_those_of_a_process_each(tmp_path: Path) -> None:
    """The long-lived ``merge-tree --stdin`` answers each merge as its own process would: clean
    ones, an auto-merge with its message, conflicts with their paths and messages, in any order."""
    g = GitRepo.init(tmp_path / "fork")
    root = g.commit("root", {"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n", "b.txt": "b\n"})
    ours = g.commit("ours", {"a.txt": "one\n2\n3\n4\n5\n6\n7\n8\n", "b.txt": "ours\n"})
    g.git("checkout", "-q", "-b", "other", root)
    theirs = g.commit("theirs", {"a.txt": "1\n2\n3\n4\n5\n6\n7\neight\n", "b.txt": "theirs\n"})
    g.git("checkout", "-q", "-b", "third", root)
    third = g.commit("third", {"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "c.txt": "c\n"})
    repo = git.Repository(str(g.path))
    pairs = [(ours, theirs), (ours, third), (ours, ours), (theirs, ours), (third, theirs), (ours, theirs)]
    merged = [repo.merge_trees(a, b) for a, b in pairs]
    assert merged == [repo._merge_once(a, b) for a, b in pairs]
    assert [m.clean for m in merged] == [False, True, True, False, False, False]
    assert "b.txt" in merged[0].conflicted_paths and "CONFLICT" in merged[0].messages
    assert "Auto-merging a.txt" in merged[1].messages
    assert repo._merger is not None  # every one was asked of the long-lived process


def test_outside_any_repository_git_says_so_and_gitpython_is_not_imported(tmp_path: Path) -> None:
    """Outside a repository, git's own "not a git repository" is the answer (init makes its stack
    in ``./patches``; every other command says so), without importing GitPython (a tenth of a
    second) to hear it again."""
    import sys

    outside = tmp_path / "outside"
    outside.mkdir()
    probe = (
        "import sys\n"
        "from ggstack import git\n"
        "from ggstack.commands.context import Ctx\n"
        "from ggstack.errors import UserError\n"
        "try:\n"
        "    git.Repository('.')\n"
        "except UserError as e:\n"
        "    print(e)\n"
        "try:\n"
        "    Ctx('.', None).patches_dir\n"
        "except UserError as e:\n"
        "    print(e)\n"
        "ctx = Ctx('.', None)\n"
        "ctx.anywhere = True  # init\n"
        "print(ctx.patches_dir)\n"
        "print('git' in sys.modules)\n"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(Path(git.__file__).parents[2]), "HOME": str(tmp_path)}
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path)  # whatever holds the test's tmp dir
    proc = subprocess.run([sys.executable, "-c", probe], cwd=outside, env=env, capture_output=True, text=True)

    assert proc.returncode == 0, proc.stderr
    said, told, patches, imported = proc.stdout.splitlines()
    assert said == ".: not a git repository (use --repo to point at the fork checkout)"
    assert told.startswith(f"{outside}: not a git repository (run ggstack inside your fork's checkout")
    assert patches == str(outside / "patches")
    assert imported == "False"


def test_a_commit_resolved_through_the_long_lived_reader_is_rev_parses_commit(tmp_path: Path) -> None:
    """A base is resolved through the persistent cat-file (no process of its own), as ``rev-parse
    --verify NAME^{commit}`` resolves it: branches, tags peeled, short ids, ancestry, reflogs;
    and what names no one commit (a range, a negation, a path, nothing) resolves to nothing."""
    from ggstack.git.refs import Refs

    fork = GitRepo.init(tmp_path / "fork")
    first = fork.commit("root", {"a.txt": "a\n"})
    fork.git("tag", "-a", "-m", "annotated", "v1")
    fork.git("tag", "light")
    fork.commit("second", {"a.txt": "b\n"})
    repo = git.Repository(str(fork.path))
    names = ["main", "HEAD", "HEAD~1", "main^", "v1", "light", "v1^{}", first[:7], "main@{0}", ":/root"]
    names += ["nosuch", "main..HEAD", "^main", "HEAD:a.txt", "HEAD^{tree}", "-x", "a b", "", "main\nHEAD"]
    for name in names:
        assert repo.try_resolve(name) == Refs.try_resolve(repo, name), name
    assert repo.try_resolve("v1") == first and repo.try_resolve("nosuch") is None


def test_a_bad_line_in_the_users_config_is_said_not_read_as_an_unknown_ref(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``core.commentChar = ;`` (an empty value: ';' starts a comment) makes every git that reads
    it fail; `check --onto main` said "unknown base ref 'main'", git's message went unseen."""
    fork = GitRepo.init(tmp_path / "fork")
    fork.commit("root", {"a.txt": "a\n"})
    config = tmp_path / "broken.gitconfig"
    config.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    repo = git.Repository(str(fork.path))  # made before the config broke: every later git reads it
    config.write_text("[core]\n\tcommentChar = ;\n")
    with pytest.raises(git.GitFailed, match=r"bad config variable 'core.commentchar' in file .*broken.gitconfig"):
        repo.try_resolve("main")
    with pytest.raises(git.GitFailed, match=r"bad config variable"):  # not "no": any check=False caller
        repo.is_ancestor("main", "main")
    with pytest.raises(git.GitFailed, match=r"bad config variable"):  # nor a repository
        git.Repository(str(fork.path))
    # A config git cannot parse at all failed in GitPython's import, with a traceback.
    config.write_text("[core\n\tbare = x\n")
    proc = run_ggstack("--repo", str(fork.path), "check", "--onto", "main", "--commits", "main", cwd=tmp_path)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
    assert f"bad config line 1 in file {config}" in proc.stderr
