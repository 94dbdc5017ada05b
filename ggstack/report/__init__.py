"""Renderers of a Run, one module an output: ``text`` (the terminal's tables), ``summary`` (the
Markdown report), ``bodies`` (PR bodies, closing comments), ``json``, ``changes`` (what drop, rebase
and land did); the words they share in ``words`` and ``evidence``, and ``escape`` (Markdown from text
ggstack did not write). Every renderer reads only the Run, so the terminal, a PR and the bot's step
summary never disagree.
"""
