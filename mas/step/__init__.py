"""One training step (``run.run_step``), its stages in the order they run:

- ``rollout.py``: G team runs of each task, rewards, the filter (groups with winners and losers)
- ``learn.py``: a summary of each rollout, the semantic advantage of each kept group
- ``edit.py``: route, screen, one edit call per library, screen again, apply
- ``usage.py``: the usage events, what the evidence is made of
- ``context.py``: what every stage shares

Stage: every stage from rollout to record usage.

The evidence after the edits (usage recorded, pairs judged, pruning, budgets, promotion) is
the library's (``mas.library.hierarchy``); the epochs around the steps are ``mas.train``'s.
"""
