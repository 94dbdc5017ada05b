"""What a user reads at the terminal: text from their repository is shown as
written, never taken as rich markup (vLLM subjects start with "[misc]", "[Bugfix]")."""

from __future__ import annotations

from gitrepo import GitRepo, run_ggstack

SUBJECT = "[misc] fix [red]the thing[/red] [/]"


def test_subjects_and_messages_with_brackets_are_printed_as_written(repo: GitRepo, tmp_path) -> None:
    repo.commit("init", {"f.txt": "a\n"})
    repo.git("branch", "old")
    repo.commit(SUBJECT, {"f.txt": "a\nb\n"})
    patches = str(tmp_path / "patches")
    assert run_ggstack("--patches", patches, "init", "s", "--repo-slug", "o/r", "--base", "old", cwd=repo.path).returncode == 0
    assert run_ggstack("--patches", patches, "import", "s", "HEAD", cwd=repo.path).returncode == 0

    listed = run_ggstack("--patches", patches, "list", "s", cwd=repo.path)
    assert listed.returncode == 0 and SUBJECT in listed.stdout, listed.stdout + listed.stderr

    checked = run_ggstack("--patches", patches, "check", "s", "--onto", "old", cwd=repo.path)
    assert checked.returncode == 0 and SUBJECT in checked.stdout, checked.stdout + checked.stderr

    missing = run_ggstack("--patches", patches, "show", "s", "[bold]x[/bold]", cwd=repo.path)
    assert missing.returncode == 2 and "'[bold]x[/bold]'" in missing.stderr
    assert "Traceback" not in missing.stderr
