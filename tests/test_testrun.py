"""``ggstack test``: a patch's own tests, run on the base without it, with it, and on its old base.

Everything is real: a fork with a buggy ``add()``, a patch that fixes it
and adds a test, bases that lack the fix, carry an equivalent fix written
differently, or carry a compensation that the patch breaks — and pytest run
as a subprocess in ggstack's temporary worktrees. The checks are what a
maintainer would look at: the verdict, the evidence, the kept output, what
is left in the git dir, and whether the test processes are gone.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gitrepo import GitRepo, run_ggstack

from ggstack import exits, git, importing
from ggstack.model import Run
from ggstack.series import store
from ggstack.testing import environment, plan
from ggstack.testing import stage as test_stage
from ggstack.testing.verdict import fold_tests

SLUG = "owner/repo"

CALC = """def combine(a, b):
    return a - b


# padding, so that a change to combine() and one to add() never touch
# .
# .
# .
# .


def add(a, b):
    return combine(a, b)


# end of calc
# .
# .
# .
"""
FIXED = CALC.replace("    return combine(a, b)", "    return a + b")
EQUIVALENT = CALC.replace("    return a - b", "    return sum((a, b))")  # the same fix, written differently, elsewhere
REWRITTEN = CALC.replace("    return combine(a, b)", "    return b + a")  # the same fix, written differently, there
COMPENSATED = (
    CALC + "\n\n_orig_add = add\n\n\ndef add(a, b):  # compensates for combine()\n    return _orig_add(a, b) + 2 * b\n"
)

TEST_ADD = """import os

from calc import add


def test_add():
    print("token:", os.environ.get("GITHUB_TOKEN"))
    if os.environ.get("RUNLOG"):
        with open(os.environ["RUNLOG"], "a") as f:
            f.write("ran\\n")
    assert add(2, 3) == 5
"""
TEST_ADD_UPSTREAM = "from calc import add\n\n\ndef test_add_is_sum():\n    assert add(3, 4) == 7\n"
TEST_COMBINE = "from calc import combine\n\n\ndef test_combine_exists():\n    assert callable(combine)\n"
TEST_KERNEL = """import pytest

from calc import add


def test_add_small():
    assert add(1, 1) == 2


@pytest.mark.gpu
def test_add_on_gpu():
    assert add(2, 2) == 4
"""
TEST_MUL = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
TEST_HANG = """import os
import subprocess
import time


def test_hang():
    child = subprocess.Popen(["sleep", "300"])
    with open(os.environ["PIDFILE"], "a") as f:
        f.write(f"{os.getpid()} {child.pid}\\n")
    time.sleep(300)
