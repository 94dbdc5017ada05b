"""What one test run says: failed tests (evidence), or a harness error (command or module missing, no JUnit XML,
timeout) that says nothing of the patch: counted, ``No module named pytest`` once made a patch ``needed``.
A test that cannot import what the patch adds still fails."""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field

# Harness-error kinds (TestResult.harness_error), each with what would settle it.
SETTLE = {
    "command-not-found": "install the command, or fix the test command in stack.toml",
    "missing-module": "install {what} where the tests run (or use {{python}} in the test command "
    "to run them with ggstack's own interpreter)",
    "module-not-on-path": 'put src/ on the tests\' import path: `env = {{ PYTHONPATH = "src" }}` under [tests] '
    "in stack.toml",
    "module-not-built": "make the module before the tests run, in the test command (it is generated when the "
    "project is built or installed, e.g. setuptools-scm's _version.py), or check it in",
    "code-not-under-test": 'put src/ first on the tests\' import path: `env = {{ PYTHONPATH = "src" }}` under '
    "[tests] in stack.toml (the tests imported an installed copy of the tree's own package)",
    "collection-error": "fix what stops the tests from being collected",
    "usage-error": "fix the test command's options in stack.toml",
    "internal-error": "fix the test runner's internal error (a plugin or conftest.py)",
    "interrupted": "rerun; the test run was interrupted",
    "crash": "find out why the test command died without writing its results",
    "exit-code": "find out why the test command failed although every test passed",
    "timeout": "raise tests.timeout in stack.toml, or fix the test that hangs",
}

COULD_NOT_RUN = ("error", "timeout")  # harness errors: never evidence
_PYTEST_EXIT = {2: "interrupted", 3: "internal-error", 4: "usage-error"}
_NOT_FOUND = re.compile(r"^(?:/bin/)?sh: (?:\d+: )?(?:line \d+: )?(\S+?):? (?:command )?not found", re.M)
_NO_MODULE = re.compile(r"No module named '?([A-Za-z0-9_.]+)'?")
_CANNOT_IMPORT = re.compile(r"cannot import name '([^']+)' from '([^']+)' \(([^)]*)\)")
_EXPLAINING = re.compile(
    r"(Error|error:|ERROR|not found|No module named|Traceback|Segmentation fault|Killed|Aborted|core dumped)"
)
_MAX_EXPLAIN = 5
_CONFTEST = "ImportError while loading conftest"
_RAISED = re.compile(r"^E\s+(\S.*)$", re.M)  # pytest's "E   SystemError: …" line


@dataclass
class Cases:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    messages: dict[str, str] = field(default_factory=dict)  # errored test -> its error text

    def of(self, tag: str) -> list[str]:
        """The list a JUnit ``testcase`` goes in, by its child's tag ("": none, it passed)."""
        return {"failure": self.failed, "error": self.errors, "skipped": self.skipped}.get(tag, self.passed)


@dataclass(frozen=True)
class Classified:
    status: str  # passed | failed | skipped | error | timeout | no-tests
    harness_error: str = ""  # one of SETTLE's kinds when the run could not run
    reason: str = ""  # one line
    explanation: str = ""  # the first lines that explain it
    import_failures: tuple[str, ...] = ()  # tests that failed importing what the patch adds


def read_junit(path: str) -> Cases | None:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    cases = Cases()
    for case in root.iter("testcase"):
        _add_case(cases, case)
    return cases


def _add_case(cases: Cases, case: ET.Element) -> None:
    test_id = _test_id(case)
    children = {child.tag: child for child in case}
    tag = next((t for t in ("failure", "error", "skipped") if t in children), "")
    cases.of(tag).append(test_id)
    if tag == "error":  # a collection or fixture error
        err = children["error"]
        cases.messages[test_id] = f"{err.get('message') or ''}\n{err.text or ''}"


def _test_id(case: ET.Element) -> str:
    classname, name = case.get("classname") or "", case.get("name") or ""
    return f"{classname}::{name}" if classname else name


def classify(
    rc: int | None,
    timed_out: bool,
    cases: Cases | None,
    output: str,
    *,
    timeout: float,
    worktree: str = "",
    code_paths: Sequence[str] = (),
    in_src: Sequence[str] = (),
    outside: Sequence[tuple[str, str]] = (),
) -> Classified:
    """``outside``: the tree's own packages the tests imported from an installed copy: they did not test it."""
    if timed_out:
        return Classified(
            "timeout", "timeout", f"timed out after {timeout:g} s (tests.timeout); its process group was killed"
        )
    if outside:
        where = "; ".join(f"{name} from {path}" for name, path in outside)
        return _error("code-not-under-test", f"the tests imported the tree's own package from elsewhere: {where}", "")
    if cases is None:
        return _without_junit(rc, output, in_src)
    return _from_cases(rc, cases, output, worktree, code_paths, in_src)


def _from_cases(
    rc: int | None, cases: Cases, output: str, worktree: str, code_paths: Sequence[str], in_src: Sequence[str]
) -> Classified:
    if rc in (3, 4):  # pytest's internal or usage error: whatever the XML says, the run did not happen
        return _did_not_happen(rc, cases, output, in_src)
    if cases.failed:
        return Classified("failed")
    if cases.errors:
        return _errors(cases, worktree, code_paths, in_src)
    if cases.skipped:
        return Classified("skipped", reason=f"{len(cases.skipped)} test(s) skipped")
    if not cases.passed:
        return Classified("no-tests", reason="no tests collected")
    return _all_passed(rc, output)


