"""``python -m bonbench.apps.cli``: the ``bonbench`` command (as ``python -m bonbench``).

It only calls ``bonbench.apps.cli.main`` and exits with its code; it adds no command or flag, and
importing it does not call ``main``.
"""

import sys

from bonbench.apps.cli import main

if __name__ == "__main__":
    sys.exit(main())
