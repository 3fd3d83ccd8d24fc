"""The metric registry: metric kinds as registered records, and everything every command asks of them.

``kind``: the record (``MetricKind``, ``Param``), the registry (``METRICS``, group
``bonbench.metrics``) and ``register_metric``; ``grammar``: metric names (``MetricSpec``,
``parse_metrics``, ``spec_of``, the display order); ``inputs``: what a task gives a metric and the
companions, always-computed metrics and curves the run's rules derive from the records;
``readings``: how stored metrics and curves read (direction, closed form, Monte Carlo SE, labels,
colours, ``bonbench list metrics``); ``values``: ``compute_metrics`` / ``compute_curves``, the entry
points of scoring and analysis. No command names a kind: each reads the records. Importing this
package imports none of them (each name is imported from its module).
"""
