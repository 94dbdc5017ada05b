"""A patch's tests never find the bot's credential, whichever way the CI gave it.

The patch here carries a test that goes looking for the token along every route
it has: its own environment, every /proc/<pid>/environ and cmdline it can read
(its parents' and every ggstack process's), the git config of its checkout and
of the fork, git's credential helpers in both, the credential files of its
HOME, and ggstack's saved Runs and caches. The token is handed to ggstack in
each form a CI system hands it in: token variables, git's auth header in
``GIT_CONFIG_*`` and in ``GIT_CONFIG_PARAMETERS``, a credential helper, an
askpass program, an agent socket, a ``.netrc``. In one local ``sync`` the
environment forms are held back from every process while the tests run; the
forms that are files (a fork config with an auth header, ``~/.netrc``) no
process boundary can hide, so the untrusted stage refuses to run where they
are, and the split CI shape puts them only where no patch code runs.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest
from forge_server import FakeGitHub
from gitrepo import GitRepo, run_ggstack

from ggstack import git, importing
from ggstack.model import Run
from ggstack.series import store
from ggstack.testing import environment

# One token a test process: the probes scan every process on the machine, and a test beside this one
# (another pytest worker) holds its own token legitimately in its pr stage.
TOKEN = "ghp_" + "Cred3ntialProbe" + f"{os.getpid():010d}" + "abcdefXYZ"
SLUG = "upstream/proj"

CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"

# The patch's test: the fix's own test, and the search. What it finds (the routes, never the
# values) goes to PROBE_OUT, one line a run.
PROBE = r"""import base64
import json
import os
import subprocess

from calc import add


