"""Secret scrubbing: every form a credential of the environment can take in a message is hidden."""

from __future__ import annotations

import os

import pytest

from ggstack.secrets import Secrets, scrub, shown_url

TOKEN = "ghp_AbCdEf0123456789"


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("http://x:Pa55w0rd@host:8080/api/v3", "Pa55w0rd"),
        ("https://x:Pa55%40w0rd@host/api/v3", "Pa55@w0rd"),  # percent-encoded: messages may quote it either way
        ("https://Pa55w0rd@host", "Pa55w0rd"),  # a token as the user name
    ],
)
def test_userinfo_of_the_api_url_is_hidden_in_every_form(url: str, password: str) -> None:
    env = {"GITHUB_API_URL": url, "GITHUB_TOKEN": TOKEN}
    decoded = url.replace("%40", "@")
    for text in (f"the forge at {url} fails", f"auth {decoded}", f"password {password} alone", f"token {TOKEN}"):
        out = scrub(text, env)
        assert "Pa55" not in out and TOKEN not in out, out


def test_any_url_with_userinfo_loses_it_and_the_rest_is_kept() -> None:
    assert (
        Secrets().scrub("push to https://u:p@github.com/o/r.git failed")
        == "push to https://***@github.com/o/r.git failed"
    )
    assert shown_url("http://x:pw@127.0.0.1:9/api") == "http://127.0.0.1:9/api"
    assert shown_url("https://api.github.com") == "https://api.github.com"


def test_short_values_are_not_searched_for_alone() -> None:
    """A one-letter user name would blank out every "x" in a message; its "x:...@" form still goes."""
    secrets = Secrets.from_env({"GITHUB_API_URL": "http://x:y@host"})
    assert secrets.scrub("exit 3 at http://x:y@host") == "exit 3 at http://***@host"


def test_the_forge_kill_hook_refuses_what_is_not_a_count() -> None:
    from ggstack.errors import UserError
    from ggstack.forge.github import GitHub

    env = {"GITHUB_TOKEN": "ghp_" + "a" * 36, "GGSTACK_DEBUG_KILL_AFTER_WRITES": "abc"}
    with pytest.raises(UserError, match="GGSTACK_DEBUG_KILL_AFTER_WRITES='abc': expected a whole number"):
        GitHub("owner/repo", env=env)


LONG_TOKEN = "ghp_T0kenThatMustNeverBeSeen4242abcdefXYZ"


def _forms(token: str) -> dict[str, str]:
    """How a program may pass the token on: what the scrubber must know."""
    import base64
    import urllib.parse

    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "plain": token,
        "basic auth": basic,
        "basic auth header": f"AUTHORIZATION: basic {basic}",
        "base64": base64.b64encode(token.encode()).decode(),
        "url-encoded": urllib.parse.quote(token + "/+", safe="").removesuffix("%2F%2B"),
    }


@pytest.mark.parametrize("prefix", ["", "a", "ab", "abc", "Authorization: token "])
def test_the_token_is_hidden_base64_encoded_at_any_offset_of_a_longer_text(prefix: str) -> None:
    import base64

    secrets = Secrets.from_env({"GITHUB_TOKEN": LONG_TOKEN})
    text = base64.b64encode(f"{prefix}{LONG_TOKEN} and more".encode()).decode()
    shown = secrets.scrub(f"header: {text}")
    # The token's part of the encoding is hidden; what stays is the groups it shares with its neighbours.
    assert "***" in shown and len(shown) <= len(f"header: {text}") - len(LONG_TOKEN) + 8, shown


@pytest.mark.parametrize("form", ["plain", "basic auth", "basic auth header", "base64", "url-encoded"])
def test_every_encoded_form_of_the_token_is_hidden(form: str) -> None:
    text = _forms(LONG_TOKEN)[form]
    shown = Secrets.from_env({"GITHUB_TOKEN": LONG_TOKEN}).scrub(f"the test printed: {text}.")
    assert text not in shown and "***" in shown, shown


