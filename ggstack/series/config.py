"""A stack's ``stack.toml``: what ``init`` writes, and the checks a hand edit must pass (docs/stack-toml.md)."""

from __future__ import annotations

import re
import tomllib

from ggstack import secrets
from ggstack.errors import UserError
from ggstack.model import LandPolicy, PRPolicy, StackConfig, TargetConfig, TestConfig
from ggstack.series.branchnames import check_template

STACK_TOML = "stack.toml"

# Each section's keys and their types (no schema library among ggstack's dependencies).
_SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "target": {"repo": str, "remote": str, "base": str, "fork": str},
    "branches": {"template": str},
    "pr": {
        "draft": bool,
        "labels": list,
        "approval_gate": bool,
        "stacked": bool,
        "require_tests": bool,
        "native_stacks": str,
    },
    "land": {"method": str, "approvers": list, "checks": list},
    "tests": {
        "paths": list,
        "cpu": str,
        "gpu": str,
        "timeout": int,
        "gpu_runner": str,
        "env": dict,
        "pass_env": list,
        "home": str,
        "gpu_queue": str,
        "cpu_queue": str,
    },
}
_SLUG = re.compile(r"^[^/\s]+/[^/\s]+$")


# -- the text init writes ----------------------------------------------------------
# tomllib reads TOML but the stdlib writes none: the file is this template, its strings escaped.


def initial_toml(
    repo_slug: str,
    base: str,
    remote: str = "origin",
    *,
    fork: str | None = None,
    cpu: str = "python -m pytest -q {tests}",
    gpu: str = "",
    timeout: int = 900,
) -> str:
    gpu_line = (
        f"gpu = {_toml_string(gpu)}"
        if gpu
        else 'gpu = ""                       # e.g. "python -m pytest -q -m gpu {tests}"'
    )
    fork_line = (
        _noted(f"fork = {_toml_string(fork)}", "PR heads live in this fork; repo is upstream")
        if fork
        else '# fork = "me/name"             # set when PR heads live in a fork (head = "me:branch")'
    )
    return f"""# ggstack stack configuration (see docs/stack-toml.md in ggstack)

[target]
{_noted(f"repo = {_toml_string(repo_slug)}", "owner/name on the forge: where PRs are opened")}
{_noted(f"remote = {_toml_string(remote)}", "git remote the per-patch branches are pushed to")}
{_noted(f"base = {_toml_string(base)}", "the base branch the stack is replayed onto")}
{fork_line}

[branches]
template = "gg/{{stack}}/{{index:02d}}-{{slug}}"

[pr]
draft = true                   # new PRs open as drafts
labels = ["do-not-merge"]      # labels new PRs get (lifted on approval when approval_gate)
approval_gate = true           # "Do not merge until explicitly approved."
stacked = true                 # each PR's base is the previous needed patch's branch
require_tests = true           # hold a needed patch whose tests could not run (no PR until they can)
native_stacks = "auto"         # one native stack of PRs where the forge has them: auto | on | off

[land]
method = ""                    # merge | squash | rebase ("": what the repository allows)
approvers = []                 # whose approval counts ([]: anyone with write access)
checks = []                    # checks that must pass besides the base branch's required ones

[tests]
paths = ["tests/**/test_*.py"] # which files of a patch are its tests
cpu = {_toml_string(cpu)}
{gpu_line}
{_noted(f"timeout = {timeout}", "seconds per test command")}
gpu_runner = "gpu"             # runs-on label for GPU jobs in the CI matrix
gpu_queue = "gpu"              # Buildkite agent queue for GPU steps (test --matrix --ci buildkite)
home = "scratch"               # a test run's HOME: a scratch directory of its own ("user": yours)
# pass_env = ["HF_HOME"]       # more of your variables for the tests (never a credential)
"""


def _noted(line: str, note: str) -> str:
    return f"{line:<30} # {note}"


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def is_slug(value: str) -> bool:
    return bool(_SLUG.match(value))


# -- reading it ----------------------------------------------------------------------


def parse_config(text: str, path: str) -> StackConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"invalid TOML: {e}", path=path, line=_toml_error_line(e)) from None
    for section, value in data.items():
        _check_section(section, value, text, path)
    _check_values(data, text, path)
    return _stack_config(data)


def _check_section(section: str, value: object, text: str, path: str) -> None:
    if section not in _SCHEMA:
        raise UserError(
            f"unknown section [{section}] (known: {', '.join(_SCHEMA)})",
            path=path,
            line=_line_of(text, rf"\[{re.escape(section)}\]"),
        )
    if not isinstance(value, dict):
        raise UserError(f"{section} must be a table", path=path, line=_line_of(text, rf"^{re.escape(section)}\s*="))
    for key, item in value.items():
        _check_key(section, key, item, path, _line_of(text, rf"^\s*{re.escape(key)}\s*="))


def _check_key(section: str, key: str, item: object, path: str, line: int | None) -> None:
    expected = _SCHEMA[section].get(key)
    if expected is None:
        raise UserError(f"unknown key {section}.{key} (known: {', '.join(_SCHEMA[section])})", path=path, line=line)
    if not isinstance(item, expected) or (expected is int and isinstance(item, bool)):
        raise UserError(
            f"{section}.{key} must be a {getattr(expected, '__name__', expected)}, not {type(item).__name__}",
            path=path,
            line=line,
        )
    if isinstance(item, list) and not all(isinstance(x, str) for x in item):
        raise UserError(f"{section}.{key} must be a list of strings", path=path, line=line)


