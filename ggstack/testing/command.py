"""One run of a job's test command on one of its trees, in a checkout of its own: pytest is
made to write JUnit XML with the checkout as its rootdir, whatever the command looks like."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import site
import tempfile
import time
from collections.abc import Mapping

from ggstack import git, state
from ggstack.model import Stack, TestResult
from ggstack.testing import environment, processes, results, worktrees
from ggstack.testing.plan import Job, TestTree

_TAIL_LINES = 80
_TAIL_CHARS = 8000
_FAILING = ("failed", "error", "timeout")


def run_on_tree(
    repo: git.Repository,
    stack: Stack,
    job: Job,
    tt: TestTree,
    git_config: Mapping[str, str],
    collect_only: bool = False,
) -> TestResult:
    timeout = stack.config.tests.timeout
    with (
        worktrees.checkout(repo, tt) as wt,
        tempfile.TemporaryDirectory(prefix="ggstack-test-", dir=repo.state_dir("tmp")) as tmp,
    ):
        junit, log = os.path.join(tmp, "junit.xml"), os.path.join(tmp, "output.log")
        env, imports = _env(stack, wt, tmp, junit, git_config, collect_only)
        marker = f"{os.getpid()}-{os.path.basename(wt)}"
        env[processes.RUN_MARKER] = marker
        started = time.monotonic()
        rc, timed_out = processes.run_group(job.command, wt, env, log, timeout, wt + ".pgid")
        seconds = round(time.monotonic() - started, 2)
        left = processes.sweep(lambda m: m == marker)
        output = _read_tail(log)
        cases = results.read_junit(junit)
        in_src = os.listdir(os.path.join(wt, "src")) if os.path.isdir(os.path.join(wt, "src")) else []
        outside = _imported_outside(imports, wt)
    if collect_only:  # nothing ran: pytest's exit code 5 is "none collected"
        cases = None if rc in (0, 5) else cases
        said = results.classify(
            0 if rc == 5 else rc, timed_out, cases, output, timeout=timeout, worktree=wt, in_src=in_src
        )
        said = dataclasses.replace(said, status="no-tests" if rc == 5 else said.status)
    else:
        said = results.classify(
            rc,
            timed_out,
            cases,
            output,
            timeout=timeout,
            worktree=wt,
            code_paths=job.code_paths,
            in_src=in_src,
            outside=outside,
        )
    result = TestResult(job.kind, tt.where, said.status, tree=tt.tree or "", command=job.command, seconds=seconds)
    _fill(result, said, cases, output)
    result.left_processes = left
    return result


def _env(
    stack: Stack, wt: str, tmp: str, junit: str, git_config: Mapping[str, str], collect_only: bool
) -> tuple[dict[str, str], str | None]:
    env = environment.base_env(stack)
    env["PYTHONPATH"] = wt + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # The XML and a rootdir of the worktree's own, whatever the command looks like.
    extra = f"--junitxml={shlex.quote(junit)} --rootdir={shlex.quote(wt)}" + (" --collect-only" if collect_only else "")
    env["PYTEST_ADDOPTS"] = f"{env['PYTEST_ADDOPTS']} {extra}" if env.get("PYTEST_ADDOPTS") else extra
    imports = _watch_imports(wt, tmp, env)
    scratch_home = stack.config.tests.home != "user" and "HOME" not in dict(stack.config.tests.env)
    env.update(environment.git_config_copies(tmp, git_config, home=scratch_home))
    if scratch_home:  # what `pip install --user` put in your HOME stays importable
        env.setdefault("PYTHONUSERBASE", site.getuserbase())
    return env, imports


def _read_tail(log: str) -> str:
    with open(log, "rb") as f:
        f.seek(max(0, os.path.getsize(log) - 8 * _TAIL_CHARS))  # a chatty suite can write gigabytes
        return f.read().decode("utf-8", "replace")


def _fill(result: TestResult, said: results.Classified, cases: results.Cases | None, output: str) -> None:
    if cases:
        result.passed, result.failed, result.skipped, result.errors = (
            cases.passed,
            cases.failed + list(said.import_failures),
            cases.skipped,
            [t for t in cases.errors if t not in said.import_failures],
        )
    if said.status in _FAILING:
        result.output_tail = _tail(output)
    result.reason, result.harness_error, result.explanation = said.reason, said.harness_error, said.explanation


def _tail(output: str) -> str:
    lines = output.rstrip("\n").split("\n")[-_TAIL_LINES:]
    return "\n".join(lines)[-_TAIL_CHARS:]


# A pytest plugin put on the path of a src layout's test runs: at the session's end it writes
# where each of the tree's own src/ packages was imported from. An installed copy (``pip install
# -e`` of the user's checkout) shadows the checkout under test, and then base and patched runs
# test the same code: what they say is no evidence about the tree.
_IMPORTS_PLUGIN = """\
import json, os, sys


def pytest_sessionfinish(session):
    found = {}
    for name in os.environ["GGSTACK_SRC_PACKAGES"].split(","):
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or []), None)
        if where:
            found[name] = where
    with open(os.environ["GGSTACK_IMPORTS"], "w") as f:
        json.dump(found, f)
"""


def _watch_imports(wt: str, tmp: str, env: dict[str, str]) -> str | None:
    """Where the plugin will write (None: no src layout)."""
    names = _src_packages(os.path.join(wt, "src"))
    if not names:
        return None
    plugin_dir = os.path.join(tmp, "plugin")
    os.makedirs(plugin_dir)
    state.write_atomic(os.path.join(plugin_dir, "_ggstack_imports.py"), _IMPORTS_PLUGIN.encode())
    env["PYTHONPATH"] += os.pathsep + plugin_dir  # last: it shadows nothing of the tests'
    env["PYTEST_ADDOPTS"] += " -p _ggstack_imports"
    env["GGSTACK_SRC_PACKAGES"] = ",".join(names)
    env["GGSTACK_IMPORTS"] = os.path.join(tmp, "imports.json")
    return env["GGSTACK_IMPORTS"]


def _src_packages(src: str) -> list[str]:
    return sorted(
        name.removesuffix(".py")
        for name in (os.listdir(src) if os.path.isdir(src) else [])
        if name.removesuffix(".py").isidentifier() and (name.endswith(".py") or os.path.isdir(os.path.join(src, name)))
    )


def _imported_outside(imports: str | None, wt: str) -> list[tuple[str, str]]:
    """(package, where) of each src/ package the tests imported from outside the tree under test."""
    found = _read_imports(imports)
    inside = os.path.realpath(wt) + os.sep
    return [(n, w) for n, w in sorted(found.items()) if not os.path.realpath(w).startswith(inside)]


def _read_imports(imports: str | None) -> dict[str, str]:
    try:
        with open(imports or "", encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError, RecursionError):
        return {}  # no src layout, not pytest, or it died before the end: nothing observed
    if not isinstance(found, dict) or not all(isinstance(w, str) for w in found.values()):
        return {}  # written where the tests run: whatever they left there is no record of ours
    return found
