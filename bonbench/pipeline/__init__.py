"""Layer 6, the pipeline: the stages of one run and what they store.

``prepared`` (a run resolved to its directory, config.json, the ids that key stored rows),
``stages`` (sample, grade, verify, evaluate), ``scoring`` (metrics.json and curves.json),
``compare`` (kl, win rates, kl_bon@k), ``shard`` (one run's problems split over shards),
``readers`` and ``imported`` (samples files from other harnesses), ``progress`` (the callback
type) and ``report`` (the metrics table).

It does not turn names into a task, model, sampler or verifier, plan runs or parse flags:
``bonbench.run`` resolves and plans and hands the stages what they need (no module here imports a
plugin package or a task), and ``bonbench.apps.cli`` parses. Importing the package loads none of its modules.
"""

from __future__ import annotations
