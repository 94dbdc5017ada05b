"""The bot in two stages: the untrusted one (``sync --no-forge``, ``test --shard``) runs patch code, refuses where a
credential is in reach, hands on a Run and bundle; the privileged one (``pr --run RUN --bundle FILE``) holds the token,
runs none, takes only commits it replays from the stack: test results only choose among them (docs/bot.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from ggstack import git, replay, secrets, state
from ggstack.branches import branch_refs
from ggstack.errors import UserError
from ggstack.model import Applied, Outcome, Run, Stack

BUNDLE_REFS = "refs/ggstack/run/"  # the names the commits carry in a bundle (never written as refs)
_BASE_NAME = BUNDLE_REFS + "base"


# -- the untrusted stage ------------------------------------------------------------------------


def write_bundle(repo: git.Repository, run: Run, path: str) -> str:
    """The Run's commits as a git bundle on the Run's base (which the privileged stage's checkout has)."""
    tips = {_BASE_NAME: run.base}
    for o in run.outcomes:
        if o.applied is Applied.APPLIED and o.commit:
            tips[BUNDLE_REFS + o.name] = o.commit
    data = repo.bundle_bytes(tips, [run.base])
    try:
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        state.write_atomic(path, data)
    except OSError as e:
        raise UserError(f"--bundle: cannot write it: {e.strerror}", path=path) from None
    return path


def refuse_credentials(repo: git.Repository, command: str, env: Mapping[str, str] | None = None) -> None:
    """A UserError naming (never showing) each credential in reach of the stage that runs patch code:
    in the environment (its parent's too: a test can read that one in /proc), a git config, a file under HOME."""
    env = os.environ if env is None else env
    found = [f"the environment: {name}" for name in secrets.reachable_credentials(env)]
    found += [f"git config {origin}: {key}" for origin, key in repo.credential_settings()]
    found += [f"the file {path}" for path in secrets.credential_files(env)]
    if found:
        shown = "; ".join(found[:12]) + (f"; and {len(found) - 12} more" if len(found) > 12 else "")
        raise UserError(
            f"{command} runs the patches' code and must hold no credential, but these are in reach of it: "
            f"{shown}. Give the token only to the stage that runs no patch code (`ggstack pr --run RUN "
            f"--bundle FILE`); check out with persist-credentials: false (docs/bot.md)"
        )


# -- the privileged stage -------------------------------------------------------------------------


def receive(repo: git.Repository, stack: Stack, run: Run, *, bundle: str | None, run_path: str) -> Run:
    """The Run, its bundle's commits read in (objects only) and each commit checked (``verify``)."""
    if bundle is not None:
        try:
            named = repo.unbundle(os.path.abspath(bundle))  # git runs in the repository, not here
        except git.GitFailed as e:
            raise UserError(f"--bundle: not a bundle git can read here: {e}", path=bundle) from None
        if named.get(_BASE_NAME) not in (None, run.base):
            raise UserError(
                f"the bundle stands on {named[_BASE_NAME][:12]}, the Run on {run.base[:12]}: "
                "they are not from the same run",
                path=bundle,
            )
    verify(repo, stack, run, run_path=run_path)
    return run


def verify(repo: git.Repository, stack: Stack, run: Run, *, run_path: str) -> None:
    """Refuse (exit 2) a Run that is not this stack's on its base, or whose commits are not the stack's
    own patches replayed there: the replay is done again here (plumbing only, no patch code runs)."""

    def refuse(why: str) -> UserError:
        return UserError(f"the Run does not match stack {stack.name!r}: {why}; nothing was written", path=run_path)

    _refuse_another_stack(repo, stack, run, refuse)
    own = replay.apply(repo, stack, run.base, write=False)
    refs = branch_refs(stack)
    previous = run.base
    for o, mine, ref in zip(run.outcomes, own.outcomes, refs, strict=True):
        _refuse_another_replay(o, mine, ref, refuse)
        if o.applied is Applied.APPLIED:
            assert o.commit is not None and mine.commit is not None
            _same_commit(repo, o, mine.commit, previous, refuse)
            previous = o.commit


def _refuse_another_stack(repo: git.Repository, stack: Stack, run: Run, refuse: Callable[[str], UserError]) -> None:
    if run.stack != stack.name:
        raise refuse(f"it is the Run of stack {run.stack!r}")
    names = [(o.name, o.stack_patch_id) for o in run.outcomes]
    wanted = [(p.name, p.provenance.stack_patch_id) for p in stack.patches]
    if names != wanted:
        raise refuse("its patches are not the stack's, in the stack's order (was the series changed since?)")
    if repo.read_commit(run.base) is None or repo.try_resolve(run.base) != run.base:
        raise refuse(f"its base {run.base[:12]} is not a commit here (fetch it)")


def _refuse_another_replay(o: Outcome, mine: Outcome, ref: str, refuse: Callable[[str], UserError]) -> None:
    if o.branch not in (None, ref):
        raise refuse(f"{o.name}: its branch is {o.branch!r}, the stack's is {ref!r}")
    if o.applied is not mine.applied:
        raise refuse(f"{o.name}: the Run says {_said(o)}, replayed here it is {_said(mine)}")
    if o.applied is not Applied.APPLIED and o.commit is not None:
        raise refuse(f"{o.name}: {_said(o)}, yet it names commit {o.commit[:12]}")


def _said(o: Outcome) -> str:
    return o.applied.value if o.applied else "not applied"


def _same_commit(
    repo: git.Repository, o: Outcome, mine: str, previous: str, refuse: Callable[[str], UserError]
) -> None:
    """``o.commit`` is the commit replayed here (``mine``) but for its committer, on ``previous``."""
    theirs = repo.read_commit(o.commit or "")
    if theirs is None:
        raise refuse(f"{o.name}: its commit {(o.commit or '')[:12]} is not here (pass the stage's --bundle)")
    ours = repo.read_commit(mine)
    assert ours is not None
    checks = [
        ("tree", theirs.tree, ours.tree),
        ("parent", theirs.parents, (previous,)),
        ("message", theirs.message, ours.message),
        ("author", _author(theirs), _author(ours)),
    ]
    differs = next((what for what, got, expected in checks if got != expected), None)
    if differs is not None:
        raise refuse(f"{o.name}: its commit {theirs.sha[:12]} has another {differs} than the patch replayed here")
    _refuse_tests_elsewhere(o, ours.tree, refuse)


def _refuse_tests_elsewhere(o: Outcome, tree: str, refuse: Callable[[str], UserError]) -> None:
    for t in o.tests:
        if t.where == "patched" and t.tree and t.tree != tree:
            raise refuse(f"{o.name}: its {t.kind} tests ran on tree {t.tree[:12]}, not the patch's {tree[:12]}")


def _author(c: git.CommitInfo) -> tuple[str, str, str]:
    return c.author_name, c.author_email, c.author_date
