"""The one exception type users see: a problem they can fix, with the fix in the message.

The CLI (``bonbench.apps.cli``) prints ``error: <message>`` on one line and exits 1; ``--debug``
shows the traceback. Any other exception is a bug and shows its traceback, except an ``OSError`` a
user can fix (a read-only folder, a full disk), which the CLI words as one line too
(``bonbench.core.outputs.os_error_message``).

This module only defines the type: it checks nothing, prints nothing and imports no bonbench module
or library, so every layer can raise it.
"""

from __future__ import annotations


class BonbenchError(Exception):
    """A user-correctable error; the message names the fix."""