def _check_values(data: dict, text: str, path: str) -> None:
    """In the order a user fixes them."""
    target = data.get("target", {})
    if "repo" not in target or not is_slug(target["repo"]):
        raise UserError('target.repo must be "owner/name"', path=path, line=_line_of(text, r"^\s*repo\s*="))
    _no_options(data, text, path)
    _check_base(target.get("base", ""), text, path)
    tests = data.get("tests", {})
    if "timeout" in tests and tests["timeout"] <= 0:
        raise UserError(
            "tests.timeout must be a positive number of seconds", path=path, line=_line_of(text, r"^\s*timeout\s*=")
        )
    if not all(isinstance(v, str) for v in tests.get("env", {}).values()):
        raise UserError("tests.env values must be strings", path=path, line=_line_of(text, r"^\s*env\s*="))
    _check_test_environment(tests, text, path)
    if "template" in data.get("branches", {}):
        check_template(data["branches"]["template"], path, _line_of(text, r"^\s*template\s*="))
    _one_of(data.get("pr", {}).get("native_stacks", "auto"), ("auto", "on", "off"), "pr.native_stacks", path, text)
    _one_of(data.get("land", {}).get("method", ""), ("", "merge", "squash", "rebase"), "land.method", path, text)


def _stack_config(data: dict) -> StackConfig:
    target, pr, land, tests = (data.get(s, {}) for s in ("target", "pr", "land", "tests"))
    default_tests = TestConfig()
    return StackConfig(
        target=TargetConfig(
            repo=target["repo"],
            remote=target.get("remote", "origin"),
            base=target.get("base", "main"),
            fork=target.get("fork"),
        ),
        branch_template=data.get("branches", {}).get("template", StackConfig.branch_template),
        pr=PRPolicy(
            draft=pr.get("draft", True),
            labels=tuple(pr.get("labels", PRPolicy.labels)),
            approval_gate=pr.get("approval_gate", True),
            stacked=pr.get("stacked", True),
            require_tests=pr.get("require_tests", True),
            native_stacks=pr.get("native_stacks", "auto"),
        ),
        land=LandPolicy(
            method=land.get("method", ""),
            approvers=tuple(land.get("approvers", ())),
            checks=tuple(land.get("checks", ())),
        ),
        tests=TestConfig(
            paths=tuple(tests.get("paths", default_tests.paths)),
            cpu=tests.get("cpu", default_tests.cpu),
            gpu=tests.get("gpu", default_tests.gpu),
            timeout=tests.get("timeout", default_tests.timeout),
            gpu_runner=tests.get("gpu_runner", default_tests.gpu_runner),
            env=tuple(sorted(tests.get("env", {}).items())),
            pass_env=tuple(tests.get("pass_env", ())),
            home=tests.get("home", default_tests.home),
            gpu_queue=tests.get("gpu_queue", default_tests.gpu_queue),
            cpu_queue=tests.get("cpu_queue", default_tests.cpu_queue),
        ),
    )


def _one_of(value: str, allowed: tuple[str, ...], key: str, path: str, text: str) -> None:
    if value not in allowed:
        shown = ", ".join(repr(a) for a in allowed)
        name = key.split(".")[1]
        raise UserError(
            f"{key} must be one of {shown}, not {value!r}", path=path, line=_line_of(text, rf"^\s*{name}\s*=")
        )


def _check_base(base: str, text: str, path: str) -> None:
    """Never a path in a tree (``main:../x`` reads outside the repository), a space or a control character."""
    if re.search(r"[:\s\x00-\x1f\x7f]", base):
        raise UserError(
            f"target.base {base!r} is not a branch, tag or commit (a ref name has no ':', space or control character)",
            path=path,
            line=_line_of(text, r"^\s*base\s*="),
        )


def _check_test_environment(tests: dict, text: str, path: str) -> None:
    if tests.get("home", "scratch") not in ("scratch", "user"):
        raise UserError(
            f'tests.home must be "scratch" or "user", not {tests["home"]!r}',
            path=path,
            line=_line_of(text, r"^\s*home\s*="),
        )
    for name in tests.get("pass_env", ()):
        _check_pass_env(name, path, _line_of(text, r"^\s*pass_env\s*="))


def _check_pass_env(name: str, path: str, line: int | None) -> None:
    bare = name.removesuffix("*")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", bare) or ("*" in bare):
        raise UserError(
            f"tests.pass_env: {name!r} is not a variable name (or a prefix ending in *)", path=path, line=line
        )
    if secrets.credential_name(bare) or bare.upper() in ("HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
        what = "carries a credential" if secrets.credential_name(bare) else "is ggstack's to set for a test run"
        raise UserError(
            f"tests.pass_env: {name} {what}; a patch's tests never get it (a test that needs a value: tests.env"
            + (', or tests.home = "user"' if bare.upper() == "HOME" else "")
            + ")",
            path=path,
            line=line,
        )


def _no_options(data: dict, text: str, path: str) -> None:
    """``remote = "--upload-pack=…"`` would run a command."""
    for section, key in (("target", "remote"), ("target", "base"), ("branches", "template")):
        value = data.get(section, {}).get(key, "")
        if value.startswith("-"):
            raise UserError(
                f"{section}.{key} must not start with '-' (git would take {value!r} as an option)",
                path=path,
                line=_line_of(text, rf"^\s*{key}\s*="),
            )


def _line_of(text: str, pattern: str) -> int | None:
    for n, line in enumerate(text.splitlines(), 1):
        if re.search(pattern, line):
            return n
    return None


def _toml_error_line(e: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"line (\d+)", str(e))
    return int(m.group(1)) if m else None
