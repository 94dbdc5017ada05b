"""``ggstack report --format json``: the Run itself, which round-trips (``Run.from_json``)."""

from __future__ import annotations

from ggstack.model import Run, json_text


def run_json(run: Run) -> str:
    return json_text(run.to_json()) + "\n"
