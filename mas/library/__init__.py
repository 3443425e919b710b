"""Libraries as values and as files, and the evidence about them: edits, injection into
prompts, budgets, the store, the side files, the usage graph, promotion.

Stage: apply and the evidence after it (each module says its own; ``inject`` and ``exposure`` are
the rollout's).
"""
