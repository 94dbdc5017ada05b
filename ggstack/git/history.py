"""Questions about commit history: merge bases, ranges, the commits that touched some paths."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from ggstack.git.objects import CommitInfo, Objects
from ggstack.threads import map_on_threads


class History(Objects):
    def merge_base(self, a: str, b: str) -> str | None:
        return self.start_merge_base(a, b)()

    def start_merge_base(self, a: str, b: str) -> Callable[[], str | None]:
        job = self.start("merge-base", "--end-of-options", a, b)
        return lambda: job.ended()[1].decode().strip() or None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self.run("merge-base", "--is-ancestor", ancestor, descendant, check=False).returncode == 0

    def is_shallow(self) -> bool:
        return os.path.exists(os.path.join(self.common_dir, "shallow"))

    def rev_list(self, *args: str) -> list[str]:
        return self.out("rev-list", *args).split()

    def branches(self, merges: Sequence[CommitInfo]) -> dict[str, list[str]]:
        """merge -> the commits its other parents brought in, one ``rev-list`` a merge (their negatives
        cannot share one), a few side by side."""
        if not merges:
            return {}

        def one(m: CommitInfo) -> list[str]:
            return self.rev_list(*m.parents[1:], "^" + m.parents[0])

        return {m.sha: branch for m, branch in zip(merges, map_on_threads(one, merges, 4), strict=True)}

    def first_parents(self, shas: Sequence[str], exclude: str) -> dict[str, list[str]]:
        feed = "".join(s + "\n" for s in shas) + f"^{exclude}\n"
        out = self.out("rev-list", "--first-parent", "--parents", "--stdin", input=feed.encode())
        return {f[0]: f[1:] for f in (line.split() for line in out.splitlines()) if f}

    def graph(self, tips: Sequence[str], exclude: Sequence[str]) -> dict[str, list[str]]:
        feed = "".join(t + "\n" for t in tips) + "".join("^" + e + "\n" for e in exclude)
        out = self.out("rev-list", "--parents", "--stdin", input=feed.encode())
        return {f[0]: f[1:] for f in (line.split() for line in out.splitlines()) if f}

    def not_reachable(self, shas: Sequence[str], tip: str) -> set[str]:
        if not shas:
            return set()
        present = {s for s, ok in self.has_objects(shas).items() if ok}
        feed = "".join(s + "\n" for s in present) + f"^{tip}\n"
        reach = set(self.out("rev-list", "--stdin", input=feed.encode()).split()) if present else set()
        return {s for s in shas if s not in present or s in reach}

    def log_raw(
        self, tips: Sequence[str], exclude: Sequence[str], paths: Sequence[str]
    ) -> list[tuple[str, list[tuple[str, str, str]]]]:
        """(commit, [(path, old blob, new blob)]) of every non-merge commit in ``tips`` not ``exclude``
        that touches ``paths``, newest first, in one ``git log --raw``; a missing side is the zero id."""
        feed = "".join(t + "\n" for t in tips) + "".join("^" + e + "\n" for e in exclude)
        feed += "--\n" + "".join(p + "\n" for p in paths)
        args = [
            "log",
            "--raw",
            "-z",
            "--no-merges",
            "--full-history",
            "--full-diff",
            "--no-abbrev",
            "--no-renames",
            "--format=%x01%H",
            "--stdin",
        ]
        raw = self.run(*args, input=feed.encode("utf-8", "surrogateescape")).stdout.decode("utf-8", "surrogateescape")
        out = []
        for chunk in raw.split("\x01")[1:]:
            fields = chunk.split("\0")
            sha = fields[0].strip()
            files = []
            for i in range(1, len(fields) - 1, 2):
                meta = fields[i].strip()
                if meta.startswith(":"):
                    parts = meta.split()
                    files.append((fields[i + 1], parts[2], parts[3]))
            out.append((sha, files))
        return out

    def renames(self, commits: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        if not commits:
            return {}
        feed = "".join(c + "\n" for c in commits).encode()
        raw = self.run(
            "diff-tree", "--stdin", "-r", "-M", "-z", "--name-status", "--diff-filter=R", "--format=%x01%H", input=feed
        ).stdout.decode("utf-8", "surrogateescape")
        out: dict[str, list[tuple[str, str]]] = {}
        for chunk in raw.split("\x01")[1:]:
            fields = chunk.split("\0")
            # After the commit id: "R<score>", old path, new path — a triple a rename.
            out[fields[0].strip()] = [(fields[i + 1], fields[i + 2]) for i in range(1, len(fields) - 2, 3)]
        return out

    def range_messages(self, tips: Sequence[str], exclude: Sequence[str]) -> list[tuple[str, str, str]]:
        feed = "".join(t + "\n" for t in tips) + "".join("^" + e + "\n" for e in exclude)
        raw = self.run("log", "--stdin", "--format=%H%x00%ae%x00%B%x00", input=feed.encode()).stdout
        fields = raw.decode("utf-8", "surrogateescape").split("\0")
        return [(fields[i].strip(), fields[i + 1], fields[i + 2]) for i in range(0, len(fields) - 2, 3)]

    def range_commits(self, lo: str, hi: str) -> list[tuple[str, tuple[str, ...]]]:
        """(commit, parents) of ``lo..hi`` in the order ``git rebase`` replays them, merges included."""
        out = self.out("rev-list", "--reverse", "--topo-order", "--parents", f"{lo}..{hi}")
        return [(f[0], tuple(f[1:])) for f in (line.split() for line in out.splitlines()) if f]

    def already_upstream(self, lo: str, hi: str) -> set[str]:
        """The commits of ``lo..hi`` that ``git rebase lo hi`` leaves out as "already upstream"."""
        out = self.out("rev-list", "--cherry-mark", "--right-only", "--no-merges", f"{lo}...{hi}")
        return {line[1:].strip() for line in out.splitlines() if line.startswith("=")}
