"""The demo's payload: a miniature vLLM fork as file snapshots plus a history.

``history`` says which snapshot each fork path holds in each commit; the
snapshot files sit next to it. See ``history``'s docstring for the story.
"""
