"""The secrets ggstack holds and the one place that hides them (``Secrets.scrub``). A patch's tests could read their
ancestors' ``/proc/<pid>/environ``: credentials leave it at start-up, lent only to git's network and the forge."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import re
import sys
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, TypeVar, cast

TOKEN_VARS = ("GITHUB_TOKEN", "GH_TOKEN")
URL_VARS = ("GITHUB_API_URL",)
HIDDEN = "***"
SECRETS_FD = "GGSTACK_SECRETS_FD"  # the inherited pipe the re-executed ggstack reads its secrets from

held: dict[str, str] = {}  # the secrets taken out of the environment (empty until keep_out_of_environ)
T = TypeVar("T")
held_config: list[tuple[str, str]] = []  # the GIT_CONFIG_* entries that carry credentials, taken out with them

# scheme://userinfo@ anywhere in a text: whatever URL it is, its credentials are not for printing.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@]+@")
_SHORTEST = 4  # a shorter bare value is not searched for on its own: it would blank out ordinary words
_ENCODED_SHORTEST = 12  # a shorter secret's encodings are few characters: ordinary words again
# How git over HTTPS carries a GitHub token (actions/checkout's extraheader, a credential helper):
# "AUTHORIZATION: basic " + base64("x-access-token:" + token).
_BASIC_USER = "x-access-token:"


def shown_url(url: str) -> str:
    """``url`` without ``user:password@``."""
    return _USERINFO.sub(r"\1", url)


def _url_secrets(url: str) -> list[str]:
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
    """``value`` as it is, percent-encoded, base64, as basic auth's password, and inside longer base64."""
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


def _header_secrets(env: Mapping[str, str], held_entries: Sequence[tuple[str, str]] = ()) -> list[str]:
    """An ``http.extraheader``'s credentials, in ``env`` or held since the re-exec: its last word, and
    the token in basic auth's base64."""
    import base64
    import binascii

    found = []
    for key, value in [*config_entries(env), *held_entries]:
        if key.lower().endswith(".extraheader"):
            credential = value.strip().rpartition(" ")[2]
            found.append(credential)
            try:
                decoded = base64.b64decode(credential, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                continue
            found.append(decoded.partition(":")[2] or decoded)
    return found


@dataclass(frozen=True)
class Secrets:
    values: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Secrets:
        entries = tuple(held_config) if env is None else ()  # this process's own: what it holds counts too
        env = {**held, **os.environ} if env is None else env
        key = tuple(sorted((k, v) for k, v in env.items() if k in _SECRET_VARS or k.startswith("GIT_CONFIG_")))
        known = _made.get((key, entries))
        if known is None:
            known = _made[(key, entries)] = cls._from(env, entries)
        return known

    @classmethod
    def _from(cls, env: Mapping[str, str], held_entries: Sequence[tuple[str, str]] = ()) -> Secrets:
        found = _candidates(env) + _header_secrets({}, held_entries)
        kept = {v for v in found if len(v) >= _SHORTEST or (len(v) > 1 and v.endswith("@"))}
        forms = {form for v in kept for form in _forms(v) if len(form) >= _SHORTEST}
        return cls(tuple(sorted(forms, key=len, reverse=True)))  # longest first: a part goes with its whole

    def scrub(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, HIDDEN + "@" if value.endswith("@") else HIDDEN)
        return _USERINFO.sub(rf"\1{HIDDEN}@", text)

    def scrub_all(self, value: T) -> T:
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
_made: dict[
    tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], Secrets
] = {}  # one Secrets a set of values: scrub is asked often


def _candidates(env: Mapping[str, str]) -> list[str]:
    found = [env.get(var, "").strip() for var in TOKEN_VARS]
    for var in URL_VARS:
        found += _url_secrets(env.get(var, ""))
    return found + _header_secrets(env) + _credential_values(env)


def _forms(value: str) -> list[str]:
    return [value] if value.endswith("@") else encoded(value)


class Scrubbed:
    """Scrubs whole lines, so a secret split over two writes is still caught."""

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
    return Secrets.from_env(env).scrub(text)


