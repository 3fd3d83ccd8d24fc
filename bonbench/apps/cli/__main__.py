"""``python -m bonbench.apps.cli``: the ``bonbench`` command (as ``python -m bonbench``)."""

import sys

from bonbench.apps.cli import main

if __name__ == "__main__":
    sys.exit(main())
