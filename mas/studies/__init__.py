"""Studies of trained libraries: evaluation, ablations, transfer between roles, reports and
the graph view."""