def _running_as_ggstack() -> bool:
    """Not, say, a test calling the CLI in-process."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (spec is not None and spec.name == "ggstack.__main__") or os.path.basename(sys.argv[0]) == "ggstack"


def keep_out_of_environ(argv: Sequence[str], *, release: bool) -> None:
    """Re-exec with the secrets in a pipe: ``/proc/<pid>/environ`` never changes after exec.
    Only the commands that run a patch's code re-execute; ``sync`` releases them after its tests."""
    if os.environ.get(SECRETS_FD, "").isdigit():
        _take_handed(int(os.environ.pop(SECRETS_FD)), release=release)
        return
    if release:  # a command that runs no patch code would only put them straight back: no exec
        return
    clean, found, config = split_credentials(os.environ)
    if not (found or config) or not _running_as_ggstack() or not hasattr(os, "execve"):
        return
    data = json.dumps({"env": found, "config": config}).encode()
    if len(data) > 60_000:  # a pipe holds 64 KiB before it needs a reader: no secret is that long
        return
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    os.set_inheritable(read, True)
    clean[SECRETS_FD] = str(read)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *_no_cwd_on_path(), "-m", "ggstack", *argv], clean)


def _take_handed(fd: int, *, release: bool) -> None:
    with os.fdopen(fd, "rb") as pipe:
        handed = json.loads(pipe.read() or b"{}")
    held.update(handed.get("env", {}))
    held_config.extend((k, v) for k, v in handed.get("config", []))
    if release:
        release_to_environ()


def _no_cwd_on_path() -> list[str]:
    """``-P``: a checkout's own ``json.py`` would shadow the stdlib's (unless ggstack runs from a source tree)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with contextlib.suppress(OSError):
        if os.path.samefile(here, os.getcwd()):
            return []
    return ["-P"]


def release_to_environ() -> None:
    """For the forge, after any test code has run."""
    os.environ.update(held)
    _append_config(os.environ, held_config)


@contextlib.contextmanager
def lent() -> Iterator[None]:
    """For ``sync --fetch``; start no long-lived process in the block."""
    saved = dict(os.environ)
    release_to_environ()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def withheld() -> Iterator[None]:
    """For a ``sync`` called in-process: its tests run the patches' code before ``pr`` needs the token."""
    saved = dict(os.environ)
    clean, _, _ = split_credentials(os.environ)
    os.environ.clear()
    os.environ.update(clean)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


# -- what carries a credential ------------------------------------------------------------

# Variables that are a way to a credential whatever their name says: an askpass program or an
# agent socket answers git's or ssh's question for the test as readily as for ggstack.
CREDENTIAL_VARS = frozenset(
    {
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "SSH_AUTH_SOCK",
        "GPG_AGENT_INFO",
        "NETRC",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_CONFIG_PARAMETERS",  # git -c: held whole where it carries one (``_credential_parameters``)
        "KRB5CCNAME",
        "XAUTHORITY",
    }
)
# A variable whose name has one of these words (split at "_") holds a secret: GITHUB_TOKEN,
# CI_JOB_TOKEN, BUILDKITE_AGENT_ACCESS_TOKEN, NPM_AUTH_TOKEN, DB_PASSWORD, AWS_SECRET_ACCESS_KEY, …
_SECRET_WORDS = frozenset(
    {"TOKEN", "TOKENS", "PASSWORD", "PASSWD", "PASSPHRASE", "SECRET", "SECRETS", "CREDENTIAL", "CREDENTIALS", "AUTH"}
)
_SECRET_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"), ("AUTH", "KEY")})
_SECRET_ENDINGS = ("TOKEN", "PASSWORD", "SECRET", "APIKEY")
# git settings that hand a credential to whoever runs git with them.
_CREDENTIAL_SETTINGS = frozenset(
    {"extraheader", "cookiefile", "sslkey", "sslcert", "sslkeypasswd", "askpass", "sshcommand", "proxyheader"}
)
_CONFIG_VAR = re.compile(r"^GIT_CONFIG_(?:KEY|VALUE)_\d+$")


def credential_name(name: str) -> bool:
    upper = name.upper()
    if upper in CREDENTIAL_VARS or upper in TOKEN_VARS:
        return True
    words = upper.split("_")
    return (
        any(w in _SECRET_WORDS for w in words)
        or any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))
        or upper.endswith(_SECRET_ENDINGS)
    )


_USERINFO_PART = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://([^\s/?#@]+)@")


def has_userinfo(text: str) -> bool:
    """Not a bare name like ``ssh://git@host``."""
    return any(":" in m or len(m) >= 20 for m in _USERINFO_PART.findall(text))


