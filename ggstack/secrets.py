"""The secrets ggstack holds, and the one place that hides them from what it prints or saves.

The forge token comes from the environment, and so may credentials in
``GITHUB_API_URL`` (``https://user:pw@host/api/v3``). Messages from requests,
PyGithub and git can quote either, and a message travels far: stderr, stdout
(GitHub Actions log groups and annotations), the step summary, the saved Run.
So every message on its way out goes through ``Secrets.scrub``, and a URL
ggstack names itself is shown without its userinfo (``shown_url``).
"""

from __future__ import annotations

import contextlib
import os
import re
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

TOKEN_VARS = ("GITHUB_TOKEN", "GH_TOKEN")
URL_VARS = ("GITHUB_API_URL",)
HIDDEN = "***"

# scheme://userinfo@ anywhere in a text: whatever URL it is, its credentials are not for printing.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@]+@")
_SHORTEST = 4  # a shorter bare value is not searched for on its own: it would blank out ordinary words


def shown_url(url: str) -> str:
    """``url`` without ``user:password@``: the form ggstack may print."""
    return _USERINFO.sub(r"\1", url)


def _url_secrets(url: str) -> list[str]:
    """The userinfo of ``url`` (with its "@", as written and percent-decoded) and its parts."""
    scheme_end = url.find("://")
    rest = url[scheme_end + 3 :] if scheme_end >= 0 else url
    # Up to the last "@" before the path, else in the whole value: what any reader may take for userinfo.
    userinfo = rest.split("/", 1)[0].rpartition("@")[0] or rest.rpartition("@")[0]
    if not userinfo:
        return []
    found = [f"{userinfo}@", f"{urllib.parse.unquote(userinfo)}@"]
    for part in re.split(r"[:@]", userinfo):
        found += [part, urllib.parse.unquote(part)]
    return found


@dataclass(frozen=True)
class Secrets:
    """The values that must never be shown; ``scrub`` replaces them with ``***``."""

    values: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Secrets:
        env = os.environ if env is None else env
        found = [env.get(var, "").strip() for var in TOKEN_VARS]
        for var in URL_VARS:
            found += _url_secrets(env.get(var, ""))
        kept = {v for v in found if len(v) >= _SHORTEST or (len(v) > 1 and v.endswith("@"))}
        return cls(tuple(sorted(kept, key=len, reverse=True)))  # longest first: a part goes with its whole

    def scrub(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, HIDDEN + "@" if value.endswith("@") else HIDDEN)
        return _USERINFO.sub(rf"\1{HIDDEN}@", text)


def scrub(text: str, env: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret of the environment hidden."""
    return Secrets.from_env(env).scrub(text)


@contextlib.contextmanager
def withheld() -> Iterator[None]:
    """The forge token out of this process's environment for the block.

    ``sync``'s test stage runs code from the patches, and their output is kept
    in the Run: in one sync process that must not see the token that ``pr``
    needs next (nor a git auth header the CI passes as GIT_CONFIG_*).
    """
    saved = {k: v for k, v in os.environ.items() if k in TOKEN_VARS}
    count = os.environ.get("GIT_CONFIG_COUNT", "")
    for i in range(int(count) if count.isdigit() else 0):
        if os.environ.get(f"GIT_CONFIG_KEY_{i}", "").lower().endswith(".extraheader"):
            saved[f"GIT_CONFIG_VALUE_{i}"] = os.environ[f"GIT_CONFIG_VALUE_{i}"]
    for k in saved:
        if k.startswith("GIT_CONFIG_VALUE_"):
            os.environ[k] = ""  # the key stays, so git still sees a well-formed list
        else:
            del os.environ[k]
    try:
        yield
    finally:
        os.environ.update(saved)
