"""The demo's payload: a miniature vLLM fork as file snapshots plus ``history``, which says which snapshot each path
holds in each commit (its docstring tells the story)."""