def _did_not_happen(rc: int, cases: Cases, output: str, in_src: Sequence[str]) -> Classified:
    kind, text = _PYTEST_EXIT[rc], "\n".join([*cases.messages.values(), output])
    return _conftest_error(text, in_src) if _CONFTEST in text else _error(kind, f"exit code {rc} ({kind})", text)


def _all_passed(rc: int | None, output: str) -> Classified:
    if rc == 0:
        return Classified("passed")
    kind = _PYTEST_EXIT.get(rc or 0, "exit-code")
    return _error(kind, f"exit code {rc} although every test passed", output)


def _without_junit(rc: int | None, output: str, in_src: Sequence[str]) -> Classified:
    if rc == 0:
        return Classified("passed")
    missing = _NOT_FOUND.search(output)
    if rc == 127 or missing:
        what = missing.group(1) if missing else "the test command"
        return _error("command-not-found", f"command not found: {what}", output)
    module = _NO_MODULE.search(output)
    if module:
        return _missing_module(module.group(1), output, in_src)
    return _exit_code(rc, output, in_src)


def _exit_code(rc: int | None, output: str, in_src: Sequence[str]) -> Classified:
    if rc == 5:
        return Classified("no-tests", reason="no tests collected")
    if _CONFTEST in output:
        return _conftest_error(output, in_src)
    if rc in _PYTEST_EXIT:
        return _error(_PYTEST_EXIT[rc], f"exit code {rc} ({_PYTEST_EXIT[rc]})", output)
    how = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
    return _error("crash", f"{how} and no JUnit XML written", output)


def _errors(cases: Cases, worktree: str, code_paths: Sequence[str], in_src: Sequence[str]) -> Classified:
    lacking = tuple(t for t in cases.errors if _imports_the_patch(cases.messages.get(t, ""), worktree, code_paths))
    if lacking and len(lacking) == len(cases.errors):
        return _cannot_import(lacking, cases.messages[lacking[0]])
    text = "\n".join(cases.messages.get(t, "") for t in cases.errors)
    module = _NO_MODULE.search(text)
    if module:
        return _missing_module(module.group(1), text, in_src)
    return _error("collection-error", f"{len(cases.errors)} error(s) collecting or setting up tests", text)


def _cannot_import(lacking: tuple[str, ...], first: str) -> Classified:
    why = _CANNOT_IMPORT.search(first) or _NO_MODULE.search(first)
    return Classified(
        "failed",
        reason=f"cannot import what the patch adds: {why.group(0) if why else 'import error'}",
        import_failures=lacking,
    )


def _conftest_error(output: str, in_src: Sequence[str]) -> Classified:
    """pytest's exit 4 for a ``conftest.py`` that cannot be imported: what it imports, not the options."""
    module = _NO_MODULE.search(output)
    if module:
        return _missing_module(module.group(1), output, in_src)
    raised = _RAISED.search(output)
    said = raised.group(1) if raised else ""
    why = f": {said if len(said) <= 160 else said[:159] + '…'}" if said else ""  # the explanation has it whole
    return _error("collection-error", f"conftest.py could not be imported{why}", output)


def _missing_module(name: str, output: str, in_src: Sequence[str]) -> Classified:
    """``in_src``: the names in the tree's src/, found only with src/ on the tests' path. A submodule
    of one missing is a module the tree does not hold, made when the project is built."""
    top, dot, _ = name.partition(".")
    if top in in_src and dot:
        return _error("module-not-built", f"No module named {name}: the tree's {top} has no such module", output)
    if top in in_src or top + ".py" in in_src:
        return _error("module-not-on-path", f"No module named {name}: the tree has it in src/, not on the path", output)
    return _error("missing-module", f"No module named {name}", output)


def _imports_the_patch(message: str, worktree: str, code_paths: Sequence[str]) -> bool:
    name = _CANNOT_IMPORT.search(message)
    if name and worktree:
        where = os.path.realpath(name.group(3)) if name.group(3) else ""
        root = os.path.realpath(worktree)
        return where == root or where.startswith(root + os.sep)
    module = _NO_MODULE.search(message)
    if module:
        stem = module.group(1).replace(".", "/")
        return any(p in (stem + ".py", stem + "/__init__.py") for p in code_paths)
    return False


def _error(kind: str, reason: str, output: str) -> Classified:
    return Classified("error", kind, reason, explain(output))


def explain(output: str) -> str:
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    explaining = [line for line in lines if _EXPLAINING.search(line)]
    return "\n".join((explaining or lines[-_MAX_EXPLAIN:])[:_MAX_EXPLAIN])


def how_to_settle(kind: str, reason: str, command: str = "") -> str:
    """Where ``command`` already runs ggstack's own interpreter, "use {python}" is no advice."""
    what = reason.removeprefix("No module named ").strip() if kind == "missing-module" else ""
    if kind == "missing-module" and sys.executable in command.split():
        return f"install {what or 'it'} where the tests run ({sys.executable}, which the test command runs)"
    return SETTLE.get(kind, "fix what stops the tests and rerun `ggstack test`").format(what=what or "it")
