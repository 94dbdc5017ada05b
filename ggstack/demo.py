"""``ggstack demo``: why ggstack exists, end to end, on a miniature vLLM fork from ``ggstack.demofork`` (fixed ids and
dates). The same code regenerates ``patches/gg-clean`` (``--export``), so the two never drift apart."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from ggstack import git, importing, state
from ggstack.demofork import history
from ggstack.errors import UserError
from ggstack.model import Progress, Run, Stack
from ggstack.series import config, store
from ggstack.threads import cores

STACK = "gg-clean"
REPO_SLUG = "voipmonitor/vllm"
BASES = {"current": "dev/gilded-gnosis", "before": "dev/before"}

GG_CLEAN_CONFIG = config.initial_toml(  # gg-clean's stack.toml
    REPO_SLUG,
    BASES["current"],
    cpu="{python} -m pytest -q -p no:cacheprovider -m 'not gpu' {tests}",
    gpu="{python} -m pytest -q -p no:cacheprovider -m gpu {tests}",
    timeout=300,
)


@dataclass(frozen=True)
class Fork:
    repo: git.Repository
    commits: dict[str, str]  # history key -> sha


def build_fork(path: str) -> Fork:
    """The miniature fork as a bare repository at ``path``, from pure data."""
    repo = git.Repository.init(path, bare=True)
    blobs = _blobs(repo)
    committer = _ident(history.COMMITTER)
    trees: dict[str, str] = {}
    commits: dict[str, str] = {}
    for c in history.HISTORY:
        parent_tree = trees[c.parents[0]] if c.parents else None
        changes = {path: (("100644", blobs[name]) if name else None) for path, name in c.files.items()}
        tree = repo.edit_tree(parent_tree, changes)
        author = _ident(c.author)
        trees[c.key] = tree
        commits[c.key] = repo.commit_tree(
            tree,
            [commits[p] for p in c.parents],
            re.sub(r"\{([a-z0-9-]+)\}", lambda m: commits[m.group(1)], c.message),
            author=(author[0], author[1], c.date),
            committer=(committer[0], committer[1], c.date),
        )
    repo.update_refs([(ref, commits[key], None) for ref, key in history.REFS.items()], "ggstack demo: build the fork")
    return Fork(repo, commits)


def _blobs(repo: git.Repository) -> dict[str, str]:
    """Every file snapshot the history uses, written once: its name -> its blob."""
    names = sorted({name for c in history.HISTORY for name in c.files.values() if name})
    return dict(zip(names, repo.hash_blobs([history.snapshot(n) for n in names])))


def history_subject(key: str) -> str:
    return next(c.message for c in history.HISTORY if c.key == key).split("\n", 1)[0]


def _ident(ident: str) -> tuple[str, str]:
    m = re.match(r"^(.*?) <(.*)>$", ident)
    assert m, ident
    return m.group(1), m.group(2)


def export_stack(fork: Fork, patches_dir: str) -> Stack:
    """``patches/gg-clean`` as ``ggstack import`` produces it from the fork."""
    path = store.stack_dir(patches_dir, STACK)
    if os.path.exists(path):
        shutil.rmtree(path)
    store.init(patches_dir, STACK, REPO_SLUG, BASES["current"])
    state.write_atomic(os.path.join(path, config.STACK_TOML), GG_CLEAN_CONFIG.encode())
    stack = store.load(patches_dir, STACK)
    for imp in history.IMPORTS:
        stack = importing.commits(
            fork.repo,
            stack,
            [fork.commits[imp.commit]],
            original_pr=imp.original_pr,
            only=imp.only,
            dropped=imp.dropped,
        ).stack
        store.save(stack)
        stack = store.load(patches_dir, STACK)
    return stack


def build_and_run(
    directory: str | None,
    base: str = "current",
    *,
    gpu: str = "auto",
    progress: Progress | None = None,
    stage: Callable[[str, int], AbstractContextManager[Progress | None]] | None = None,
) -> tuple[Run, str]:
    """apply → check → test → PR plan on ``base``, ``stage`` entered around each (else ``progress``
    hears them all); the Run and the directory of ``fork.git``, ``remote.git`` (the forge) and ``patches/``."""
    from ggstack import pr, replay
    from ggstack.check.stack import check_stack
    from ggstack.forge.none import NoForge
    from ggstack.testing import stage as test_stage

    workdir = os.path.abspath(directory or tempfile.mkdtemp(prefix="ggstack-demo-"))
    try:
        os.makedirs(workdir, exist_ok=True)
    except OSError as e:  # DIRECTORY, or a folder above it, is a file
        raise UserError(f"cannot create the demo directory: {e.strerror}", path=workdir) from None
    for old in ("fork.git", "remote.git", "patches"):
        shutil.rmtree(os.path.join(workdir, old), ignore_errors=True)
    fork = build_fork(os.path.join(workdir, "fork.git"))
    remote = git.Repository.init(os.path.join(workdir, "remote.git"), bare=True)
    fork.repo.add_remote("origin", remote.git_dir)
    stack = export_stack(fork, os.path.join(workdir, "patches"))
    base_ref = BASES[base]

    def within(name: str) -> AbstractContextManager[Progress | None]:
        return stage(name, len(stack.patches)) if stage else contextlib.nullcontext(progress)

    with within("apply") as said:
        result = replay.apply(fork.repo, stack, base_ref, progress=said)
    with within("check") as said:
        result = check_stack(fork.repo, stack, base_ref, run=result, progress=said)
    with within("test") as said:
        # The demo's tests are known to run side by side (file rendezvous, no fixed ports).
        result = test_stage.test(fork.repo, stack, result, gpu=gpu, progress=said, jobs=min(4, cores()))
    with within("pr") as said:
        result = pr.pr(fork.repo, stack, result, dry_run=True, client=NoForge())
    return result, workdir


NEXT_STEPS = """\
Next, on your own fork (upstream's branch origin/main, your carry patches on the branch my-fork):
  pipx install .                               # from this checkout: ggstack on PATH outside this venv too
  cd path/to/your-fork && git fetch origin
  ggstack init my-fork --repo-slug you/your-fork --base main
  ggstack import my-fork origin/main..my-fork  # the branch's own commits become patches/my-fork/
  ggstack check my-fork --onto origin/main     # which of them upstream already has, and why
  git add patches && git commit -m "patches: the my-fork stack"
README.md's "Quick start" has the daily loop; docs/ has a page for every command."""
