"""Studies of trained libraries: evaluation, ablations, transfer between roles, reports and
the graph view.

Stage: none: evaluation and studies, after training.
"""