def credential_setting(key: str, value: str) -> bool:
    lower = key.lower()
    return (
        lower.rsplit(".", 1)[-1] in _CREDENTIAL_SETTINGS
        or lower.split(".", 1)[0] == "credential"
        or has_userinfo(key)
        or has_userinfo(value)
    )


def split_credentials(env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str], list[tuple[str, str]]]:
    """(the rest, credential variables, credential ``GIT_CONFIG_*`` entries renumbered from 0)."""
    clean: dict[str, str] = {}
    found: dict[str, str] = {}
    for name, value in env.items():
        if name == "GIT_CONFIG_COUNT" or _CONFIG_VAR.match(name):
            continue
        (found if _is_credential_variable(name, value) else clean)[name] = value
    kept: list[tuple[str, str]] = []
    config: list[tuple[str, str]] = []
    for key, value in config_entries(env):
        (config if credential_setting(key, value) else kept).append((key, value))
    if kept:
        _append_config(clean, kept)
    return clean, found, config


def _is_credential_variable(name: str, value: str) -> bool:
    if name == "GIT_CONFIG_PARAMETERS":
        return _credential_parameters(value)
    return credential_name(name) or has_userinfo(value)


def config_entries(env: Mapping[str, str]) -> list[tuple[str, str]]:
    count = env.get("GIT_CONFIG_COUNT", "")
    n = int(count) if count.isdigit() else 0
    return [(env.get(f"GIT_CONFIG_KEY_{i}", ""), env.get(f"GIT_CONFIG_VALUE_{i}", "")) for i in range(n)]


def _append_config(env: MutableMapping[str, str], entries: Sequence[tuple[str, str]]) -> None:
    if not entries:
        return
    n = len(config_entries(env))
    for i, (key, value) in enumerate(entries, n):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    env["GIT_CONFIG_COUNT"] = str(n + len(entries))


def _parameters(value: str) -> list[tuple[str, str]]:
    """``git -c``'s settings, unquoted as git quotes them."""
    pairs = re.findall(r"'((?:[^']|'\\'')*)'(?:='((?:[^']|'\\'')*)')?", value)
    return [(k.replace("'\\''", "'"), v.replace("'\\''", "'")) for k, v in pairs]


def _credential_parameters(value: str) -> bool:
    return any(credential_setting(k, v) for k, v in _parameters(value)) or has_userinfo(value)


def _credential_values(env: Mapping[str, str]) -> list[str]:
    found = [
        v.strip() for k, v in env.items() if credential_name(k) and k.upper() not in CREDENTIAL_VARS and len(v) >= 8
    ]
    settings = [*config_entries(env), *held_config, *_parameters(env.get("GIT_CONFIG_PARAMETERS", ""))]
    for key, value in settings:
        if credential_setting(key, value) and value.strip():
            found += [value.strip(), value.split()[-1]]
    return found


def reachable_credentials(env: Mapping[str, str]) -> list[str]:
    """What a stage running patch code must not hold (``IN_EVERY_JOB``: every CI job has it, it reaches no forge)."""
    _, found, config = split_credentials(env)
    names = [k for k in {**held, **found} if k not in IN_EVERY_JOB]
    names += [f"git setting {k} (GIT_CONFIG_*)" for k, _ in [*held_config, *config]]
    return sorted(dict.fromkeys(names))


def credential_files(env: Mapping[str, str]) -> list[str]:
    home = env.get("HOME") or os.path.expanduser("~")
    config = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    candidates = [
        env.get("NETRC", ""),
        os.path.join(home, ".netrc"),
        os.path.join(home, "_netrc"),
        os.path.join(home, ".git-credentials"),
        os.path.join(config, "git", "credentials"),
        os.path.join(env.get("GH_CONFIG_DIR") or os.path.join(config, "gh"), "hosts.yml"),
    ]
    found = []
    for path in dict.fromkeys(c for c in candidates if c):
        with contextlib.suppress(OSError):
            if os.path.isfile(path) and os.path.getsize(path) > 0:
                found.append(path)
    return found


# Credentials a CI system gives every job and that a job cannot be run without: Buildkite's
# job-scoped agent token (artifact upload, pipeline upload; no forge). See docs/bot.md, "Buildkite".
IN_EVERY_JOB = frozenset({"BUILDKITE_AGENT_ACCESS_TOKEN"})
