"""Shared fixtures: real git repositories in tmp dirs, and ggstack run as a real subprocess."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from forge_server import FakeGitHub
from gitrepo import GitRepo, run_ggstack  # noqa: F401  (re-exported for tests)


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees the developer's ~/.gitconfig, and every commit has an identity."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for key, value in {
        "GIT_AUTHOR_NAME": "Test Author",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "Test Committer",
        "GIT_COMMITTER_EMAIL": "committer@example.com",
    }.items():
        monkeypatch.setenv(key, value)
    for key in (
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_API_URL",
        "GITHUB_ACTIONS",
        "GITHUB_STEP_SUMMARY",
        "GGSTACK_PATCHES",
    ):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def repo(tmp_path) -> GitRepo:
    """An empty repository on branch main."""
    return GitRepo.init(tmp_path / "fork")


@pytest.fixture
def forge(request: pytest.FixtureRequest) -> Iterator[FakeGitHub]:
    """A local GitHub-shaped server that takes the test module's own ``TOKEN``."""
    with FakeGitHub(request.module.TOKEN) as server:
        yield server
