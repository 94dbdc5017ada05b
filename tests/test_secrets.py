"""Secret scrubbing: every form a credential of the environment can take in a message is hidden."""

from __future__ import annotations

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
