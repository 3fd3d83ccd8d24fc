"""Analysis of finished runs: scaling-law fits, plots and HTML reports, the leaderboard, the CI gate.

Modules: ``rundir`` (read run dirs and sweeps), ``fits`` (coverage law, temperature family,
co-scaling), ``plots`` (PNG figures), ``html`` (report.html), ``leaderboard``, ``gate``,
``synthetic`` (run dirs with known ground truth for tests) and ``cli`` (``register`` adds the
``leaderboard``, ``gate`` and ``plot`` subcommands). Nothing here samples, grades or rescores; the
package only reads what the pipeline wrote. Submodules are imported on use, so that importing the
package stays cheap (matplotlib and scipy load only when a plot or fit is made).
"""
