#!/usr/bin/env python3
"""The two shapes a fork's carry patches most often have, judged on real history.

``adapted``: a mutation corpus from a real project's commits. For each
sampled main commit X (and, where a release branch holds a pick of X, that
branch too), three fork commits are made on X's parent, as a fork would
carry them: ``exact`` (``git cherry-pick -x X``: represented), ``same-file``
(the pick plus a few lines of the fork's own, in a file X changes, at a place
neither X nor the base changed since) and ``new-file`` (the pick plus a new
file of the fork's own). The adapted ones must never be "represented": they
are ``partial``, by the pick, their remaining diff exactly the fork's lines.
Each is checked with ``ggstack check --commits`` onto main (X an ancestor)
and onto the release branch (a pick of X there).

``branches``: PR branches that live in the upstream repository itself
(``refs/heads/*`` of a project that squash-merges, e.g. diffusers), each
imported as a stack (``ggstack import STACK main..BRANCH``: the branch's own
commits, merges of main left out) and checked onto main. The truth is what
GitHub wrote, never ggstack: a squash merge's message lists the PR's commits
("* subject" lines), so a member is represented by the main commit whose list
names it; a member made after that squash, named by none, is not; a branch
no main commit names (by list, subject or patch-id) was never upstream.
Branches the labeller cannot call are reported, not scored.

Per class: a confusion table (truth × verdict) and the figures the fork's
maintainer cares about. Writes nothing to the repository but the corpus's
own commits (``adapted``: loose objects, no ref). Not a test: a measurement.

    python benchmarks/fork_classes.py adapted --repo /tmp/corpus-pytest.git --main main \\
        --release 8.3.x 8.4.x 9.0.x --n 60 --save /tmp/adapted-pytest.json
    python benchmarks/fork_classes.py branches --repo /tmp/corpus-diffusers.git --main main \\
        --since 2025-06-01 --limit 80 --save /tmp/branches-diffusers.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
PICKED = re.compile(r"\(cherry picked from commit ([0-9a-f]{7,40})\)")
BULLET = re.compile(r"(?m)^\* (.+?)\s*$")
PR_TAIL = re.compile(r"\s*\(#\d+\)\s*$")


def git(repo: str, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", "-C", repo, *args], input=input, capture_output=True, check=True, env={**os.environ, **(env or {})}
    )
    return proc.stdout.decode(errors="replace")


def ggstack(repo: str, *args: str, patches: str | None = None) -> subprocess.CompletedProcess[str]:
    pre = ["--repo", repo] + (["--patches", patches] if patches else [])
    return subprocess.run([sys.executable, "-m", "ggstack", *pre, *args], capture_output=True, text=True, env=ENV)


def patch_ids(repo: str, *rev: str) -> dict[str, str]:
    """commit -> patch-id, merges by their first-parent diff (a squash or a PR's merge)."""
    raw = subprocess.run(
        ["git", "-C", repo, "log", "-p", "-m", "--first-parent", "--format=commit %H", *rev],
        capture_output=True,
        check=True,
    ).stdout
    out = git(repo, "patch-id", "--stable", input=raw)
    return {c: p for p, c in (line.split() for line in out.splitlines())}


# -- adapted picks: the mutation corpus ----------------------------------------------------------

INFORMATIVE = re.compile(r"[^\W_]")


@dataclass
class Mutant:
    kind: str  # "exact" | "same-file" | "new-file"
    commit: str
    source: str  # X
    fork_lines: list[str] = field(default_factory=list)
    path: str = ""


def _untouched_lines(repo: str, a: str, b: str, path: str) -> set[int]:
    """1-based lines of ``path`` at ``a`` that the diff a..b leaves alone, with three lines around each change."""
    n = len(git(repo, "show", f"{a}:{path}").split("\n"))
    touched: set[int] = set()
    out = git(repo, "diff", "-U0", "--no-color", a, b, "--", path)
    for m in re.finditer(r"^@@ -(\d+)(?:,(\d+))? ", out, re.M):
        start, count = int(m.group(1)), int(m.group(2) or "1")
        touched |= set(range(start - 3, start + max(count, 1) + 4))
    return set(range(2, n)) - touched


def _fork_lines(token: str, indent: str, top: bool) -> list[str]:
    if top:
        return [f"# fork-only: keep the downstream {token} setting", f"FORK_{token.upper()}_ENABLED = True"]
    return [
        f"{indent}# fork-only: the downstream {token} tuning stays here",
        f"{indent}# (see the fork's notes on {token})",
    ]


def _commit(repo: str, tree: str, parent: str, message: str, like: str) -> str:
    fmt = git(repo, "log", "-1", "--format=%an%x00%ae%x00%ad%x00%cd", "--date=raw", like).strip()
    an, ae, ad, cd = fmt.split("\x00")
    env = {
        "GIT_AUTHOR_NAME": an,
        "GIT_AUTHOR_EMAIL": ae,
        "GIT_AUTHOR_DATE": ad,
        "GIT_COMMITTER_NAME": "Fork Maintainer",
        "GIT_COMMITTER_EMAIL": "fork@example.com",
        "GIT_COMMITTER_DATE": cd,
    }
    return git(repo, "commit-tree", tree, "-p", parent, input=message.encode(), env=env).strip()


def _tree_with(repo: str, base_tree_of: str, edits: dict[str, bytes]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git(repo, "read-tree", base_tree_of, env=env)
        for path, data in edits.items():
            blob = git(repo, "hash-object", "-w", "--stdin", input=data).strip()
            git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        return git(repo, "write-tree", env=env).strip()


def mutants(repo: str, x: str, main: str, rng: random.Random) -> list[Mutant]:
    """The exact pick of X and its two adapted forms, each on X's parent."""
    parent = git(repo, "rev-parse", f"{x}^").strip()
    message = git(repo, "log", "-1", "--format=%B", x).rstrip("\n") + f"\n\n(cherry picked from commit {x})\n"
    token = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz") for _ in range(8))
    out = [Mutant("exact", _commit(repo, f"{x}^{{tree}}", parent, message, x), x)]
    modified = [
        line.split("\t")[1]
        for line in git(repo, "diff-tree", "--no-commit-id", "-r", "--no-renames", "--name-status", x).splitlines()
        if line.startswith("M\t") and line.endswith(".py")
    ]
    for path in modified:
        free = sorted(_untouched_lines(repo, parent, x, path) & _x_lines_free(repo, x, main, path))
        if not free:
            continue
        text = git(repo, "show", f"{x}:{path}").split("\n")
        at = rng.choice(free[len(free) // 4 : max(len(free) // 4 + 1, 3 * len(free) // 4)])
        nxt = text[at - 1] if at - 1 < len(text) else ""
        indent = nxt[: len(nxt) - len(nxt.lstrip())]
        top = not indent and at >= 2 and not text[at - 2].strip() and re.match(r"(def |class |[A-Za-z_])", nxt)
        lines = _fork_lines(token, indent, bool(top))
        new = text[: at - 1] + lines + text[at - 1 :]
        tree = _tree_with(repo, x, {path: "\n".join(new).encode()})
        out.append(Mutant("same-file", _commit(repo, tree, parent, message, x), x, lines, path))
        break
    lines = [f'"""The fork\'s own {token} settings."""', "", f"FORK_{token.upper()} = {rng.randint(2, 99)}"]
    new_path = f"fork_local/{token}.py"
    tree = _tree_with(repo, x, {new_path: ("\n".join(lines) + "\n").encode()})
    out.append(Mutant("new-file", _commit(repo, tree, parent, message, x), x, lines, new_path))
    return out


def _x_lines_free(repo: str, x: str, main: str, path: str) -> set[int]:
    """Lines of ``path`` at X that the base (main) has not changed since: the fork's lines go there."""
    try:
        git(repo, "cat-file", "-e", f"{main}:{path}")
    except subprocess.CalledProcessError:
        return set()
    return _untouched_lines(repo, x, main, path)


def sample_sources(repo: str, main: str, release: Sequence[str], n: int, rng: random.Random) -> list[dict]:
    """Main commits that a release branch picked (its base holds a pick), then others, changing a few .py files."""
    picked: dict[str, str] = {}  # X -> release branch
    for rel in release:
        rel_ids = {p: c for c, p in patch_ids(repo, f"{main}..{rel}", "--no-merges").items()}
        fork = git(repo, "merge-base", main, rel).strip()
        for c, p in patch_ids(repo, f"{fork}..{main}", "--no-merges").items():
            if p in rel_ids:
                picked.setdefault(c, rel)
    plain = git(repo, "rev-list", "--no-merges", "--max-count=3000", main).split()
    chosen: list[dict] = []
    for pool in (list(picked), [c for c in plain if c not in picked]):
        rng.shuffle(pool)
        for x in pool:
            if len(chosen) >= n or (pool is not plain and len(chosen) >= n // 2 and not picked):
                break
            stat = git(repo, "diff-tree", "--no-commit-id", "-r", "--numstat", x).splitlines()
            if not 1 <= len(stat) <= 6 or not any(s.endswith(".py") for s in stat) or "-\t-" in "".join(stat):
                continue
            chosen.append({"x": x, "release": picked.get(x)})
        if len(chosen) >= n:
            break
    return chosen[:n]


def adapted(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    repo, main = args.repo, args.main
    main_tip = git(repo, "rev-parse", main).strip()
    items: list[dict] = []
    for s in sample_sources(repo, main, args.release, args.n, rng):
        for m in mutants(repo, s["x"], main, rng):
            bases = [("main", main_tip)] + (
                [(s["release"], git(repo, "rev-parse", s["release"]).strip())] if s["release"] else []
            )
            for name, base in bases:
                items.append(
                    {
                        "commit": m.commit,
                        "kind": m.kind,
                        "x": m.source,
                        "base_ref": name,
                        "base": base,
                        "fork_lines": m.fork_lines,
                        "path": m.path,
                    }
                )
    print(f"{len(items)} items from {args.n} sources", file=sys.stderr)
    verdicts: dict[tuple[str, str], dict] = {}
    t0 = time.perf_counter()
    for base in dict.fromkeys(it["base"] for it in items):
        shas = list(dict.fromkeys(it["commit"] for it in items if it["base"] == base))
        proc = ggstack(repo, "check", "--onto", base, "--json", "--no-cache", "--commits", *shas)
        if proc.returncode not in (0, 1):
            sys.exit(f"check failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        for p in json.loads(proc.stdout)["patches"]:
            verdicts[(p["source_commit"], base)] = p
    wall = time.perf_counter() - t0
    table: dict[str, Counter[str]] = defaultdict(Counter)
    wrong = []
    exact_ok = exact_n = adapted_rep = adapted_n = by_pick = remaining_ok = 0
    for it in items:
        p = verdicts[(it["commit"], it["base"])]
        cls = f"{it['kind']} onto {'main' if it['base_ref'] == 'main' else 'release'}"
        table[cls][f"{p['verdict']} / {p['recommendation']}"] += 1
        if it["kind"] == "exact":
            exact_n += 1
            exact_ok += p["verdict"] == "represented"
            if p["verdict"] != "represented":
                wrong.append((it, p))
            continue
        adapted_n += 1
        if p["verdict"] == "represented":
            adapted_rep += 1
            wrong.append((it, p))
        if p["verdict"] == "partial" and p.get("represented_by"):
            by_pick += 1
        rem = p.get("remaining_diff") or ""
        added = [ln[1:] for ln in rem.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
        if rem and [a for a in added if INFORMATIVE.search(a)] == [
            f for f in it["fork_lines"] if INFORMATIVE.search(f)
        ]:
            remaining_ok += 1
    print(f"\n{repo}: adapted picks, {len(items)} checks in {wall:.1f}s")
    for cls, cnt in sorted(table.items()):
        print(f"  {cls:<28} " + ", ".join(f"{v} {n}" for v, n in cnt.most_common()))
    print(f"exact picks represented: {exact_ok}/{exact_n}")
    print(f"adapted picks called represented: {adapted_rep}/{adapted_n} (must be 0)")
    print(f"adapted picks partial, by the pick: {by_pick}/{adapted_n}")
    print(f"adapted picks whose remaining diff is exactly the fork's lines: {remaining_ok}/{adapted_n}")
    for it, p in wrong[: args.show]:
        print(
            f"  {it['kind']} {it['commit'][:10]} (X {it['x'][:10]}) onto {it['base_ref']}: {p['verdict']} "
            f"{p['recommendation']}: {_rule(p)[:200]}"
        )
    if args.save:
        with open(args.save, "w") as fh:
            json.dump({"items": items, "verdicts": {f"{c} {b}": v for (c, b), v in verdicts.items()}}, fh)
    return 0


# -- squash-merged PR branches ----------------------------------------------------------------------


def _norm(s: str) -> str:
    return PR_TAIL.sub("", s).strip().casefold()


@dataclass
class Member:
    commit: str
    subject: str
    date: int
    truth: bool | None = None
    by: str = ""
    why: str = ""


def label_branches(repo: str, main: str, since: str, pattern: str, limit: int) -> list[dict]:
    """Each PR branch with its own commits and their truth, from the squash messages GitHub wrote."""
    refs = [
        r
        for r in git(
            repo,
            "for-each-ref",
            "--sort=-committerdate",
            "--format=%(refname:short) %(committerdate:unix)",
            f"refs/heads/{pattern}",
        ).splitlines()
        if r.split()[0] != main
        and int(r.split()[1]) >= int(git(repo, "log", "-1", "--format=%ct", f"--until={since}", main).strip() or 0)
    ]
    main_log = git(repo, "log", "--first-parent", f"--since={since}", "--format=%H%x00%ct%x00%s%x00%b%x1e", main)
    squashes: list[tuple[str, int, str, list[str]]] = []
    for rec in reversed(main_log.split("\x1e")):  # oldest first: a branch's first squash takes its commits
        rec = rec.strip("\n")
        if rec:
            sha, ct, subj, body = rec.split("\x00", 3)
            squashes.append((sha, int(ct), _norm(subj), [_norm(b) for b in BULLET.findall(body)]))
    main_ids = patch_ids(repo, f"--since={since}", main)
    by_id: dict[str, str] = {}
    for c, p in main_ids.items():
        by_id.setdefault(p, c)
    out = []
    for line in refs:
        ref = line.split()[0]
        if re.match(r"(v?\d+\.\d+|release|.*-release$|dependabot/|gh-pages)", ref):
            continue
        own = git(repo, "log", "--no-merges", "--reverse", "--topo-order", "--format=%H%x00%s%x00%ct", f"{main}..{ref}")
        members = [Member(h, s, int(t)) for h, s, t in (r.split("\x00") for r in own.splitlines() if r)]
        if not 1 <= len(members) <= 80:
            continue
        item = _label(repo, ref, main, members, squashes, by_id)
        if item is not None:
            out.append(item)
        if len(out) >= limit:
            break
    return out


def _label(repo: str, ref: str, main: str, members: list[Member], squashes: list, by_id: dict[str, str]) -> dict | None:
    """The squash commits that took this branch (each lists a run of its commits, in order) and each
    member's truth; None where the labeller cannot call the branch."""
    files = set(git(repo, "diff", "--name-only", git(repo, "merge-base", main, ref).strip(), ref).split())
    taken: dict[str, str] = {}  # member -> the squash that lists it
    named = []
    for sha, ct, subj, bullets in squashes:
        if ct < members[0].date:
            continue
        matched = _listed(members, bullets, taken) if bullets else []
        if not bullets and len(members) == 1 and subj == _norm(members[0].subject):
            matched = [members[0]]
        if not matched or 2 * len(matched) < max(len(bullets), 1):
            continue
        if len(bullets) > 1 and len(matched) < 2 and len(_norm(matched[0].subject)) < 16:
            continue  # one generic subject ("update", "fix") in another PR's list: not this branch
        if not files & set(git(repo, "diff-tree", "--no-commit-id", "-r", "--name-only", sha).split()):
            continue
        named.append((sha, ct))
        taken.update({m.commit: sha for m in matched})
    ids = patch_ids(repo, "--no-walk", *(m.commit for m in members))
    fork = git(repo, "merge-base", main, ref).strip()
    net_id = (git(repo, "patch-id", "--stable", input=git(repo, "diff", fork, ref).encode()).split() or [""])[0]
    if not named and net_id in by_id:  # a squash whose message lists nothing: its patch-id is the branch's
        named = [(by_id[net_id], 0)]
        taken = {m.commit: by_id[net_id] for m in members}
    if not named:
        if any(ids.get(m.commit) in by_id for m in members) or net_id in by_id:
            return None  # git finds some of it upstream, though no squash names it: not called
        if any(_norm(m.subject) == subj for m in members for _, _, subj, _ in squashes if len(subj) > 12):
            return None  # a main commit has one of its subjects: maybe upstream another way
        if _overlap(repo, main, fork, ref, members[0].date) >= 0.3:
            return None  # a main commit added many of its lines: maybe upstream another way
        for m in members:
            m.truth, m.why = False, "no main commit names the branch: never upstream"
        return _item(ref, members, "", "never-upstream")
    last = max(ct for _, ct in named)
    for m in members:
        if m.commit in taken:
            m.truth, m.by, m.why = True, taken[m.commit], f"listed in {taken[m.commit][:10]}'s squash message"
        elif m.date > last:
            m.truth, m.why = False, "made after the branch's squash, named by none"
        else:
            m.truth, m.why = None, "not listed, though made before a squash"
    exact = bool(net_id) and by_id.get(net_id) is not None
    return _item(ref, members, named[-1][0], "squash-exact" if exact else "squash-adapted")


def _added(text: str) -> set[str]:
    return {
        s.strip()
        for s in (ln[1:] for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
        if len(s.strip()) >= 12 and INFORMATIVE.search(s)
    }


def _overlap(repo: str, main: str, fork: str, ref: str, since: int) -> float:
    """The largest share of the branch's added lines that one main commit since it began added too."""
    mine = _added(git(repo, "diff", fork, ref))
    if not mine:
        return 0.0
    paths = git(repo, "diff", "--name-only", fork, ref).split()
    log = git(repo, "log", "-p", "--no-merges", f"--since={since}", "--format=%x00%H", main, "--", *paths)
    return max((len(mine & _added(rec)) / len(mine) for rec in log.split("\x00")[1:]), default=0.0)


def _listed(members: list[Member], bullets: list[str], taken: dict[str, str]) -> list[Member]:
    """The members a squash's "* subject" list names, matched in order (GitHub lists oldest first)."""
    out, k = [], 0
    for b in bullets:
        for j in range(k, len(members)):
            if members[j].commit not in taken and _norm(members[j].subject) == b:
                out.append(members[j])
                k = j + 1
                break
    return out


def _item(ref: str, members: list[Member], squash: str, cls: str) -> dict:
    return {
        "branch": ref,
        "class": cls,
        "squash": squash,
        "members": [m.__dict__ for m in members],
    }


def _adjudicate(labelled: list[dict], path: str | None) -> int:
    """Apply the labels a person settled by reading the commits (``[[member]]`` tables of ``commit``,
    ``truth`` — true, false or "unscored" — and ``why``); how many it changed."""
    if not path:
        return 0
    with open(path, "rb") as fh:
        read = tomllib.load(fh).get("member", [])
    changed = 0
    for e in read:
        for b in labelled:
            for m in b["members"]:
                if m["commit"].startswith(e["commit"]):
                    m["truth"] = None if e["truth"] == "unscored" else bool(e["truth"])
                    m["why"] = f"read by hand: {e['why']}"
                    changed += 1
    return changed


def branches(args: argparse.Namespace) -> int:
    repo = args.repo
    labelled = label_branches(repo, args.main, args.since, args.pattern, args.limit)
    read = _adjudicate(labelled, args.adjudicated)
    if read:
        print(f"{read} members' labels read by hand ({args.adjudicated})", file=sys.stderr)
    counts = Counter(b["class"] for b in labelled)
    print(f"{len(labelled)} branches: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    base = git(repo, "rev-parse", args.main).strip()
    table: dict[str, Counter[str]] = defaultdict(Counter)
    tp = fp = fn = tn = 0
    whole = defaultdict(lambda: [0, 0])  # class -> [branches entirely right, branches]
    wrong = []
    t0 = time.perf_counter()
    for n, b in enumerate(labelled, 1):
        with tempfile.TemporaryDirectory(prefix="fork-classes-") as tmp:
            patches = os.path.join(tmp, "patches")
            steps = [
                ("init", "s", "--repo-slug", "corpus/branches", "--base", base),
                ("import", "s", f"{base}..{b['branch']}"),
            ]
            failed = ""
            for step in steps:
                proc = ggstack(repo, *step, patches=patches)
                if proc.returncode != 0:
                    failed = f"{step[0]}: {proc.stderr.strip()[-300:]}"
                    break
            run = None
            if not failed:
                proc = ggstack(repo, "check", "s", "--onto", base, "--json", "--no-cache", patches=patches)
                try:
                    run = json.loads(proc.stdout) if proc.returncode in (0, 1) else None
                except json.JSONDecodeError:
                    run = None
                failed = "" if run is not None else f"check (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
        if run is None:
            print(f"[{n}] {b['branch']}: could not run: {failed}", file=sys.stderr)
            continue
        by_src = {p.get("source_commit") or "": p for p in run["patches"]}
        right = True
        for m in b["members"]:
            p = by_src.get(m["commit"])
            if p is None:
                continue  # left out at import (empty)
            said = p["verdict"] == "represented" and p["recommendation"] == "do not open"
            table[f"{b['class']} ({'rep' if m['truth'] else 'not' if m['truth'] is False else 'unscored'})"][
                f"{p['verdict']} / {p['recommendation']}"
            ] += 1
            if m["truth"] is None:
                continue
            if m["truth"]:
                tp += said
                fn += not said
            else:
                fp += said
                tn += not said
                said = p["verdict"] == "represented"
            if said != m["truth"]:
                right = False
                wrong.append((b, m, p))
        if any(m["truth"] is not None for m in b["members"]):  # a branch with nothing scored says nothing
            whole[b["class"]][0] += right
            whole[b["class"]][1] += 1
        print(
            f"[{n}/{len(labelled)}] {b['branch']} ({b['class']}, {len(b['members'])} commits): "
            f"{'all right' if right else 'some wrong'}",
            file=sys.stderr,
        )
    wall = time.perf_counter() - t0
    prec = tp / (tp + fp) if tp + fp else float("nan")
    rec = tp / (tp + fn) if tp + fn else float("nan")
    print(f"\n{repo}: {len(labelled)} PR branches in {wall:.0f}s")
    for cls, cnt in sorted(table.items()):
        print(f"  {cls:<28} " + ", ".join(f"{v} {k}" for v, k in cnt.most_common()))
    print(f"members 'represented, do not open': P {prec:.4f} R {rec:.4f} (tp {tp} fp {fp} fn {fn} tn {tn})")
    for cls, (ok, total) in sorted(whole.items()):
        print(f"  {cls}: {ok}/{total} branches entirely right")
    for b, m, p in wrong[: args.show]:
        print(
            f"  {b['branch']} {m['commit'][:10]} {m['subject'][:60]!r} truth {m['truth']} ({m['why']}): "
            f"{p['verdict']} {p['recommendation']} by {[c[:10] for c in p.get('represented_by', [])]}: {_rule(p)[:160]}"
        )
    if args.save:
        with open(args.save, "w") as fh:
            json.dump({"branches": labelled}, fh)
    return 0


def _rule(p: dict) -> str:
    return next((str(e.get("detail", "")) for e in p.get("evidence", []) if e.get("kind") == "rule"), "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("adapted", help="the mutation corpus of adapted picks")
    a.add_argument("--release", nargs="*", default=[], help="release branches whose picks give the second base")
    a.add_argument("--n", type=int, default=40, help="sampled source commits")
    b = sub.add_parser("branches", help="PR branches squash-merged upstream, or never")
    b.add_argument("--since", default="2025-01-01")
    b.add_argument("--pattern", default="*")
    b.add_argument("--limit", type=int, default=60)
    b.add_argument("--adjudicated", help="a TOML file of members whose label a person settled by reading the commits")
    for p in (a, b):
        p.add_argument("--repo", required=True)
        p.add_argument("--main", default="main")
        p.add_argument("--seed", type=int, default=30)
        p.add_argument("--save")
        p.add_argument("--show", type=int, default=40, help="wrong verdicts to print")
    args = ap.parse_args()
    return adapted(args) if args.what == "adapted" else branches(args)


if __name__ == "__main__":
    sys.exit(main())
