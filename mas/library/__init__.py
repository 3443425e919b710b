"""Libraries as values and as files, and the evidence about them: edits, injection into
prompts, budgets, the store, the side files, the usage graph, promotion."""