def _git(*args, stdin=None):
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        p = subprocess.run(["git", *args], input=stdin, capture_output=True, text=True, timeout=30, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return repr(e)
    return p.stdout + p.stderr


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def test_look_for_the_token_everywhere_then_add():
    token = os.environ["PROBE_KEY"][::-1]
    forms = [token, base64.b64encode(("x-access-token:" + token).encode()).decode()]
    seen = {"own environment": "\n".join(f"{k}={v}" for k, v in os.environ.items())}
    ggstack_pids = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        for what in ("environ", "cmdline"):
            text = _read(f"/proc/{pid}/{what}")
            if text is not None:
                seen[f"/proc/{pid}/{what}"] = text
        if "\0-m\0ggstack\0" in (seen.get(f"/proc/{pid}/cmdline") or ""):
            ggstack_pids.append(pid)
    fork = os.environ["PROBE_FORK"]
    ask = "protocol=https\nhost=github.com\n\n"
    seen["git config of the test checkout"] = _git("config", "--list", "--show-origin", "--includes")
    seen["git config of the fork"] = _git("-C", fork, "config", "--list", "--show-origin", "--includes")
    seen["credential helper of the test checkout"] = _git("credential", "fill", stdin=ask)
    seen["credential helper of the fork"] = _git("-C", fork, "credential", "fill", stdin=ask)
    home = os.path.expanduser("~")
    for name in (".netrc", "_netrc", ".git-credentials", ".config/git/credentials", ".config/gh/hosts.yml"):
        text = _read(os.path.join(home, name))
        if text is not None:
            seen["~/" + name] = text
    for var in ("NETRC", "GIT_ASKPASS", "SSH_ASKPASS"):
        if os.environ.get(var):
            seen[var] = _read(os.environ[var]) or ""
    for root, _, files in os.walk(os.path.join(fork, ".git", "ggstack")):
        for name in files:
            if "worktrees" not in root:
                seen[os.path.join(root, name)] = _read(os.path.join(root, name)) or ""
    credential_vars = sorted(
        k for k in os.environ
        if k in ("SSH_AUTH_SOCK", "GIT_ASKPASS", "SSH_ASKPASS", "NETRC", "GIT_CONFIG_PARAMETERS", "GITHUB_TOKEN")
        or k.startswith("GIT_CONFIG_KEY_") or k.endswith("_TOKEN")
    )
    found = sorted(route for route, text in seen.items() if any(f in text for f in forms))
    line = {"found": found, "routes": len(seen), "ggstack": ggstack_pids, "vars": credential_vars, "home": home}
    with open(os.environ["PROBE_OUT"], "a") as f:
        f.write(json.dumps(line) + "\n")
"""


def _basic(token: str) -> str:
    return base64.b64encode(f"x-access-token:{token}".encode()).decode()


FORMS = (TOKEN, _basic(TOKEN))
# The privileged job is another machine: its own replay of a patch is another commit (its
# committer), never by the same second the very commit the untrusted job made.
PRIVILEGED = {"GIT_COMMITTER_NAME": "The Privileged Job"}


class World:
    """A fork whose remote is the forge's bare repository, a stack whose one patch carries the probe."""

    def __init__(self, tmp: Path, forge: FakeGitHub) -> None:
        self.tmp, self.forge = tmp, forge
        self.upstream = GitRepo.init(tmp / "upstream.git", bare=True)
        self.fork = GitRepo.init(tmp / "fork")
        self.fork.git("remote", "add", "origin", str(self.upstream.path))
        self.base = self.fork.commit("calc", {"calc.py": CALC})
        self.fork.git("push", "-q", "origin", "main")
        forge.add_repo(SLUG, str(self.upstream.path))
        self.fork.git("checkout", "-q", "-b", "feature")
        self.patch = self.fork.commit("fix add()", {"calc.py": FIXED, "tests/test_calc.py": PROBE})
        self.fork.git("checkout", "-q", "main")
        self.patches = tmp / "patches"
        self.probes = tmp / "probes.jsonl"
        self.home = tmp / "home"
        self.home.mkdir()
        store.init(str(self.patches), "s", SLUG, "main")
        env = {
            "PROBE_KEY": TOKEN[::-1],
            "PROBE_OUT": str(self.probes),
            "PROBE_FORK": str(self.fork.path),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }
        toml = self.patches / "s" / "stack.toml"
        text = toml.read_text().replace(
            'cpu = "python -m pytest -q {tests}"', 'cpu = "{python} -m pytest -q -p no:cacheprovider {tests}"'
        )
        toml.write_text(text + "env = " + "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }\n")
        repo = git.Repository(str(self.fork.path))
        store.save(importing.commits(repo, store.load(str(self.patches), "s"), [self.patch]).stack)

    def gg(self, *args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        where = cwd or self.fork.path
        proc = run_ggstack("--repo", str(where), "--patches", str(self.patches), *args, cwd=self.tmp, env=env)
        for form in FORMS:
            assert form not in proc.stdout + proc.stderr
        return proc

    def quiet_env(self, **extra: str) -> dict[str, str]:
        """What every ggstack here runs with: the forge, fast retries, this world's HOME."""
        return {
            "GITHUB_API_URL": self.forge.url,
            "HOME": str(self.home),
            "GIT_CONFIG_GLOBAL": str(self.home / ".gitconfig"),
            "GGSTACK_RETRY_ATTEMPTS": "1",
            "GGSTACK_RETRY_BUDGET_SECONDS": "1",
            **extra,
        }

    def every_form(self) -> dict[str, str]:
        """The token as CI systems hand it to a job's processes (beside ``~/.netrc``)."""
        askpass = self.tmp / "askpass.sh"
        askpass.write_text(f"#!/bin/sh\necho {TOKEN}\n")
        askpass.chmod(0o755)
        netrc = self.tmp / "ci.netrc"
        netrc.write_text(f"machine github.com login x-access-token password {TOKEN}\n")
        helper = f"!f() {{ echo username=x-access-token; echo password={TOKEN}; }}; f"
        return {
            "GITHUB_TOKEN": TOKEN,
            "GH_TOKEN": TOKEN,
            "CI_JOB_TOKEN": TOKEN,
            "DEPLOY_PASSWORD": TOKEN,
            "GIT_CONFIG_COUNT": "3",
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
            "GIT_CONFIG_KEY_1": f"http.{self.forge.url}/.extraheader",
            "GIT_CONFIG_VALUE_1": f"AUTHORIZATION: basic {_basic(TOKEN)}",
            "GIT_CONFIG_KEY_2": "credential.helper",
            "GIT_CONFIG_VALUE_2": helper,
            "GIT_CONFIG_PARAMETERS": f"'http.https://github.com/.extraheader'='AUTHORIZATION: bearer {TOKEN}'",
            "GIT_ASKPASS": str(askpass),
            "SSH_ASKPASS": str(askpass),
            "SSH_AUTH_SOCK": str(self.tmp / "agent.sock"),
            "NETRC": str(netrc),
        }

    def probed(self) -> list[dict]:
        return [json.loads(line) for line in self.probes.read_text().splitlines()] if self.probes.exists() else []


@pytest.fixture
def world(tmp_path: Path, forge: FakeGitHub) -> World:
    return World(tmp_path, forge)


def _nothing_found(probes: list[dict], home: Path) -> None:
    assert probes
    for p in probes:
        assert p["found"] == [], p
        assert p["vars"] == [], p
        assert p["routes"] > 20 and p["ggstack"], p  # it did look, ggstack's own processes included
        assert Path(p["home"]) != home  # a scratch HOME: not the ~/.netrc ggstack was given


def _nowhere_on_disk(*roots: Path) -> None:
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and "objects" not in path.parts:
                data = path.read_bytes()
                for form in FORMS:
                    assert form.encode() not in data, path


def test_one_local_sync_given_the_token_in_every_form_its_tests_find_none_and_its_pr_stage_uses_it(
    world: World,
) -> None:
    (world.home / ".netrc").write_text(f"machine github.com login x-access-token password {TOKEN}\n")
    env = world.quiet_env(**world.every_form())
    proc = world.gg("sync", "s", "--onto", "main", "--fetch", env=env)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    run = Run.from_json(
        json.loads((Path(git.Repository(str(world.fork.path)).state_dir("runs")) / "s.json").read_text())
    )
    assert run.stages["fetch"].startswith("ok") and run.stages["test"] == "ok", run.stages
    assert run.stages["pr"] == "ok", run.stages  # after the tests, the forge got the token
    assert [p["title"] for p in world.forge.pulls(SLUG)] == ["fix add()"]
    probes = world.probed()
    assert len(probes) == 2  # base + tests (the old base + tests: the same tree, read from the cache), base + patch
    _nothing_found(probes, world.home)

    again = world.gg("test", "s", "--onto", "main", "--no-cache", env=env)  # now with a Run and caches to read
    assert again.returncode == 0, again.stdout + again.stderr
    _nothing_found(world.probed()[3:], world.home)
    _nowhere_on_disk(world.fork.path / ".git" / "ggstack")


# -- the split: the untrusted stage refuses where a credential is in reach ---------------------


def _refusals(world: World) -> list[tuple[str, dict[str, str], str]]:
    """(what, environment, the words the refusal names it by), one a form."""
    forms = world.every_form()
    single = [
        ("a token variable", {"GITHUB_TOKEN": TOKEN}, "GITHUB_TOKEN"),
        ("a job token of the CI", {"CI_JOB_TOKEN": TOKEN}, "CI_JOB_TOKEN"),
        (
            "git's auth header in GIT_CONFIG_*",
            {
                k: forms[k]
                for k in ("GIT_CONFIG_COUNT", *(f"GIT_CONFIG_{w}_{i}" for w in ("KEY", "VALUE") for i in range(3)))
            },
            "extraheader (GIT_CONFIG_*)",
        ),
        ("git -c's auth header", {"GIT_CONFIG_PARAMETERS": forms["GIT_CONFIG_PARAMETERS"]}, "GIT_CONFIG_PARAMETERS"),
        ("an askpass program", {"GIT_ASKPASS": forms["GIT_ASKPASS"]}, "GIT_ASKPASS"),
        ("an ssh agent", {"SSH_AUTH_SOCK": forms["SSH_AUTH_SOCK"]}, "SSH_AUTH_SOCK"),
        ("a netrc named by NETRC", {"NETRC": forms["NETRC"]}, "NETRC"),
    ]
    return single


def test_the_untrusted_stage_refuses_to_run_patch_code_where_a_credential_is_in_reach(world: World) -> None:
    for what, given, named in _refusals(world):
        proc = world.gg("sync", "s", "--onto", "main", "--no-forge", env=world.quiet_env(**given))
        assert proc.returncode == 2, (what, proc.stdout + proc.stderr)
        assert "must hold no credential" in proc.stderr and named in proc.stderr, (what, proc.stderr)
        shard = world.gg("test", "s", "--onto", "main", "--shard", "1/1", env=world.quiet_env(**given))
        assert shard.returncode == 2 and named in shard.stderr, (what, shard.stderr)
    # The forms that are files: in the fork's config (actions/checkout's persist-credentials),
    # a credential helper in the global config, ~/.netrc and ~/.git-credentials.
    files = [
        ("fork", f"http.{world.forge.url}/.extraheader", f"AUTHORIZATION: basic {_basic(TOKEN)}"),
        ("fork", "remote.mirror.url", f"https://gitlab-ci-token:{TOKEN}@gitlab.example.com/proj.git"),
        ("global", "credential.helper", "store"),
    ]
    for where, key, value in files:
        config = world.fork.path / ".git" / "config" if where == "fork" else world.home / ".gitconfig"
        before = config.read_text() if config.exists() else ""
        subprocess.run(["git", "config", "--file", str(config), key, value], check=True)
        proc = world.gg("sync", "s", "--onto", "main", "--no-forge", env=world.quiet_env())
        assert proc.returncode == 2 and key.split(".")[-1] in proc.stderr.lower(), (key, proc.stderr)
        config.write_text(before)
    for name in (".netrc", ".git-credentials"):
        (world.home / name).write_text(f"https://x-access-token:{TOKEN}@github.com\n")
        proc = world.gg("sync", "s", "--onto", "main", "--no-forge", env=world.quiet_env())
        assert proc.returncode == 2 and str(world.home / name) in proc.stderr, proc.stderr
        (world.home / name).unlink()
    assert world.probed() == []  # no patch code ran
    assert world.forge.write_calls() == 0
    # A CI's job token that every job has (Buildkite's agent token) is not refused: it is held back.
    ok = world.gg("sync", "s", "--onto", "main", "--no-forge", env=world.quiet_env(BUILDKITE_AGENT_ACCESS_TOKEN=TOKEN))
    assert ok.returncode in (0, 1), ok.stdout + ok.stderr
    _nothing_found(world.probed(), world.home)


# -- the split: untrusted job → Run + bundle → privileged job in a fresh checkout ---------------


def _untrusted(world: World, out: Path) -> Run:
    proc = world.gg(
        "sync",
        "s",
        "--onto",
        "main",
        "--no-forge",
        "--run-json",
        str(out / "run.json"),
        "--bundle",
        str(out / "commits.bundle"),
        env=world.quiet_env(),
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    run = Run.from_json(json.loads((out / "run.json").read_text()))
    assert run.stages["pr"].startswith("skipped: --no-forge")
    return run


def _privileged_checkout(world: World) -> GitRepo:
    """The privileged job's checkout: a fresh clone (the base, none of the untrusted job's
    commits), given the token as a CI gives it: an auth header in its config, a .netrc."""
    clone = GitRepo(world.tmp / "privileged")
    subprocess.run(["git", "clone", "-q", str(world.upstream.path), str(clone.path)], check=True)
    clone.git("config", f"http.{world.forge.url}/.extraheader", f"AUTHORIZATION: basic {_basic(TOKEN)}")
    return clone


def test_the_split_untrusted_job_finds_nothing_and_the_privileged_job_pushes_what_it_verified(
    world: World,
) -> None:
    out = world.tmp / "ggstack-run"
    run = _untrusted(world, out)
    _nothing_found(world.probed(), world.home)
    (commit,) = [o.commit for o in run.outcomes]
    clone = _privileged_checkout(world)
    assert clone.git("cat-file", "-t", commit or "", check=False) != "commit"  # it is only in the bundle
    ran = len(world.probed())
    env = world.quiet_env(**world.every_form(), **PRIVILEGED)
    proc = world.gg(
        "pr", "s", "--run", str(out / "run.json"), "--bundle", str(out / "commits.bundle"), env=env, cwd=clone.path
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert len(world.probed()) == ran  # the privileged stage ran no patch code
    (pull,) = world.forge.pulls(SLUG)
    assert pull["title"] == "fix add()"
    branch = pull["head"]["ref"]
    assert world.upstream.git("rev-parse", f"refs/heads/{branch}") == commit  # the very commit the tests ran on
    assert clone.git("for-each-ref", "refs/ggstack/run/") == ""  # the bundle's names were never written as refs


def _tampered(world: World, out: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    data = json.loads((out / "run.json").read_text())
    edit(data)
    path = out / "tampered.json"
    path.write_text(json.dumps(data))
    return path


def test_the_privileged_stage_refuses_a_run_or_commits_that_are_not_the_stacks(world: World) -> None:
    out = world.tmp / "ggstack-run"
    run = _untrusted(world, out)
    clone = _privileged_checkout(world)
    bundle = str(out / "commits.bundle")
    env = world.quiet_env(GITHUB_TOKEN=TOKEN, **PRIVILEGED)
    # A commit with the patch's parent and message but another tree: what a test that rewrote
    # ggstack in its job could hand on. It travels in a bundle of its own.
    forged = world.fork.git(
        "commit-tree",
        world.fork.git("rev-parse", f"{world.base}^{{tree}}"),
        "-p",
        world.base,
        "-m",
        "fix add()",
    )
    world.fork.git("update-ref", "refs/forged", forged)
    world.fork.git("bundle", "create", str(out / "forged.bundle"), "refs/forged", f"^{world.base}")
    (branch,) = [o.branch for o in run.outcomes]
    cases = [
        ("no bundle", out / "run.json", None),  # first: a bundle read once leaves its objects here
        ("another branch", _tampered(world, out, lambda d: d["patches"][0].update(branch="refs/heads/main")), bundle),
        ("another stack", _tampered(world, out, lambda d: d.update(stack="other")), bundle),
        (
            "another commit",
            _tampered(world, out, lambda d: d["patches"][0].update(commit=forged)),
            str(out / "forged.bundle"),
        ),
        ("a patch left out", _tampered(world, out, lambda d: d["patches"].clear()), bundle),
    ]
    for what, path, given in cases:
        args = ["pr", "s", "--run", str(path)] + (["--bundle", given] if given else [])
        proc = world.gg(*args, env=env, cwd=clone.path)
        assert proc.returncode == 2, (what, proc.stdout + proc.stderr)
        assert "does not match stack 's'" in proc.stderr, (what, proc.stderr)
    assert world.forge.write_calls() == 0 and world.forge.pulls(SLUG) == []
    assert world.upstream.git("for-each-ref", "refs/heads/").count("\n") == 0  # main alone
    assert branch and branch.startswith("refs/heads/gg/s/")


def test_test_runs_get_an_allow_listed_environment_and_config_without_credentials(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pieces, in-process: what a test run's environment and git config are made of."""
    (world.home / ".gitconfig").write_text(
        "[user]\n\tname = The User\n\temail = user@example.com\n"
        '[credential "https://github.com"]\n\thelper = store\n'
        f'[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic {_basic(TOKEN)}\n'
        f'[url "https://x-access-token:{TOKEN}@github.com/"]\n\tinsteadOf = https://github.com/\n'
        '[alias]\n\tst = "status --short"\n'
    )
    for k, v in {**world.every_form(), "GIT_CONFIG_GLOBAL": str(world.home / ".gitconfig"), "HF_HOME": "/x"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MY_PROXY", f"http://user:{TOKEN}@proxy.example.com:3128")
    stack = store.load(str(world.patches), "s")
    env = environment.base_env(stack)
    assert "PATH" in env and "PROBE_KEY" in env  # the allow-list, and tests.env
    for k, v in env.items():
        assert not any(f in v for f in FORMS), k
    assert "HF_HOME" not in env and "HOME" not in env and "SSH_AUTH_SOCK" not in env
    config = environment.own_git_config()["GIT_CONFIG_GLOBAL"]
    assert "The User" in config and "status --short" in config
    assert "helper" not in config and "extraheader" not in config and TOKEN not in config


def test_stack_toml_can_pass_a_variable_on_but_never_a_credential(world: World) -> None:
    toml = world.patches / "s" / "stack.toml"
    text = toml.read_text()
    toml.write_text(text.replace("[tests]\n", '[tests]\npass_env = ["HF_HOME", "TORCH_*"]\n'))
    assert store.load(str(world.patches), "s").config.tests.pass_env == ("HF_HOME", "TORCH_*")
    for bad in ("HF_TOKEN", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "AWS_SECRET_ACCESS_KEY", "HOME"):
        toml.write_text(text.replace("[tests]\n", f'[tests]\npass_env = ["{bad}"]\n'))
        proc = world.gg("list", "s", env=world.quiet_env())
        assert proc.returncode == 2 and "tests.pass_env" in proc.stderr and bad in proc.stderr, proc.stderr
    toml.write_text(text.replace('home = "scratch"', 'home = "mine"'))
    proc = world.gg("list", "s", env=world.quiet_env())
    assert proc.returncode == 2 and "tests.home" in proc.stderr


def test_a_scratch_home_unless_the_stack_asks_for_the_users(world: World) -> None:
    env = world.quiet_env()
    proc = world.gg("test", "s", "--onto", "main", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {p["home"] for p in world.probed()} and all(p["home"] != str(world.home) for p in world.probed())
    toml = world.patches / "s" / "stack.toml"
    toml.write_text(toml.read_text().replace('home = "scratch"', 'home = "user"'))
    proc = world.gg("test", "s", "--onto", "main", "--no-cache", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert world.probed()[-1]["home"] == str(world.home)
