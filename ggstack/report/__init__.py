"""Renderers of a Run, one module an output, and the words they share. Each reads only the Run, so the terminal, a PR
and the bot's step summary never disagree."""
