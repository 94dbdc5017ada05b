"""The secrets ggstack holds, and the one place that hides them from what it prints or saves.

The forge token and credentials in ``GITHUB_API_URL`` can be quoted by any
message from requests, PyGithub or git, and a message travels far (stderr,
Actions logs and annotations, the step summary, the saved Run): so every
message on its way out goes through ``Secrets.scrub``, and a URL ggstack names
itself is shown without its userinfo (``shown_url``). A patch's tests are the
patch's code and could read ``/proc/<pid>/environ`` of their ancestors, so the
secrets never stay in ggstack's process environment (``keep_out_of_environ``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, TypeVar, cast

TOKEN_VARS = ("GITHUB_TOKEN", "GH_TOKEN")
URL_VARS = ("GITHUB_API_URL",)
HIDDEN = "***"
SECRETS_FD = "GGSTACK_SECRETS_FD"  # the inherited pipe the re-executed ggstack reads its secrets from

held: dict[str, str] = {}  # the secrets taken out of the environment (empty until keep_out_of_environ)
T = TypeVar("T")

# scheme://userinfo@ anywhere in a text: whatever URL it is, its credentials are not for printing.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@]+@")
_SHORTEST = 4  # a shorter bare value is not searched for on its own: it would blank out ordinary words
_ENCODED_SHORTEST = 12  # a shorter secret's encodings are few characters: ordinary words again
# How git over HTTPS carries a GitHub token (actions/checkout's extraheader, a credential helper):
# "AUTHORIZATION: basic " + base64("x-access-token:" + token).
_BASIC_USER = "x-access-token:"


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
    import urllib.parse  # here: a URL with userinfo is rare, and every command reads the URLs at start-up

    found = [f"{userinfo}@", f"{urllib.parse.unquote(userinfo)}@"]
    for part in re.split(r"[:@]", userinfo):
        found += [part, urllib.parse.unquote(part)]
    return found


def encoded(value: str) -> list[str]:
    """The forms ``value`` takes where a program passes it on: as it is, percent-encoded (in a
    URL), and base64-encoded — alone, as the password of GitHub's basic auth
    (``x-access-token:<value>``, the header git sends), and inside any longer base64 text
    (the part of its encoding that is the same wherever it starts in that text)."""
    import base64
    import urllib.parse

    forms = [value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)]
    if len(value) < _ENCODED_SHORTEST:
        return list(dict.fromkeys(forms))
    raw = value.encode("utf-8", "surrogateescape")
    for whole in (raw, _BASIC_USER.encode() + raw):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(whole).decode()
            forms += [text, text.rstrip("=")]
    for shift in range(3):  # the value at each of the three places a base64 group can start
        text = base64.b64encode(b"\0" * shift + raw).decode()
        start = 4 if shift else 0  # the group that also holds what came before the value
        end = len(text) - (4 if (shift + len(raw)) % 3 else 0)  # and the one holding what follows
        for stable in (text[start:end], text[start:end].replace("+", "-").replace("/", "_")):
            if len(stable) >= _ENCODED_SHORTEST:
                forms.append(stable)
    return list(dict.fromkeys(forms))


def _header_secrets(env: Mapping[str, str]) -> list[str]:
    """The credentials of an ``http.extraheader`` passed as GIT_CONFIG_* (actions/checkout's way):
    the header's last word, and the token inside it where it is basic auth's base64."""
    import base64
    import binascii

    found = []
    count = env.get("GIT_CONFIG_COUNT", "")
    for i in range(int(count) if count.isdigit() else 0):
        if env.get(f"GIT_CONFIG_KEY_{i}", "").lower().endswith(".extraheader"):
            credential = env.get(f"GIT_CONFIG_VALUE_{i}", "").strip().rpartition(" ")[2]
            found.append(credential)
            try:
                decoded = base64.b64decode(credential, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                continue
            found.append(decoded.partition(":")[2] or decoded)
    return found


@dataclass(frozen=True)
class Secrets:
    """The values that must never be shown, in every form they travel in (``encoded``);
    ``scrub`` replaces them with ``***``."""

    values: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Secrets:
        env = {**held, **os.environ} if env is None else env
        key = tuple(sorted((k, v) for k, v in env.items() if k in _SECRET_VARS or k.startswith("GIT_CONFIG_")))
        known = _made.get(key)
        if known is None:
            known = _made[key] = cls._from(env)
        return known

    @classmethod
    def _from(cls, env: Mapping[str, str]) -> Secrets:
        found = [env.get(var, "").strip() for var in TOKEN_VARS]
        for var in URL_VARS:
            found += _url_secrets(env.get(var, ""))
        found += _header_secrets(env)
        kept = {v for v in found if len(v) >= _SHORTEST or (len(v) > 1 and v.endswith("@"))}
        forms = {form for v in kept for form in (encoded(v) if not v.endswith("@") else [v]) if len(form) >= _SHORTEST}
        return cls(tuple(sorted(forms, key=len, reverse=True)))  # longest first: a part goes with its whole

    def scrub(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, HIDDEN + "@" if value.endswith("@") else HIDDEN)
        return _USERINFO.sub(rf"\1{HIDDEN}@", text)

    def scrub_all(self, value: T) -> T:
        """``value`` with ``scrub`` applied to every string in it: a string, a list, a dict's
        values, a dataclass's fields (a test's result: its output, its failures' names)."""
        if not self.values:
            return value
        if isinstance(value, str):
            return cast(T, self.scrub(value))
        if isinstance(value, list):
            return cast(T, [self.scrub_all(v) for v in value])
        if isinstance(value, dict):
            return cast(T, {k: self.scrub_all(v) for k, v in value.items()})
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {f.name: self.scrub_all(getattr(value, f.name)) for f in dataclasses.fields(value)}
            return cast(T, dataclasses.replace(value, **changes))
        return value


_SECRET_VARS = frozenset((*TOKEN_VARS, *URL_VARS))
_made: dict[tuple[tuple[str, str], ...], Secrets] = {}  # one Secrets a set of values: scrub is asked often


class Scrubbed:
    """A text stream (stdout, stderr) whose every line goes through ``Secrets.scrub`` first:
    whatever prints — a table, JSON, a warning, a library's message — shows no secret.
    Whole lines are scrubbed (a secret split over two writes is still one line); what
    is left of a line goes out at ``flush``."""

    def __init__(self, stream: IO[str], secrets: Secrets) -> None:
        self.stream, self.secrets, self._pending = stream, secrets, ""

    def write(self, text: str) -> int:
        head, newline, self._pending = (self._pending + text).rpartition("\n")
        if newline:
            self.stream.write(self.secrets.scrub(head + newline))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.stream.write(self.secrets.scrub(self._pending))
            self._pending = ""
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        if name == "buffer":  # bytes written there would pass unscrubbed: there is none
            raise AttributeError(name)
        return getattr(self.stream, name)


def scrub_output() -> None:
    """Put ``Scrubbed`` over ``sys.stdout`` and ``sys.stderr`` where a secret is known (once)."""
    found = Secrets.from_env()
    if not found.values:
        return
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, Scrubbed):
            stream.secrets = found
        elif stream is not None:
            setattr(sys, name, Scrubbed(stream, found))


