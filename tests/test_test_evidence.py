"""The tests evidence names only tests that were seen failing.

A suite run with ``-x`` (or one whose run stopped early) leaves tests that
did not run: they are neither passed nor failed, and the evidence sentence
must not list them as failing. ``evidence.judge_kind`` reads results only (no git).
"""

from __future__ import annotations

from pathlib import Path

from ggstack.model import TestResult as Result
from ggstack.testing import environment, evidence, plan, runner

TESTS = [f"t.test_{i}" for i in range(5)]


def result(where: str, status: str, passed: list[str], failed: list[str]) -> Result:
    return Result("cpu", where, status, passed=passed, failed=failed)


def test_the_control_names_only_the_tests_that_failed_on_the_old_base() -> None:
    # The old base stopped at its first failure (-x): test_1.. did not run there.
    runs = {
        "base": result("base", "passed", TESTS, []),
        "patched": result("patched", "not-run", [], []),
        "old-base": result("old-base", "failed", [], ["t.test_0"]),
    }
    j = evidence.judge_kind("cpu", runs)
    assert j.kind == "represented" and j.tests == ("t.test_0",)
    assert "test_1" not in j.detail


def test_needed_names_only_the_tests_that_failed_on_the_base() -> None:
    runs = {
        "base": result("base", "failed", [], ["t.test_2"]),  # -x: the others did not run
        "patched": result("patched", "passed", TESTS, []),
        "old-base": result("old-base", "failed", [], ["t.test_2"]),
    }
    j = evidence.judge_kind("cpu", runs)
    assert j.kind == "needed" and j.tests == ("t.test_2",)
    assert "test_3" not in j.detail


def test_a_stack_whose_patches_have_no_test_file_says_nothing_ran_and_why(tmp_path: Path) -> None:
    """pytest keeps its tests under testing/: the default tests.paths matches none of them."""
    from gitrepo import GitRepo, run_ggstack

    repo = GitRepo.init(tmp_path / "fork")
    repo.commit("base", {"src/a.py": "x = 1\n", "testing/test_a.py": "def test_a():\n    pass\n"})
    repo.git("checkout", "-q", "-b", "fork")
    repo.commit("fix a", {"src/a.py": "x = 2\n", "testing/test_a.py": "def test_a():\n    assert 1\n"})
    gg = ["--repo", str(repo.path), "--patches", str(tmp_path / "patches")]
    for args in (["init", "s", "--repo-slug", "o/r", "--base", "main"], ["import", "s", "main..fork"]):
        assert run_ggstack(*gg, *args, cwd=tmp_path).returncode == 0
    proc = run_ggstack(*gg, "test", "s", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "nothing ran — no patch changes a test file matching tests.paths (tests/**/test_*.py)" in proc.stderr
    assert "stack.toml" in proc.stderr


def test_a_missing_module_under_pythons_own_interpreter_is_not_told_to_use_python() -> None:
    import sys

    from ggstack.testing import results

    own = results.how_to_settle(
        "missing-module", "No module named pydantic_core", f"{sys.executable} -m pytest -q t.py"
    )
    assert "use {python}" not in own and sys.executable in own and "pydantic_core" in own
    other = results.how_to_settle("missing-module", "No module named pydantic_core", "python -m pytest -q t.py")
    assert "use {python} in the test command" in other


def test_the_cache_key_sees_the_packages_of_the_venv_the_command_runs_in(tmp_path) -> None:
    """A venv's python is a link to the base interpreter; only through the link does it see the
    venv's site-packages. Installing a package into that venv must change the key (rerun)."""
    import os
    import subprocess
    import sys

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    python = environment.interpreter("python -m pytest -q {tests}", env)
    assert python == str(venv / "bin" / "python")
    before = runner.distributions_digest(python, env)
    (site,) = (venv / "lib").glob("python*/site-packages")
    info = site / "pytest_fake_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-fake-plugin\nVersion: 1.0\n")
    after = runner.distributions_digest(python, env)
    assert before != after and not after.startswith("not readable")
    assert runner.distributions_digest(os.path.realpath(python), env) != after  # the base interpreter's own


def test_a_failure_with_and_without_the_patch_and_on_the_old_base_is_pre_existing_not_broken() -> None:
    """Class (a test in the touched file that an environment breaks everywhere): it fails with the
    patch, on the base and on the old base alike. No evidence about the patch: not broken; the
    patch's own new test, passing with it and failing without it, decides."""
    env = "t.test_needs_a_gpu_driver"
    runs = {
        "base": result("base", "failed", ["t.test_0"], [env, "t.test_new"]),
        "patched": result("patched", "failed", ["t.test_0", "t.test_new"], [env]),
        "old-base": result("old-base", "failed", ["t.test_0"], [env, "t.test_new"]),
    }
    j = evidence.judge_kind("cpu", runs)
    assert j.kind == "needed" and j.tests == ("t.test_new",)
    assert j.pre_existing == (env,) and "pre-existing" in j.detail


def test_a_new_failure_with_the_patch_is_still_broken_beside_a_pre_existing_one() -> None:
    env = "t.test_needs_a_gpu_driver"
    runs = {
        "base": result("base", "failed", ["t.test_0"], [env]),
        "patched": result("patched", "failed", [], [env, "t.test_0"]),
        "old-base": result("old-base", "failed", ["t.test_0"], [env]),
    }
    j = evidence.judge_kind("cpu", runs)
    assert j.kind == "broken" and j.tests == ("t.test_0",)


def test_a_test_the_patch_adds_failing_everywhere_is_broken_not_pre_existing() -> None:
    """The patch's own new (or changed) test decides: failing with it, it is broken, though it fails
    without it and on the old base too (its test files are put on both)."""
    runs = {
        "base": result("base", "failed", [], ["tests.test_c::test_c"]),
        "patched": result("patched", "failed", [], ["tests.test_c::test_c"]),
        "old-base": result("old-base", "failed", [], ["tests.test_c::test_c"]),
    }
    assert evidence.judge_kind("cpu", runs).kind != "broken"
    assert evidence.judge_kind("cpu", runs, own=("test_c",)).kind == "broken"
    diff = (
        "diff --git a/tests/test_c.py b/tests/test_c.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_c.py\n"
        "@@ -0,0 +1,2 @@\n+def test_c():\n+    assert False\n"
    )
    assert plan.own_tests(diff, ["tests/test_c.py"]) == ("test_c",)
