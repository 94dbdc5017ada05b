#!/usr/bin/env python3
"""How the code reads, in numbers: the figures issue 31's "done when" names.

Mean cyclomatic complexity and the functions at 11 or more (radon, which
xenon in CI is built on), each module's maintainability rank, the share of
non-blank lines that are docstrings, and public names defined at the top of
more than one module. Not a test: a measurement to compare with the anchors.

    python benchmarks/code_metrics.py            # ggstack/
    python benchmarks/code_metrics.py --list     # also the functions at >= 11, worst first
"""

from __future__ import annotations

import argparse
import ast
import collections
import pathlib

from radon.complexity import cc_visit
from radon.metrics import mi_rank, mi_visit

SAME_MEANING = {"T", "U", "command"}  # type variables; every commands/ module's click command


def docstring_lines(tree: ast.Module, lines: list[str]) -> tuple[int, int]:
    """(docstring lines, of them a click command's: its --help text, which users read, not coders)."""
    count = helptext = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = node.body[0] if node.body else None
            if ast.get_docstring(node, clean=False) and isinstance(first, ast.Expr):
                n = sum(1 for i in range(first.lineno - 1, first.end_lineno or first.lineno) if lines[i].strip())
                count += n
                if isinstance(node, ast.FunctionDef) and any("command" in ast.unparse(d) for d in node.decorator_list):
                    helptext += n
    return count, helptext


def public_names(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in names if not n.startswith("_") and n not in SAME_MEANING]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="ggstack")
    parser.add_argument("--list", action="store_true", help="list the functions at complexity 11 or more")
    args = parser.parse_args()

    blocks, low_mi, defined = [], [], collections.defaultdict(list)
    nonblank = doc = helptext = 0
    for path in sorted(pathlib.Path(args.root).rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)
        blocks += [(b.complexity, f"{path}:{b.lineno} {b.name}") for b in cc_visit(source)]
        mi = mi_visit(source, multi=True)
        if mi_rank(mi) != "A":
            low_mi.append(f"{path} {mi_rank(mi)} ({mi:.1f})")
        nonblank += sum(1 for line in lines if line.strip())
        d, h = docstring_lines(tree, lines)
        doc, helptext = doc + d, helptext + h
        for name in public_names(tree):
            defined[name].append(str(path))

    complex_ = sorted((b for b in blocks if b[0] >= 11), reverse=True)
    twice = {n: p for n, p in defined.items() if len(p) > 1}
    print(f"mean complexity        {sum(c for c, _ in blocks) / len(blocks):.2f} over {len(blocks)} blocks")
    print(f"functions at >= 11     {len(complex_)}")
    print(f"modules below rank A   {len(low_mi)}: " + ", ".join(low_mi))
    print(f"docstrings             {doc} of {nonblank} non-blank lines ({100 * doc / nonblank:.1f}%)")
    print(f"  not --help texts     {doc - helptext} ({100 * (doc - helptext) / nonblank:.1f}%)")
    print(f"public names twice     {len(twice)}: " + ", ".join(f"{n} ({len(p)})" for n, p in sorted(twice.items())))
    if args.list:
        for complexity, where in complex_:
            print(f"  {complexity:3d} {where}")


if __name__ == "__main__":
    main()
