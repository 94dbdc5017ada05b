"""What a patch's test command sees: its tests are the patch's code, their output lands in the Run: the environment is
an allow-list, never ggstack's own, and no credential reaches them in any form, their git config included."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence

from ggstack import git, secrets, state
from ggstack.model import Stack

# A test run's environment is made of these of ggstack's own variables, those stack.toml's
# tests.pass_env names, and tests.env; nothing else. What carries a credential is left out
# even where its name is here (``secrets.credential_name``).
_PASSED_ENV = frozenset(
    {
        *("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES"),
        *("TMPDIR", "TEMP", "TMP", "USER", "LOGNAME", "SHELL", "CI", "SOURCE_DATE_EPOCH"),
        *("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH"),
        *("PKG_CONFIG_PATH", "GIT_CONFIG_NOSYSTEM"),
        *("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"),
    }
)
_PASSED_PREFIXES = (
    *("LC_", "PYTHON", "PYTEST_", "COVERAGE_"),
    *("CUDA_", "NVIDIA_", "CUDNN_", "NCCL_", "TORCH_", "TORCHINDUCTOR_", "TRITON_"),
    *("HIP_", "ROCM_", "ROCR_", "HSA_", "OMP_", "KMP_", "MKL_", "OPENBLAS_"),
)


def expand(command: str, tests: Sequence[str]) -> str:
    """``{tests}``: the patch's test files; ``{python}``: the interpreter running ggstack
    (so a venv's ggstack runs the tests with that venv, activated or not)."""
    command = command.replace("{python}", shlex.quote(sys.executable))
    return command.replace("{tests}", " ".join(shlex.quote(t) for t in tests))


def base_env(stack: Stack) -> dict[str, str]:
    """HOME is a scratch directory of the run's own unless stack.toml's ``tests.home = "user"``."""
    cfg = stack.config.tests
    named, prefixes = _allow_list(cfg.pass_env)
    env = {k: v for k, v in os.environ.items() if (k in named or k.startswith(prefixes)) and _no_credential(k, v)}
    if cfg.home == "user" and "HOME" in os.environ:
        env["HOME"] = os.environ["HOME"]
    env.update(dict(cfg.env))
    return env


def _allow_list(pass_env: Sequence[str]) -> tuple[set[str], tuple[str, ...]]:
    named = {n for n in pass_env if not n.endswith("*")} | _PASSED_ENV
    return named, (*_PASSED_PREFIXES, *(n[:-1] for n in pass_env if n.endswith("*")))


def _no_credential(name: str, value: str) -> bool:
    return not secrets.credential_name(name) and not secrets.has_userinfo(value)


def interpreter(command: str, env: dict[str, str]) -> str:
    """The Python a test command runs: its first word when that is a Python
    (``{python}`` expands to ours), else ``python`` on the tests' PATH, else ours."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = []
    first = next((w for w in words if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)), "")
    path = env.get("PATH")
    if re.match(r"^python[0-9.]*$", os.path.basename(first)):
        found = first if "/" in first else shutil.which(first, path=path)
    else:
        found = shutil.which("python", path=path)
    # Not resolved through its links: a venv's python is a link to the base interpreter, and only
    # through the link does it see the venv's own site-packages (what the cache key must cover).
    return os.path.abspath(found or sys.executable)


def own_git_config() -> dict[str, str]:
    """The user's global and system git config, includes read in, less what hands out a credential."""
    home = os.path.expanduser("~")
    found = {
        "GIT_CONFIG_GLOBAL": [os.environ.get("GIT_CONFIG_GLOBAL", ""), os.path.join(home, ".gitconfig")],
        "GIT_CONFIG_SYSTEM": [os.environ.get("GIT_CONFIG_SYSTEM", ""), "/etc/gitconfig"],
    }
    return {var: _kept_config(candidates) for var, candidates in found.items()}


def _kept_config(candidates: list[str]) -> str:
    source = next((c for c in candidates if c and os.path.isfile(c)), None)
    entries = git.config_file_entries(source) if source else []
    return git.render_config([(k, v) for k, v in entries if _kept_setting(k, v)])


def _kept_setting(key: str, value: str | None) -> bool:
    return not secrets.credential_setting(key, value or "") and not key.lower().startswith(("include.", "includeif."))


def git_config_copies(tmp: str, texts: Mapping[str, str], *, home: bool) -> dict[str, str]:
    """Copies of the git config for one run, so that its ``git config --global`` changes only the copy
    (``home``: in a scratch HOME)."""
    env = {}
    if home:
        env["HOME"] = os.path.join(tmp, "home")
        os.makedirs(env["HOME"], exist_ok=True)
    for var, text in texts.items():
        path = (
            os.path.join(env["HOME"], ".gitconfig")
            if home and var == "GIT_CONFIG_GLOBAL"
            else os.path.join(tmp, var.lower())
        )
        with contextlib.suppress(OSError):
            state.write_atomic(path, text.encode())
        env[var] = path
    return env
