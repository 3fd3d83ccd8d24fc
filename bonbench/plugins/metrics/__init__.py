"""Metric plugins: bonbench's own metric kinds as records of the metric registry (``bonbench.api.metric``).

``exact``: pass@k, bon@k, maj@k, max@k and mean, wrapping the exact estimators of
``bonbench.metrics``; ``stored``: kl, kl_bon@k and winrate@k, which a run's comparisons write
(``bonbench.pipeline.compare``) and which are registered for their names, direction and display.
pyproject.toml's ``bonbench.metrics`` entry points list each record; importing this package
registers nothing. No other plugin package is imported.
"""
