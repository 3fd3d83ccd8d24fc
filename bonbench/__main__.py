"""``python -m bonbench``: the ``bonbench`` command, so launchers that start a module work
(``torchrun --nproc-per-node 2 -m bonbench train ...``, ``accelerate launch -m bonbench train ...``).

It only calls ``bonbench.apps.cli.main`` and exits with its code: the commands, their flags and the
one-line ``error:`` for bad input are ``bonbench.apps.cli``'s. Importing this module does not call
``main``.
"""

import sys

from bonbench.apps.cli import main

if __name__ == "__main__":
    sys.exit(main())
