"""``python -m bonbench``: the ``bonbench`` command, so launchers that start a module work
(``torchrun --nproc-per-node 2 -m bonbench train ...``, ``accelerate launch -m bonbench train ...``)."""

import sys

from bonbench.apps.cli import main

if __name__ == "__main__":
    sys.exit(main())
