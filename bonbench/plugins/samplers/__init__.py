"""Samplers: turn prompts into n completions each. ``get_sampler`` picks a backend by name."""
