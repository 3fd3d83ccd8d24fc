"""The one exception type users see: a problem they can fix, with the fix in the message.

The CLI prints ``error: <message>`` on one line and exits 1. Anything else is a bug and shows a
traceback only with ``--debug``.
"""

from __future__ import annotations


class BonbenchError(Exception):
    """A user-correctable error; the message names the fix."""
