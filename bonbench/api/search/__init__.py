"""The search contract: step samplers, partial-solution scorers, strategies, and their records."""