def scrub(text: str, env: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret of the environment hidden."""
    return Secrets.from_env(env).scrub(text)


def secret_env(env: Mapping[str, str]) -> dict[str, str]:
    """The entries of ``env`` that carry credentials: the tokens, an API URL with userinfo."""
    found = {var: env[var] for var in TOKEN_VARS if env.get(var)}
    found.update({var: env[var] for var in URL_VARS if "@" in env.get(var, "")})
    return found


def _running_as_ggstack() -> bool:
    """This process is the ``ggstack`` program (not, say, a test calling the CLI in-process)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (spec is not None and spec.name == "ggstack.__main__") or os.path.basename(sys.argv[0]) == "ggstack"


def keep_out_of_environ(argv: Sequence[str], *, release: bool) -> None:
    """Re-execute ggstack without its secrets in the process environment.

    The first process writes them into a pipe and execs ``python -m ggstack
    ARGV`` with the pipe's read end inherited and the secrets gone from the
    environment; the second reads them into ``held`` and, when ``release``,
    into ``os.environ`` (children started from then on inherit them).

    ``/proc/<pid>/environ`` never changes after exec, whatever ``os.environ`` does
    later, hence the exec. The secrets go into ``os.environ`` only for commands that
    talk to the forge, and for ``sync`` only after its tests (``release_to_environ``)."""
    if os.environ.get(SECRETS_FD, "").isdigit():
        fd = int(os.environ.pop(SECRETS_FD))
        with os.fdopen(fd, "rb") as pipe:
            held.update(json.loads(pipe.read() or b"{}"))
        if release:
            release_to_environ()
        return
    found = secret_env(os.environ)
    if not found or not _running_as_ggstack() or not hasattr(os, "execve"):
        return
    read, write = os.pipe()
    os.write(write, json.dumps(found).encode())  # far below a pipe's buffer: no reader needed yet
    os.close(write)
    os.set_inheritable(read, True)
    env = {k: v for k, v in os.environ.items() if k not in found}
    env[SECRETS_FD] = str(read)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *_no_cwd_on_path(), "-m", "ggstack", *argv], env)


def _no_cwd_on_path() -> list[str]:
    """``-P``: ``python -m`` puts the working directory first on ``sys.path``, where a
    checkout's own ``json.py`` (pydantic's package has one) would shadow the standard
    library's; not when ggstack itself is importable only from there (a source tree)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with contextlib.suppress(OSError):
        if os.path.samefile(here, os.getcwd()):
            return []
    return ["-P"]


def release_to_environ() -> None:
    """The held secrets into ``os.environ``: for the forge, after any test code has run."""
    os.environ.update(held)


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
