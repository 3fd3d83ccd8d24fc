"""Analysis of finished runs: scaling-law fits, plots and HTML reports, the leaderboard, the CI gate,
and the held-out evaluation of verifiers.

Modules: ``rundir`` (read run dirs and sweeps), ``fits`` / ``laws`` / ``temperature`` (coverage law,
law families, temperature trends and T*(N), co-scaling), ``plotkit`` / ``plots`` / ``plots_policy``
(PNG figures), ``htmlparts`` (the jinja2 templates of ``templates/``, shared HTML pieces), ``html`` / ``sections`` / ``sweep`` /
``fitreport`` (report.html), ``frontier`` (reward-vs-KL plane, best-of-N references),
``leaderboard``, ``baseline`` / ``gate`` (the CI gate), ``verifiers`` (``bonbench eval-verifier``),
``synthetic`` (run dirs with known ground truth for tests) and ``cli`` (``register`` adds the
``leaderboard``, ``gate`` and ``plot`` subcommands).

What it does not do: sample or grade. Every module except ``verifiers`` only reads what the pipeline
wrote; ``verifiers`` scores the given runs with each verifier through the pipeline's verify stage
(``bonbench.run.runner``), which stores those scores in the runs' ``scores/`` folders, and may load
a verifier model to do so. The package ``__init__`` imports no submodule, so importing it is cheap;
a submodule loads what it needs at import (scipy for the fits and the gate, matplotlib for the
plots, html and leaderboard modules).
"""
