#!/usr/bin/env python3
"""``ggstack check --commits`` against a labelled corpus, beside ``git cherry`` and plain patch-ids.

Reads the JSON of ``benchmarks/judgement_corpus.py``; for each base, one
``ggstack check --commits --json --no-cache`` over that base's items and one
``git cherry BASE HEAD`` per (base, head) pair, both timed. Prints precision
and recall for "represented or partial" and for "represented" (a partial is
a miss there), the same for ``git cherry`` ('-' = upstream has it) and for a
plain ``git patch-id --stable`` lookup among the base's commits since the
merge base (merges by their first-parent diff, so a squash-merge counts), a
confusion table by class, the time ratio against git cherry, and every false
positive and negative with the evidence ggstack gave, to classify by hand.

``--squash`` judges the corpus's squash-merged feature branches instead:
each branch imported as a stack (``ggstack init`` + ``import`` into a
scratch patches directory) and checked onto its squash commit; every member
should be represented by the squash commit, "do not open".

    python benchmarks/check_accuracy.py /tmp/corpus-pytest.json
    python benchmarks/check_accuracy.py /tmp/corpus-ipython.json --squash
    python benchmarks/check_accuracy.py /tmp/corpus-pytest.json --class before --limit-bases 3
    python benchmarks/check_accuracy.py /tmp/corpus-pytest.json --reuse kept.json --adjudicated benchmarks/adjudicated/pytest.toml
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter, defaultdict

HIT = ("represented", "partial")
# Compiled modules are kept, as on a user's machine (a session that sets PYTHONDONTWRITEBYTECODE
# would otherwise pay for compiling every module on every call).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
CPU = {"check": 0.0, "cherry": 0.0}  # user + sys of the child processes, all descendants


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, check=True).stdout.decode(errors="replace")


def ggstack(repo: str, *args: str, patches: str | None = None) -> subprocess.CompletedProcess[str]:
    pre = ["--repo", repo] + (["--patches", patches] if patches else [])
    return subprocess.run([sys.executable, "-m", "ggstack", *pre, *args], capture_output=True, text=True, env=ENV)


def run_check(repo: str, base: str, shas: list[str], cache: bool) -> tuple[dict[str, dict], float]:
    t, cpu = time.perf_counter(), children_cpu()
    proc = ggstack(repo, "check", "--onto", base, "--json", *([] if cache else ["--no-cache"]), "--commits", *shas)
    wall = time.perf_counter() - t
    CPU["check"] += children_cpu() - cpu
    if proc.returncode not in (0, 1):
        sys.exit(f"ggstack check failed (exit {proc.returncode}) on {base[:10]}:\n{proc.stderr[-3000:]}")
    run = json.loads(proc.stdout)
    return {p["source_commit"]: p | {"subjects": run.get("subjects", {})} for p in run["patches"]}, wall


def run_cherry(repo: str, base: str, head: str) -> tuple[dict[str, bool], float]:
    t, cpu = time.perf_counter(), children_cpu()
    out = git(repo, "cherry", base, head)
    wall = time.perf_counter() - t
    CPU["cherry"] += children_cpu() - cpu
    return {line[2:].strip(): line.startswith("-") for line in out.splitlines()}, wall


def base_patch_ids(repo: str, base: str, head: str) -> set[str]:
    """Patch-ids of the base's commits since its merge base with head (merges by their first-parent diff)."""
    raw = subprocess.run(
        ["git", "-C", repo, "log", "-p", "-m", "--first-parent", "--format=commit %H", f"{head}..{base}"],
        capture_output=True,
        check=True,
    ).stdout
    out = subprocess.run(["git", "-C", repo, "patch-id", "--stable"], input=raw, capture_output=True, check=True)
    return {line.split()[0] for line in out.stdout.decode().splitlines()}