def test_the_credential_of_an_extraheader_is_hidden() -> None:
    """actions/checkout passes the token to git as an extraheader (GIT_CONFIG_*): that value and the token in it."""
    basic = _forms(LONG_TOKEN)["basic auth"]
    env = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.https://github.com/.extraheader",
        "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
    }
    secrets = Secrets.from_env(env)
    for text in (basic, LONG_TOKEN):
        assert secrets.scrub(f"x {text} y") == "x *** y"


def test_an_extraheader_held_since_the_re_exec_is_still_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the re-exec the header is out of the environment, held for git's network commands:
    what ggstack prints must still hide it, and the token inside it."""
    from ggstack import secrets

    basic = _forms(LONG_TOKEN)["basic auth"]
    for key in [k for k in os.environ if k.startswith("GIT_CONFIG_") or k in secrets.TOKEN_VARS]:
        monkeypatch.delenv(key)
    monkeypatch.setattr(
        secrets, "held_config", [("http.https://github.com/.extraheader", f"AUTHORIZATION: basic {basic}")]
    )
    for text in (basic, LONG_TOKEN):
        assert Secrets.from_env().scrub(f"x {text} y") == "x *** y"


def test_test_output_the_cache_and_the_run_hold_no_form_of_the_token(tmp_path) -> None:
    """A patch's test that finds the token and prints it, every way it can, and fails (so its
    output is kept): ``test``'s output, the test result cache and ``sync``'s Run JSON show ***."""
    import json
    import sys
    from pathlib import Path

    from gitrepo import GitRepo, run_ggstack

    secret_file = tmp_path / "token"
    secret_file.write_text(LONG_TOKEN)
    g = GitRepo.init(tmp_path / "fork")
    g.commit("base", {"a.txt": "a\n"})
    g.git("branch", "base")
    test = (
        "import base64, os, urllib.parse\n"
        "def test_leaks():\n"
        f"    token = open({str(secret_file)!r}).read()\n"
        "    print('plain', token)\n"
        "    print('basic', base64.b64encode(('x-access-token:' + token).encode()).decode())\n"
        "    print('base64', base64.b64encode(('ab' + token).encode()).decode())\n"
        "    print('url', urllib.parse.quote(token, safe=''))\n"
        "    assert False, token\n"
    )
    g.commit("fix a\n\nWith a test.", {"a.txt": "b\n", "tests/test_a.py": test})
    patches = str(tmp_path / "patches")
    env = {"GITHUB_TOKEN": LONG_TOKEN}
    for args in (["init", "s", "--repo-slug", "o/r", "--base", "base"], ["import", "s", "base..main"]):
        assert run_ggstack("--patches", patches, *args, cwd=g.path).returncode == 0
    toml = Path(patches, "s", "stack.toml")
    toml.write_text(
        toml.read_text().replace('cpu = "', f'cpu = "{sys.executable} -m pytest -q -p no:cacheprovider {{tests}} # ', 1)
    )
    tested = run_ggstack("--patches", patches, "test", "s", "--json", cwd=g.path, env=env)
    assert tested.returncode in (0, 1), tested.stderr
    run = json.loads(tested.stdout)
    tails = [t["output_tail"] for t in run["patches"][0]["tests"] if t["output_tail"]]
    assert tails and "plain ***" in tails[0], tails  # the output was kept, and scrubbed
    saved = tmp_path / "run.json"
    synced = run_ggstack(
        "--patches",
        patches,
        "sync",
        "s",
        "--dry-run",
        "--run-json",
        str(saved),
        cwd=g.path,
        env={**env, "GITHUB_API_URL": "http://127.0.0.1:9", "GGSTACK_RETRY_ATTEMPTS": "1"},  # no forge: pr fails
    )
    assert synced.returncode == 3 and saved.exists(), synced.stderr
    places = {
        "test output": tested.stdout + tested.stderr,
        "sync output": synced.stdout + synced.stderr,
        "run.json": saved.read_text(),
    }
    for path in (g.path / ".git" / "ggstack").rglob("*"):
        if path.is_file():
            places[str(path)] = path.read_text(errors="replace")
    for name, form in _forms(LONG_TOKEN).items():
        for where, text in places.items():
            assert form not in text, (name, where)
