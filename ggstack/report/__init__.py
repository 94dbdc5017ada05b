"""Renderers of a Run, one module an output (``text``, ``summary``, ``bodies``, ``json``, ``changes``),
and the words they share (``words``, ``evidence``, ``escape``). Each reads only the Run, so the
terminal, a PR and the bot's step summary never disagree."""