def commit_patch_ids(repo: str, shas: list[str]) -> dict[str, str]:
    raw = subprocess.run(
        ["git", "-C", repo, "show", "-m", "--first-parent", "--format=commit %H", *shas],
        capture_output=True,
        check=True,
    ).stdout
    out = subprocess.run(["git", "-C", repo, "patch-id", "--stable"], input=raw, capture_output=True, check=True)
    return {c: p for p, c in (line.split() for line in out.stdout.decode().splitlines())}


def pr_table(label: str, pred: list[bool], truth: list[bool]) -> str:
    tp = sum(p and t for p, t in zip(pred, truth))
    fp = sum(p and not t for p, t in zip(pred, truth))
    fn = sum(t and not p for p, t in zip(pred, truth))
    tn = sum(not p and not t for p, t in zip(pred, truth))
    prec = tp / (tp + fp) if tp + fp else float("nan")
    rec = tp / (tp + fn) if tp + fn else float("nan")
    return f"{label:<34} P {prec:.4f}  R {rec:.4f}   (tp {tp} fp {fp} fn {fn} tn {tn})"


def scores(keys: list, truth: list[bool], verdicts: dict, cherry: dict, pid: dict) -> None:
    print(pr_table("ggstack represented-or-partial", [verdicts[k]["verdict"] in HIT for k in keys], truth))
    print(pr_table("ggstack represented", [verdicts[k]["verdict"] == "represented" for k in keys], truth))
    print(pr_table("git cherry", [cherry[k] for k in keys], truth))
    print(pr_table("git patch-id (base range)", [pid[k] for k in keys], truth))


def adjudicated(items: list[dict], path: str) -> dict[int, bool | None]:
    """The labels a person settled by reading the commits (``[[item]]`` tables of ``commit``,
    ``base_ref``, ``truth`` — true, false or "unscored" — and ``why``): id(item) -> truth, for every
    item of the corpus, those the labeller leaves unscored too."""
    with open(path, "rb") as fh:
        entries = tomllib.load(fh).get("item", [])
    out: dict[int, bool | None] = {}
    for e in entries:
        hits = [it for it in items if it["commit"].startswith(e["commit"]) and it["base_ref"] == e["base_ref"]]
        if not hits:
            print(f"{path}: no item {e['commit']} onto {e['base_ref']} in this corpus", file=sys.stderr)
        for it in hits:
            out[id(it)] = None if e["truth"] == "unscored" else bool(e["truth"])
    return out


def by_hand(everything: list[dict], path: str, verdicts: dict, cherry: dict, pid: dict) -> None:
    """The scores again with the labels read by hand, which win over the labeller's, an unscored one too."""
    read = adjudicated(everything, path)
    settled = [(it, read.get(id(it), it["truth"])) for it in everything]
    scored = [((it["commit"], it["base"]), bool(t)) for it, t in settled if t is not None]
    changed = sum(id(it) in read and it["truth"] is not None and read[id(it)] != it["truth"] for it in everything)
    unscoring = sum(id(it) in read and it["truth"] is not None and read[id(it)] is None for it in everything)
    scoring = sum(id(it) in read and it["truth"] is None and read[id(it)] is not None for it in everything)
    same = sum(id(it) in read and read[id(it)] == it["truth"] for it in everything)
    print(
        f"\nwith the {len(read)} labels read by hand in {path} ({changed - unscoring} flip the labeller's, "
        f"{unscoring} unscore one, {scoring} score an item it leaves unscored, {same} agree with it):"
    )
    scores([k for k, _ in scored], [t for _, t in scored], verdicts, cherry, pid)


def rule_of(p: dict) -> str:
    for e in p.get("evidence", []):
        if e.get("kind") == "rule":
            return str(e.get("detail", ""))
    return ""


def explain(it: dict, p: dict) -> str:
    subj = p.get("subjects", {})
    by = ", ".join(f"{c[:10]} {subj.get(c, '')[:50]!r}" for c in p.get("represented_by", []))
    lines = [
        f"  {it['commit'][:10]} onto {it['base_ref']} ({it['direction']}, {it['class']}: {it['why']})",
        f"    {it['subject'][:90]!r}",
        f"    verdict {p['verdict']} {p.get('recommendation')} fraction {p.get('represented_fraction')} by [{by}]",
        f"    rule: {rule_of(p)[:200]}",
    ]
    for e in p.get("evidence", []):
        if e.get("kind") in ("rule",):
            continue
        lines.append(f"      {e.get('kind')}: {e.get('says')}: {str(e.get('detail', ''))[:160]}")
    return "\n".join(lines)