"""

SECRET = "ghp_not_for_the_tests_eyes"
CPU = 'python -m pytest -q -p no:cacheprovider -m "not gpu" {tests}'
GPU = "python -m pytest -q -p no:cacheprovider -m gpu {tests}"


def has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


class World:
    """A fork of a calculator whose add() is broken, the fork's fixes, and bases to test them on."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.fork = GitRepo.init(tmp / "fork")
        self.patches = tmp / "patches"
        self.old = self.fork.commit("calc", {"calc.py": CALC, "README": "calc\n"})
        self.fix = self.fork.commit("fix add()", {"calc.py": FIXED, "tests/test_calc.py": TEST_ADD})
        self.kernel = self.fork.commit("test add() on the GPU", {"tests/test_kernel.py": TEST_KERNEL})
        self.control = self.on(
            self.old,
            "document combine()",
            {"calc.py": '"""Arithmetic."""\n' + CALC, "tests/test_combine.py": TEST_COMBINE},
        )
        self.mul = self.on(
            self.old,
            "add mul()",
            {"calc.py": CALC + "\n\ndef mul(a, b):\n    return a * b\n", "tests/test_mul.py": TEST_MUL},
        )
        self.hang = self.on(
            self.old, "a test that hangs", {"calc.py": CALC + "# hangs\n", "tests/test_hang.py": TEST_HANG}
        )
        self.bases = {
            "needed": self.on(self.old, "unrelated", {"README": "calc, the calculator\n"}),
            "equivalent": self.on(self.old, "fix combine() so add() works", {"calc.py": EQUIVALENT}),
            "compensated": self.on(self.old, "compensate for combine() in add()", {"calc.py": COMPENSATED}),
            "rewritten": self.on(
                self.old, "add() its own way", {"calc.py": REWRITTEN, "tests/test_calc.py": TEST_ADD_UPSTREAM}
            ),
        }
        for name, sha in self.bases.items():
            self.fork.git("branch", f"base-{name}", sha)
        self.repo = git.Repository(str(self.fork.path))

    def on(self, start: str, message: str, files: dict[str, str]) -> str:
        self.fork.git("checkout", "-q", "--detach", start)
        sha = self.fork.commit(message, files)
        self.fork.git("checkout", "-q", "main")
        return sha

    def stack(
        self,
        name: str,
        commits: list[str],
        *,
        cpu: str = CPU,
        gpu: str = "",
        timeout: int = 120,
        env: dict[str, str] | None = None,
    ) -> None:
        store.init(str(self.patches), name, SLUG, "main")
        # The target's tests need none of the plugins installed here; loading them costs seconds a run.
        env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})}
        env_toml = ", ".join(f'{k} = "{v}"' for k, v in env.items())
        toml = (
            f'[target]\nrepo = "{SLUG}"\nbase = "main"\n\n[tests]\n'
            f"cpu = {json.dumps(cpu)}\ngpu = {json.dumps(gpu)}\ntimeout = {timeout}\n"
            f'gpu_runner = "gpu-h200"\nenv = {{{env_toml}}}\n'
        )
        (self.patches / name / "stack.toml").write_text(toml)
        stack = store.load(str(self.patches), name)
        store.save(importing.commits(self.repo, stack, commits).stack)

    def gg(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """ggstack given the forge token (which no test run may see), or ``env``."""
        return run_ggstack(
            "--repo",
            str(self.fork.path),
            "--patches",
            str(self.patches),
            *args,
            cwd=self.tmp,
            env={"GITHUB_TOKEN": SECRET} if env is None else env,
        )

    def test_json(self, stack: str, base: str, *args: str, rc: int | None = None) -> dict:
        """The Run of ``test`` as JSON; its exit code is the one policy's for that Run (or ``rc``)."""
        proc = self.gg("test", stack, "--onto", f"base-{base}", "--json", *args)
        assert proc.returncode in (0, 1), proc.stderr + proc.stdout
        run = json.loads(proc.stdout)
        expected = exits.exit_code(Run.from_json(run)) if rc is None else rc
        assert proc.returncode == expected, proc.stderr + proc.stdout
        return run

    def worktrees_left(self) -> list[str]:
        root = Path(self.repo.state_dir("worktrees"))
        listed = self.fork.git("worktree", "list", "--porcelain").count("worktree ")
        dirs = [p.name for p in root.iterdir() if p.is_dir()]
        return dirs + ["(git worktree list)"] * (listed - 1)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def evidence_of(patch: dict) -> dict:
    (e,) = [e for e in patch["evidence"] if e["kind"] == "tests"]
    return e


def results(patch: dict, kind: str = "cpu") -> dict[str, dict]:
    return {t["where"]: t for t in patch["tests"] if t["kind"] == kind}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_dead(pids: list[int], limit: float = 15.0) -> list[int]:
    """The pids still alive after a bounded wait (SIGKILL is delivered, exit is asynchronous)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


# -- the verdict rules ---------------------------------------------------------------


def test_needed_represented_by_behaviour_and_broken(world: World) -> None:
    world.stack("fix", [world.fix])
    # The user's working tree is not what is tested: its uncommitted pytest
    # config and conftest.py (the worktrees live inside it, in .git) stay out.
    (world.fork.path / "conftest.py").write_text("raise SystemExit('the user checkout conftest.py was loaded')\n")
    (world.fork.path / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '--no-such-option'\n")

    needed = world.test_json("fix", "needed")["patches"][0]
    runs = results(needed)
    assert (runs["base"]["status"], runs["patched"]["status"], runs["old-base"]["status"]) == (
        "failed",
        "passed",
        "failed",
    )
    assert runs["base"]["failed"] == ["tests.test_calc::test_add"]
    assert needed["verdict"] == "unique"
    assert needed["recommendation"] == "open PR"
    ev = evidence_of(needed)
    assert ev["judgement"] == "needed" and ev["tests"] == ["tests.test_calc::test_add"]
    assert world.worktrees_left() == []

    # The base fixed combine() instead: the behaviour is there, but the patch's add() line and its
    # new test file are the fork's own (places the base never touched): no test outweighs them.
    equivalent = world.test_json("fix", "equivalent")["patches"][0]
    runs = results(equivalent)
    assert (runs["base"]["status"], runs["patched"]["status"], runs["old-base"]["status"]) == (
        "passed",
        "passed",
        "failed",
    )
    ev = evidence_of(equivalent)
    assert ev["judgement"] == "represented" and ev["tests"] == ["tests.test_calc::test_add"]
    assert ev["rule"] == "behaviour there, own lines not" and "fork's own" in ev["detail"]
    assert equivalent["verdict"] == equivalent["text"]["verdict"] == "unique"
    assert any("calc.py" in line for line in equivalent["text"]["own_lines"])
    assert equivalent["recommendation"] == "open PR"

    # The base rewrote add() its own way at the patch's place, with its own test file: every line
    # of the patch is accounted for by the rewrite, and the tests show the behaviour is there.
    rewritten = world.test_json("fix", "rewritten")["patches"][0]
    assert rewritten["text"]["own_lines"] == []
    assert rewritten["text"]["verdict"] != "represented"  # text alone did not see it
    ev = evidence_of(rewritten)
    assert ev["judgement"] == "represented" and ev["rule"] == "represented by behaviour"
    assert rewritten["verdict"] == "represented" and rewritten["recommendation"] == "do not open"
    assert world.bases["rewritten"] in rewritten["represented_by"]

    # The base compensated in add(); with the patch on top the sum is wrong.
    proc = world.gg("test", "fix", "--onto", "base-compensated", "--json")
    assert proc.returncode == 1, proc.stderr
    broken = json.loads(proc.stdout)["patches"][0]
    runs = results(broken)
    assert runs["patched"]["status"] == "failed" and runs["base"]["status"] == "passed"
    assert broken["verdict"] == "broken" and broken["recommendation"] == "rework"
    assert "assert 11 == 5" in runs["patched"]["output_tail"]
    assert (
        "token: None" in runs["patched"]["output_tail"] and SECRET not in proc.stdout
    )  # the patch's code gets no forge token
    assert runs["base"]["output_tail"] == ""  # only failing runs keep output
    assert world.worktrees_left() == []

    table = world.gg("test", "fix", "--onto", "base-compensated")
    assert table.returncode == 1
    assert "broken" in table.stdout and "assert 11 == 5" in table.stdout


def test_a_test_that_passes_on_the_old_base_is_no_evidence(world: World) -> None:
    world.stack("ctl", [world.control])
    patch = world.test_json("ctl", "equivalent")["patches"][0]
    runs = results(patch)
    assert {w: r["status"] for w, r in runs.items()} == {"base": "passed", "patched": "passed", "old-base": "passed"}
    ev = evidence_of(patch)
    assert ev["judgement"] == "none"
    assert "old base too" in ev["detail"]
    assert patch["verdict"] != "represented"
    assert patch["verdict"] == (patch["text"]["verdict"] if patch["text"] else "unique")


# -- GPU ------------------------------------------------------------------------------------


@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU: the GPU tests would run")
def test_gpu_tests_without_a_gpu_are_inconclusive(world: World) -> None:
    world.stack("gpu", [world.fix, world.kernel], gpu=GPU)

    run = world.test_json("gpu", "needed")
    assert run["gpu"] == "absent"
    fix, kernel = run["patches"]
    # The fix has no GPU tests: it is not held for want of a GPU.
    assert {r["status"] for r in results(fix, "gpu").values()} == {"no-tests"}
    assert fix["verdict"] == "unique"
    gpu_runs = results(kernel, "gpu")
    assert {r["status"] for r in gpu_runs.values()} == {"skipped"}
    assert "no GPU" in gpu_runs["patched"]["reason"]
    assert kernel["verdict"] == "inconclusive" and kernel["recommendation"] == "hold"
    assert "no GPU" in evidence_of(kernel)["detail"]
    assert results(kernel)["patched"]["passed"] == ["tests.test_kernel::test_add_small"]

    proc = world.gg("test", "gpu", "--onto", "base-needed", "--gpu", "require")
    assert proc.returncode == 2
    assert "--gpu require" in proc.stderr and "no GPU" in proc.stderr

    off = world.test_json("gpu", "needed", "--gpu", "off")
    assert off["gpu"] == "off"
    assert all(t["kind"] == "cpu" for p in off["patches"] for t in p["tests"])
    assert off["patches"][1]["verdict"] != "inconclusive"


# -- harness errors: a run that could not run is never evidence ----------------------------------

BAD_PLUGIN = "def pytest_collection_modifyitems(items):\n    raise RuntimeError('the plugin broke')\n"


def _harness_case(world: World, tmp_path: Path, kind: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """(tests.cpu, tests.env, files to add to the fix's test) that make the runs fail in the ``kind`` way."""
    pytest_cmd = "{python} -m pytest -q -p no:cacheprovider {tests}"
    if kind == "command-not-found":
        return "no-such-test-runner-here {tests}", {}, {}
    if kind == "missing-module":  # an interpreter without pytest: the "No module named pytest"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
        return f"{tmp_path / 'bare' / 'bin' / 'python'} -m pytest -q {{tests}}", {}, {}
    if kind == "collection-error":
        return pytest_cmd, {}, {"tests/test_calc.py": TEST_ADD + "\ndef broken(:\n"}
    if kind == "usage-error":
        return "{python} -m pytest -q --no-such-option {tests}", {}, {}
    if kind == "internal-error":
        (tmp_path / "plugins").mkdir()
        (tmp_path / "plugins" / "badplugin.py").write_text(BAD_PLUGIN)
        return "{python} -m pytest -q -p badplugin {tests}", {"PYTHONPATH": str(tmp_path / "plugins")}, {}
    assert kind == "crash"
    return "{python} -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)' {tests}", {}, {}


@pytest.mark.parametrize(
    "kind, reason",
    [
        ("command-not-found", "command not found: no-such-test-runner-here"),
        ("missing-module", "No module named pytest"),
        ("collection-error", "error(s) collecting"),
        ("usage-error", "exit code 4"),
        ("internal-error", "exit code 3"),
        ("crash", "no JUnit XML written"),
    ],
)
@pytest.mark.slow
def test_a_run_that_could_not_run_is_a_harness_error_never_evidence(
    world: World, tmp_path: Path, kind: str, reason: str
) -> None:
    cpu, env, files = _harness_case(world, tmp_path, kind)
    fix = world.on(world.old, "fix add()", {"calc.py": FIXED, "tests/test_calc.py": TEST_ADD, **files})
    world.stack("h", [fix], cpu=cpu, env=env)
    for base in ("needed", "equivalent"):  # what the tests would have said: needed, represented
        patch = world.test_json("h", base)["patches"][0]
        runs = results(patch)
        assert {r["status"] for r in runs.values()} == {"error"}, runs
        assert {r["harness_error"] for r in runs.values()} == {kind}
        assert all(reason in r["reason"] and r["explanation"] for r in runs.values())
        ev = evidence_of(patch)
        assert ev["judgement"] == "could-not-run" and ev["settle"]
        assert f"could not run: {runs['patched']['reason']} (in tests.cpu" in ev["detail"]
        # never needed by the tests, never represented by them: the text verdict, held
        assert patch["verdict"] == "inconclusive" and patch["recommendation"] == "hold"
        assert patch["text"]["verdict"] in ("unique", "partial")
    table = world.gg("test", "h", "--onto", "base-needed")
    assert "could not run" in table.stdout and "[/]" not in table.stdout


def test_a_test_importing_what_the_patch_adds_fails_on_the_base_it_is_not_a_harness_error(world: World) -> None:
    world.stack("mul", [world.mul], cpu="{python} -m pytest -q -p no:cacheprovider {tests}")
    patch = world.test_json("mul", "needed")["patches"][0]
    runs = results(patch)
    assert (runs["base"]["status"], runs["patched"]["status"]) == ("failed", "passed")
    assert runs["base"]["harness_error"] == "" and "cannot import name 'mul'" in runs["base"]["reason"]
    assert patch["verdict"] == "unique" and evidence_of(patch)["judgement"] == "needed"


def test_a_conftest_that_cannot_be_imported_is_named_not_called_a_usage_error(world: World) -> None:
    """The probe (pydantic 2.12 with a newer pydantic-core installed): pytest's exit 4 was
    "usage-error", settled by "fix the test command's options"; the options were fine."""
    conftest = "raise SystemError('the installed core is too new for this tree')\n"
    broken = world.on(world.old, "a conftest", {"tests/conftest.py": conftest})
    world.fork.git("branch", "base-conftest", broken)
    fix = world.on(broken, "fix add()", {"calc.py": FIXED, "tests/test_calc.py": TEST_ADD})
    world.stack("c", [fix], cpu="{python} -m pytest -q -p no:cacheprovider {tests}")
    patch = world.test_json("c", "conftest")["patches"][0]
    runs = results(patch)
    assert {r["harness_error"] for r in runs.values()} == {"collection-error"}, runs
    reason = "conftest.py could not be imported: SystemError: the installed core is too new for this tree"
    assert all(r["reason"] == reason for r in runs.values()), runs
    assert "options" not in evidence_of(patch)["settle"] and patch["verdict"] == "inconclusive"


def test_a_src_layout_whose_tests_cannot_find_its_package_is_told_the_config_that_fixes_it(world: World) -> None:
    """The probe: a src layout's tests said only "could not run: No module named calc"."""
    layout = world.on(world.old, "src layout", {"calc.py": None, "src/calc.py": CALC})  # type: ignore[dict-item]
    world.fork.git("branch", "base-src", layout)
    fix = world.on(layout, "fix add()", {"src/calc.py": FIXED, "tests/test_calc.py": TEST_ADD})
    cpu = "{python} -m pytest -q -p no:cacheprovider {tests}"
    world.stack("src", [fix], cpu=cpu)

    runs = results(world.test_json("src", "src")["patches"][0])
    assert {r["harness_error"] for r in runs.values()} == {"module-not-on-path"}, runs
    assert "No module named calc: the tree has it in src/" in runs["patched"]["reason"]
    settle = evidence_of(world.test_json("src", "src")["patches"][0])["settle"]
    assert 'env = { PYTHONPATH = "src" }' in settle and "stack.toml" in settle
    # What it says, done: the tests run, fail without the patch and pass with it.
    toml = world.patches / "src" / "stack.toml"
    toml.write_text(toml.read_text().replace("env = {", 'env = {PYTHONPATH = "src", '))
    patch = world.test_json("src", "src")["patches"][0]
    runs = results(patch)
    assert (runs["base"]["status"], runs["patched"]["status"]) == ("failed", "passed"), runs
    assert evidence_of(patch)["judgement"] == "needed"


def test_a_generated_module_the_tree_lacks_is_not_called_a_path_problem(world: World) -> None:
    """The probe (pytest's own tree): `No module named _pytest._version` was called
    module-not-on-path, settled by "put src/ on the path" — src/ was on it; the module is
    written when the project is built (setuptools-scm) and no tree holds it."""
    package = {"calc.py": None, "src/calc/__init__.py": "from calc._version import version\n" + CALC}
    layout = world.on(world.old, "src layout, version generated", package)  # type: ignore[dict-item]
    world.fork.git("branch", "base-gen", layout)
    fixed = package["src/calc/__init__.py"].replace(CALC, FIXED)
    fix = world.on(layout, "fix add()", {"src/calc/__init__.py": fixed, "tests/test_calc.py": TEST_ADD})
    world.stack("gen", [fix], cpu="{python} -m pytest -q -p no:cacheprovider {tests}", env={"PYTHONPATH": "src"})

    patch = world.test_json("gen", "gen")["patches"][0]
    runs = results(patch)
    assert {r["harness_error"] for r in runs.values()} == {"module-not-built"}, runs
    assert "No module named calc._version: the tree's calc has no such module" in runs["patched"]["reason"]
    settle = evidence_of(patch)["settle"]
    assert "PYTHONPATH" not in settle and "built" in settle
    assert patch["verdict"] == "inconclusive"


def test_tests_that_import_an_installed_copy_of_the_trees_package_could_not_run(world: World, tmp_path: Path) -> None:
    """A src layout whose package is also installed elsewhere (here: fixed, on the tests' path):
    the tests import that copy, so base and patched runs pass alike on code that is not the tree."""
    installed = tmp_path / "site"
    installed.mkdir()
    (installed / "calc.py").write_text(FIXED)
    layout = world.on(world.old, "src layout", {"calc.py": None, "src/calc.py": CALC})  # type: ignore[dict-item]
    world.fork.git("branch", "base-inst", layout)
    fix = world.on(layout, "fix add()", {"src/calc.py": FIXED, "tests/test_calc.py": TEST_ADD})
    cpu = "{python} -m pytest -q -p no:cacheprovider {tests}"
    world.stack("inst", [fix], cpu=cpu, env={"PYTHONPATH": str(installed)})

    patch = world.test_json("inst", "inst")["patches"][0]
    runs = results(patch)
    assert {r["harness_error"] for r in runs.values()} == {"code-not-under-test"}, runs
    assert f"calc from {installed / 'calc.py'}" in runs["base"]["reason"]
    assert evidence_of(patch)["judgement"] == "could-not-run" and patch["verdict"] != "represented"
    assert 'PYTHONPATH = "src"' in evidence_of(patch)["settle"]
    # src/ first on the path: the tree's own code is tested, and the runs are evidence again.
    toml = world.patches / "inst" / "stack.toml"
    toml.write_text(toml.read_text().replace(f'PYTHONPATH = "{installed}"', f'PYTHONPATH = "src:{installed}"'))
    runs = results(world.test_json("inst", "inst")["patches"][0])
    assert (runs["base"]["status"], runs["patched"]["status"]) == ("failed", "passed"), runs


# -- timeouts and crashes -------------------------------------------------------------------


@pytest.mark.slow
def test_a_hanging_test_times_out_and_its_process_group_is_killed(world: World, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    world.stack("hang", [world.hang], timeout=2, env={"PIDFILE": str(pidfile)})
    patch = world.test_json("hang", "needed")["patches"][0]
    assert {r["status"] for r in patch["tests"]} == {"timeout"}
    assert "timed out after 2 s" in patch["tests"][0]["reason"]
    assert {r["harness_error"] for r in patch["tests"]} == {"timeout"}
    assert patch["verdict"] == "inconclusive"
    assert evidence_of(patch)["judgement"] == "could-not-run"
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 6  # pytest and its sleep child, in each of the three runs
    assert wait_dead(pids) == []
    assert world.worktrees_left() == []


def test_worktrees_and_test_processes_of_a_killed_run_are_pruned(world: World, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    world.stack("hang", [world.hang], timeout=300, env={"PIDFILE": str(pidfile)})
    world.stack("fix", [world.fix])
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ggstack",
            "--repo",
            str(world.fork.path),
            "--patches",
            str(world.patches),
            "test",
            "hang",
            "--onto",
            "base-needed",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (pidfile.exists() and pidfile.read_text().endswith("\n")) and time.monotonic() < deadline:
            assert proc.poll() is None, "ggstack exited before the test started"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    orphans = [int(p) for p in pidfile.read_text().split()]
    assert orphans and all(alive(p) for p in orphans)  # SIGKILL gives ggstack no chance to clean up
    assert len(world.worktrees_left()) == 1  # the checkout: a repository of its own, git keeps no record of it

    run = world.test_json("fix", "needed")  # any later run prunes what the dead one left
    assert run["patches"][0]["verdict"] == "unique"
    assert world.worktrees_left() == []
    assert wait_dead(orphans) == []


# -- the cache ----------------------------------------------------------------------------------


def test_a_rerun_on_an_unchanged_base_runs_nothing(world: World, tmp_path: Path) -> None:
    runlog = tmp_path / "runlog"
    world.stack("fix", [world.fix], env={"RUNLOG": str(runlog)})
    stack = store.load(str(world.patches), "fix")

    first = test_stage.test(world.repo, stack, test_stage.checked_run(world.repo, stack, "base-needed"))
    assert runlog.read_text().count("ran") == 3
    assert not any(t.cached for t in first.outcomes[0].tests)

    second = test_stage.test(world.repo, stack, test_stage.checked_run(world.repo, stack, "base-needed"))
    assert runlog.read_text().count("ran") == 3  # nothing was executed
    assert all(t.cached for t in second.outcomes[0].tests)
    assert second.outcomes[0].verdict == first.outcomes[0].verdict
    assert [(t.where, t.status, t.failed) for t in second.outcomes[0].tests] == [
        (t.where, t.status, t.failed) for t in first.outcomes[0].tests
    ]

    # Folding twice is folding once: the text verdict is restored first.
    again = test_stage.test(world.repo, stack, second)
    assert [e.kind for e in again.outcomes[0].evidence].count("tests") == 1
    assert again.outcomes[0].verdict == second.outcomes[0].verdict

    # A new base is a new tree: that one runs.
    test_stage.test(world.repo, stack, test_stage.checked_run(world.repo, stack, "base-equivalent"))
    assert runlog.read_text().count("ran") == 5  # base + tests and base + patch; the old base is unchanged


def test_installing_a_distribution_reruns_the_tests_and_no_cache_reruns_them_all(world: World, tmp_path: Path) -> None:
    runlog, site = tmp_path / "runlog", tmp_path / "site"
    site.mkdir()
    world.stack("fix", [world.fix], env={"RUNLOG": str(runlog), "PYTHONPATH": str(site)})
    stack = store.load(str(world.patches), "fix")
    run = test_stage.checked_run(world.repo, stack, "base-needed")

    test_stage.test(world.repo, stack, run)
    test_stage.test(world.repo, stack, run)
    assert runlog.read_text().count("ran") == 3  # the second run read the cache

    # A distribution appears where the tests' interpreter looks (what `pip install` leaves behind).
    dist = site / "ggstack_probe_dist-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ggstack-probe-dist\nVersion: 1.0\n")
    again = test_stage.test(world.repo, stack, run)
    assert runlog.read_text().count("ran") == 6
    assert not any(t.cached for t in again.outcomes[0].tests)

    proc = world.gg("test", "fix", "--onto", "base-needed", "--no-cache", "--json")
    assert proc.returncode == 0, proc.stderr
    assert runlog.read_text().count("ran") == 9
    assert not any(t["cached"] for t in json.loads(proc.stdout)["patches"][0]["tests"])


# -- beyond one machine ---------------------------------------------------------------------------


def _comparable(run: dict) -> dict:
    """A Run without what differs between two honest executions: durations and cache hits."""
    for patch in run["patches"]:
        for t in patch["tests"]:
            t.pop("seconds")
            t.pop("cached")
            t["output_tail"] = re.sub(r"in [0-9.]+s", "in Ns", t["output_tail"])
    return run


@pytest.mark.slow
def test_matrix_then_shards_then_merge_equals_a_single_run(world: World, tmp_path: Path) -> None:
    world.stack("gpu", [world.fix, world.kernel], gpu=GPU)
    proc = world.gg("test", "gpu", "--onto", "base-rewritten", "--matrix")
    assert proc.returncode == 0, proc.stderr
    matrix = json.loads(proc.stdout)
    entries = matrix["include"]
    assert [(e["patch"][:4], e["kind"]) for e in entries] == [
        ("0001", "cpu"),
        ("0001", "gpu"),
        ("0002", "cpu"),
        ("0002", "gpu"),
    ]
    assert {e["runs-on"] for e in entries if e["kind"] == "gpu"} == {"gpu-h200"}
    assert all(e["runs-on"] == "ubuntu-latest" for e in entries if e["kind"] == "cpu")

    files = []
    for e in entries:
        out = tmp_path / "results" / f"{e['id']}.json"
        args = ["--shard", e["shard"]] if e["kind"] == "cpu" else ["--job", e["id"]]
        # A shard is the CI's untrusted job: given no token (it refuses to run with one).
        proc = world.gg("test", "gpu", "--onto", "base-rewritten", *args, "--results", str(out), env={})
        assert proc.returncode == 0, proc.stderr
        files.append(str(out))
    proc = world.gg("test", "gpu", "--onto", "base-rewritten", "--json", "--merge", *files)
    merged = json.loads(proc.stdout)
    assert proc.returncode == exits.exit_code(Run.from_json(merged)), proc.stderr

    shutil.rmtree(world.repo.state_dir("cache", "tests"))  # the single run must really run
    single = world.test_json("gpu", "rewritten")
    assert _comparable(merged) == _comparable(single)
    assert single["patches"][0]["verdict"] == "represented"

    # A results file from another base is refused, naming the file.
    proc = world.gg("test", "gpu", "--onto", "base-needed", "--merge", files[0])
    assert proc.returncode == 2 and files[0] in proc.stderr


@pytest.mark.slow
def test_jobs_run_cpu_commands_side_by_side_with_the_same_result(world: World) -> None:
    world.stack("two", [world.fix, world.kernel])
    sequential = world.test_json("two", "equivalent")
    shutil.rmtree(world.repo.state_dir("cache", "tests"))  # the parallel run must really run
    parallel = world.test_json("two", "equivalent", "--jobs", "3")
    assert not any(t["cached"] for p in parallel["patches"] for t in p["tests"])
    assert _comparable(parallel) == _comparable(sequential)
    assert world.worktrees_left() == []


def test_which_files_are_tests() -> None:
    patterns = ("tests/**/test_*.py",)
    assert plan.is_test_path("tests/test_calc.py", patterns)
    assert plan.is_test_path("tests/distributed/deep/test_dcp_a2a.py", patterns)
    assert not plan.is_test_path("tests/helpers.py", patterns)
    assert not plan.is_test_path("vllm/tests_util/test_x.py", patterns)
    assert environment.expand("pytest {tests}", ["tests/a b.py", "tests/c.py"]) == "pytest 'tests/a b.py' tests/c.py"


def _results(kind: str, base: str, patched: str, old: str, test: str = "t::test") -> list:
    from ggstack.model import TestResult

    def one(where: str, status: str) -> TestResult:
        lists = {"passed": "passed", "failed": "failed", "error": "errors", "skipped": "skipped"}
        r = TestResult(kind, where, status)
        if status in lists:
            getattr(r, lists[status]).append(test if status != "error" else "tests.test_x")
        return r

    return [one("base", base), one("patched", patched), one("old-base", old)]


@pytest.mark.parametrize(
    "text, runs, verdict, recommendation, judgement",
    [
        # text says represented, tests fail on the base without the patch: the signals disagree
        ("represented", ("failed", "passed", "failed"), "inconclusive", "human look", "needed"),
        # both say represented: the verdict stands, stronger
        ("represented", ("passed", "passed", "failed"), "represented", "do not open", "represented"),
        # a run that could not run (a harness error) is never evidence: the text verdict stays, held
        ("unique", ("error", "passed", "error"), "inconclusive", "hold", "could-not-run"),
        ("unique", ("passed", "error", "passed"), "inconclusive", "hold", "could-not-run"),
        ("unique", ("timeout", "passed", "failed"), "inconclusive", "hold", "could-not-run"),
        ("partial", ("error", "error", "error"), "inconclusive", "hold", "could-not-run"),
        ("represented", ("error", "error", "error"), "represented", "do not open", "could-not-run"),
        ("represented", ("passed", "passed", "error"), "represented", "do not open", "none"),
        ("conflict", ("error", "not-run", "failed"), "conflict", "rework", "could-not-run"),
        # the control could not run: no behaviour evidence, and no needed either
        ("unique", ("passed", "passed", "error"), "unique", "open PR", "none"),
        ("unique", ("passed", "passed", "timeout"), "unique", "open PR", "none"),
        # a failure without the patch decides, whatever the control did
        ("unique", ("failed", "passed", "error"), "unique", "open PR", "needed"),
        # skipped everywhere: inconclusive, never a pass
        ("unique", ("skipped", "skipped", "skipped"), "inconclusive", "hold", "inconclusive"),
        ("unique", ("passed", "passed", "passed"), "unique", "open PR", "none"),
        ("unique", ("passed", "failed", "failed"), "broken", "rework", "broken"),
        # the patch conflicts: the tests still say whether the base has the behaviour
        ("conflict", ("passed", "not-run", "failed"), "represented", "do not open", "represented"),
        ("conflict", ("failed", "not-run", "failed"), "conflict", "rework", "needed"),
    ],
)
def test_fold_rules(
    world: World, text: str, runs: tuple[str, str, str], verdict: str, recommendation: str, judgement: str
) -> None:
    from ggstack.model import Outcome, Recommendation, Run, Verdict

    o = Outcome(
        "0001-x.patch", "x", "spid", verdict=Verdict(text), represented_by=["abc"] if text == "represented" else []
    )
    o.recommendation = {
        "represented": Recommendation.DO_NOT_OPEN,
        "unique": Recommendation.OPEN_PR,
        "partial": Recommendation.OPEN_PR,
        "conflict": Recommendation.REWORK,
    }[text]
    run = Run("s", "main", world.old, outcomes=[o])
    trees = tuple(plan.TestTree(w, "0" * 40, world.old) for w in plan.WHERE)
    job = plan.Job("0001-x-cpu", o.name, "cpu", "pytest", ("tests/test_x.py",), trees, ())
    folded = fold_tests(world.repo, run, [job], {job.id: _results("cpu", *runs)}, None)
    out = folded.outcomes[0]
    assert (out.verdict.value, out.recommendation.value) == (verdict, recommendation)
    (ev,) = [e for e in out.evidence if e.kind == "tests"]
    assert ev.data["judgement"] == judgement
    assert out.text is not None and out.text.verdict.value == text
    assert run.outcomes[0].verdict.value == text  # fold returns a new Run
    assert run.outcomes[0].evidence == [] and run.outcomes[0].tests == []  # and leaves the given one's lists
    if text == "represented" and judgement == "needed":
        assert "disagree" in ev.detail
    if judgement == "could-not-run":
        assert "could not run" in ev.detail and ev.data["settle"]
        if verdict != "inconclusive":
            assert ev.detail.startswith(f"{text} (text evidence; ")
    # pr.require_tests = false: a needed patch whose tests could not decide keeps its text verdict
    loose = fold_tests(world.repo, run, [job], {job.id: _results("cpu", *runs)}, None, require_tests=False)
    if judgement in ("could-not-run", "inconclusive"):
        assert (loose.outcomes[0].verdict.value, loose.outcomes[0].recommendation.value) == (
            text,
            o.recommendation.value,
        )
    else:
        assert loose.outcomes[0].verdict == out.verdict


# -- the base's own test files ------------------------------------------------------------------

SUB = "import calc\n\n\ndef test_subtracts():\n    assert calc.combine(5, 3) == 2\n"
SUB_ADD = SUB + "\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n"


def test_the_base_run_has_the_bases_test_files_with_the_patchs_test_changes_not_its_stale_files(
    world: World,
) -> None:
    """A pick the base took and then changed (its replay conflicts): the base run must see the
    base's own version of a test file with the patch's test hunks merged in, not the patch's
    whole file from its old parent, whose other tests call what the base renamed since."""
    start = world.on(world.old, "test combine()", {"tests/test_sub.py": SUB})
    fix = world.on(start, "fix add(), test it", {"calc.py": FIXED, "tests/test_sub.py": SUB_ADD})
    renamed = FIXED.replace("return a + b", "return b + a").replace("combine", "subtract")
    base = world.on(
        start,
        "take the fix, rename combine()",
        {"calc.py": renamed, "tests/test_sub.py": SUB.replace("combine", "subtract")},
    )
    world.fork.git("branch", "base-moved", base)
    world.stack("moved", [fix])
    proc = world.gg("test", "moved", "--onto", "base-moved", "--json")
    assert proc.returncode in (0, 1), proc.stderr
    patch = json.loads(proc.stdout)["patches"][0]
    runs = results(patch)
    assert patch["applied"] == "conflict"
    assert runs["base"]["status"] == "passed", runs["base"]
    assert evidence_of(patch)["judgement"] == "represented"
