"""Isolated execution of untrusted Python programs (bubblewrap + rlimits); imports nothing from bonbench.

See `bonbench_sandbox.execution` for what the sandbox covers and what it does not, `pool` for
parallel runs and early stopping, `result_cache` for the persistent result cache and `command_line` for
``bonbench sandbox run``. The package hands on no names: import each from the module that defines
it (``execute`` from ``execution``, ``Job`` and ``run_many_tests`` from ``pool``, ``ResultCache``
from ``result_cache``, ``ExecResult`` from ``supervise``).
"""
