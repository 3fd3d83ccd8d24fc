"""Isolated execution of untrusted Python programs (bubblewrap + rlimits); imports nothing from bonbench.

See `bonbench_sandbox.execution` for what the sandbox covers and what it does not, `pool` for
parallel runs and early stopping, `cache` for the persistent result cache and `cli` for
``bonbench sandbox run``.
"""

from bonbench_sandbox.cache import ResultCache, job_key
from bonbench_sandbox.execution import (
    SANDBOX_VERSION,
    STATUSES,
    ExecResult,
    SandboxUnavailable,
    accounting_mode,
    ensure_available,
    execute,
)
from bonbench_sandbox.pool import Interrupted, Job, run_many, run_many_tests, run_tests
from bonbench_sandbox.supervise import Cancelled

__all__ = [
    "Cancelled",
    "SANDBOX_VERSION",
    "STATUSES",
    "ExecResult",
    "Interrupted",
    "Job",
    "ResultCache",
    "SandboxUnavailable",
    "accounting_mode",
    "ensure_available",
    "execute",
    "job_key",
    "run_many",
    "run_many_tests",
    "run_tests",
]
