"""Layer 7, run: from a request to a finished run directory (request, resolve, plan, execute, merge) and the default verifier choice."""