def accuracy(corpus: dict, args: argparse.Namespace) -> int:
    repo = corpus["repo"]
    items = [i for i in corpus["items"] if not args.cls or i["class"] in args.cls]
    by_base: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for it in items:  # one call per (base, head), as git cherry BASE HEAD
        by_base[(it["base"], it["head"])].append(it)
    bases = list(by_base)[: args.limit_bases] if args.limit_bases else list(by_base)
    items = [it for b in bases for it in by_base[b]]
    verdicts: dict[tuple[str, str], dict] = {}
    cherry: dict[tuple[str, str], bool] = {}
    pid: dict[tuple[str, str], bool] = {}
    kept: dict[str, dict] = {}  # "commit base" -> what each tool said (--save / --reuse)
    if args.reuse and os.path.exists(args.reuse):
        with open(args.reuse) as fh:
            kept = json.load(fh)
    t_check = t_cherry = 0.0
    for n, (base, head) in enumerate(bases, 1):
        group = by_base[(base, head)]
        if all(f"{i['commit']} {base}" in kept for i in group):  # relabelled corpus: judged before
            for it in group:
                k = kept[f"{it['commit']} {base}"]
                key = (it["commit"], base)
                verdicts[key], cherry[key], pid[key] = k["check"], k["cherry"], k["patch-id"]
            continue
        shas = list(dict.fromkeys(i["commit"] for i in group))
        got, wall = run_check(repo, base, shas, args.cache)
        t_check += wall
        mine = commit_patch_ids(repo, shas)
        marks, cwall = run_cherry(repo, base, head)
        t_cherry += cwall
        ids = base_patch_ids(repo, base, head)
        for it in group:
            key = (it["commit"], base)
            cherry[key] = marks.get(it["commit"], True)  # not listed: already in the base
            pid[key] = mine.get(it["commit"]) in ids
            verdicts[key] = got[it["commit"]]
            kept[f"{it['commit']} {base}"] = {"check": verdicts[key], "cherry": cherry[key], "patch-id": pid[key]}
        print(
            f"[{n}/{len(bases)}] {group[0]['base_ref']} ← {head}: {len(shas)} commits, check {wall:.1f}s, "
            f"cherry {cwall:.1f}s",
            file=sys.stderr,
        )
    if args.save:
        with open(args.save, "w") as fh:
            json.dump(kept, fh)
    everything = items
    items = [it for it in items if it["truth"] is not None]  # unscored: what the labeller cannot call
    keys = [(it["commit"], it["base"]) for it in items]
    truth = [bool(it["truth"]) for it in items]
    print(f"\n{corpus['repo']}: {len(items)} items, {sum(truth)} represented, {len(bases)} bases")
    unscored = Counter(it["class"] for it in everything if it["truth"] is None)
    print(
        f"unscored (reported, not scored): {sum(unscored.values())} items: "
        + ", ".join(f"{cls} {n}" for cls, n in sorted(unscored.items()))
    )
    scores(keys, truth, verdicts, cherry, pid)
    if args.adjudicated:
        by_hand(everything, args.adjudicated, verdicts, cherry, pid)
    if not t_cherry:
        print("time: not measured (every base's verdicts came from --reuse)")
    else:
        print(
            f"time: check {t_check:.1f}s, git cherry {t_cherry:.1f}s, ratio {t_check / max(t_cherry, 1e-9):.1f}x "
            f"({'warm cache' if args.cache else 'cold: --no-cache'}); cpu: check {CPU['check']:.1f}s, git cherry "
            f"{CPU['cherry']:.1f}s, ratio {CPU['check'] / max(CPU['cherry'], 1e-9):.1f}x; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for it in everything:
        t = "unscored" if it["truth"] is None else "rep" if it["truth"] else "not"
        table[f"{it['class']} ({t})"][verdicts[(it["commit"], it["base"])]["verdict"]] += 1
    print("\nclass → verdicts:")
    for cls, cnt in sorted(table.items()):
        print(f"  {cls:<32} " + ", ".join(f"{v} {n}" for v, n in cnt.most_common()))
    wrong = [(it, verdicts[k]) for it, k in zip(items, keys) if (verdicts[k]["verdict"] in HIT) != bool(it["truth"])]
    fps = [w for w in wrong if not w[0]["truth"]]
    fns = [w for w in wrong if w[0]["truth"]]
    print(f"\nfalse positives ({len(fps)}):")
    for it, p in fps:
        print(explain(it, p))
    print(f"\nfalse negatives ({len(fns)}):")
    for it, p in fns:
        print(explain(it, p))
    partial_true = [
        (it, verdicts[k]) for it, k in zip(items, keys) if it["truth"] and verdicts[k]["verdict"] == "partial"
    ]
    if args.verbose:
        print(f"\nrepresented, called partial ({len(partial_true)}):")
        for it, p in partial_true:
            print(explain(it, p))
    return 0


def squash(corpus: dict, args: argparse.Namespace) -> int:
    repo = corpus["repo"]
    total = good = 0
    for n, sq in enumerate(corpus["squash"], 1):
        base = args.onto or sq["base"]
        with tempfile.TemporaryDirectory(prefix="corpus-squash-") as tmp:
            patches = os.path.join(tmp, "patches")
            name = f"sq{n}"
            steps = [
                ("init", name, "--repo-slug", "corpus/squash", "--base", base),
                ("import", name, *sq["commits"]),
            ]
            for step in steps:
                proc = ggstack(repo, *step, patches=patches)
                if proc.returncode != 0:
                    print(f"{sq['branch']}: {step[0]} failed: {proc.stderr.strip()[-500:]}")
                    break
            else:
                proc = ggstack(repo, "check", name, "--onto", base, "--json", "--no-cache", patches=patches)
                if proc.returncode not in (0, 1):
                    print(f"{sq['branch']}: check failed: {proc.stderr.strip()[-500:]}")
                    continue
                run = json.loads(proc.stdout)
                for p in run["patches"]:
                    total += 1
                    ok = (
                        p["verdict"] == "represented"
                        and p["recommendation"] == "do not open"
                        and sq["squash"] in p["represented_by"]
                    )
                    good += ok
                    if not ok or args.verbose:
                        print(
                            f"{sq['branch']} {p['name']}: {p['verdict']} {p['recommendation']} "
                            f"by {[c[:10] for c in p['represented_by']]} (squash {sq['squash'][:10]}) "
                            f"group {p.get('group')}; {rule_of(p)[:160]}"
                        )
    print(
        f"\n{repo}: squash-merged branches {len(corpus['squash'])}, members {total}, "
        f"represented by the squash commit, do not open: {good}/{total}"
    )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--squash", action="store_true", help="judge the squash-merged branches, as stacks")
    ap.add_argument("--onto", default=None, help="with --squash: check onto this ref [default: the squash commit]")
    ap.add_argument("--class", dest="cls", action="append", help="only items of this class (repeatable)")
    ap.add_argument("--limit-bases", type=int, default=0)
    ap.add_argument("--save", help="keep every verdict here (JSON), to rescore a relabelled corpus with --reuse")
    ap.add_argument("--reuse", help="verdicts kept by --save: bases whose items were all judged are not run again")
    ap.add_argument(
        "--adjudicated",
        help="a TOML file of items whose label a person settled by reading the commits: scored both ways",
    )
    ap.add_argument("--cache", action="store_true", help="let check use its verdict cache (warm runs)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    with open(args.corpus) as fh:
        corpus = json.load(fh)
    return squash(corpus, args) if args.squash else accuracy(corpus, args)


if __name__ == "__main__":
    sys.exit(main())
