"""README's first command, verbatim, on a fresh checkout: it sets up everything
the demo needs and the demo tells the seed's story.

The line is read from README's "Set up" section and run as written by a
plain shell, without activating anything first. Installing torch from
scratch takes minutes, so where the interpreter running this suite has the
same Python version as ``python3`` on PATH, the venv is made beforehand with
its own pip and one ``.pth`` line pointing at this suite's site-packages (pip
then finds pytest and torch already satisfied); everything else — the venv, ``pip install -e
'.[demo]'``, ``ggstack`` found on PATH after activation — happens as a new
user would see it.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # end to end: the suite runs it, `pytest -m "not slow"` does not

ROOT = Path(__file__).resolve().parent.parent


def first_command() -> str:
    setup = (ROOT / "README.md").read_text().split("## Set up", 1)[1]
    block = re.search(r"```sh\n(.*?)\n```", setup, re.S)
    assert block, "README's Set up section has no sh block"
    return block.group(1).strip()


def _fresh_checkout(dest: Path) -> None:
    """The tracked files (what a clone has, with this tree's edits), nothing built."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=False)
    if listed.returncode != 0:  # not a git checkout: an sdist or a copy
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info"))
        return
    for name in listed.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)


def _plain_path() -> str:
    """PATH without this suite's venv: the command's ``python3`` is the machine's."""
    ours = os.path.dirname(sys.executable)
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != ours)


def _reuse_installed_packages(checkout: Path, path: str) -> None:
    """A venv made beforehand, as the command will make it, that also sees this suite's packages.

    It gets its own pip first (so that the command's ``pip`` is the new venv's,
    never this suite's), then one ``.pth`` line; the command's ``python3 -m
    venv .venv`` keeps both (it does not clear an existing venv)."""
    python3 = shutil.which("python3", path=path)
    assert python3, "python3 is not on PATH"
    version = subprocess.run(
        [python3, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip()
    if version != f"{sys.version_info[0]}.{sys.version_info[1]}":
        return  # another Python: the command installs everything itself
    subprocess.run([python3, "-m", "venv", str(checkout / ".venv")], check=True, env={**os.environ, "PATH": path})
    packages = checkout / ".venv" / "lib" / f"python{version}" / "site-packages"
    assert (checkout / ".venv" / "bin" / "pip").exists()
    (packages / "_ggstack_test_reuse.pth").write_text("\n".join(site.getsitepackages()) + "\n")


def _row(stdout: str, n: int) -> str:
    """The lines of patch ``n``'s row in the maintainer's table (a row spans lines)."""
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(rf"^\W*000{n} ", line)), None)
    assert start is not None, f"no table row for patch {n} in:\n{stdout}"
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^\W*\d{4} |^\W*$|^└", lines[i])), len(lines))
    return "\n".join(lines[start:end])


def test_readme_first_command_sets_up_and_tells_the_story(tmp_path: Path) -> None:
    command = first_command()
    assert "'.[demo]'" in command and command.endswith("ggstack demo")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    _fresh_checkout(checkout)
    path = _plain_path()
    _reuse_installed_packages(checkout, path)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "GGSTACK_PATCHES")}
    env["PATH"] = path
    proc = subprocess.run(
        ["/bin/sh", "-c", command], cwd=checkout, env=env, capture_output=True, text=True, timeout=1800
    )
    # 1, as sync would exit for this Run: 0002 is partial, a patch a human looks at.
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout
    first, second, third = (_row(out, n) for n in (1, 2, 3))
    assert "represented" in first and "do not open" in first
    assert "partial" in second and "open PR" in second
    assert "unique" in third and "open PR" in third
    assert "remaining diff" in out  # the partial patch's PR carries only what the base lacks
    assert "could not run" not in out  # pytest and torch came with the command
    assert "Next, on your own fork" in out
    # The command installed into its own venv, never into the one running this suite.
    ours = subprocess.run(
        [sys.executable, "-c", "import ggstack; print(ggstack.__file__)"], capture_output=True, text=True, cwd=tmp_path
    )
    assert Path(ours.stdout.strip()).resolve().is_relative_to(ROOT), ours.stdout + ours.stderr
