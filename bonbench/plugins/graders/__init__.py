"""Graders, the plugin kind that turns a completion into a ``Grade`` (layer plugins).

``math`` (answer extraction, canonical form and equivalence, with sympy in bounded worker
processes) and ``code`` (test cases run in ``bonbench_sandbox``: ``code_cases`` builds and judges
one execution, ``replay`` / ``blind`` keep function-call tests' expected values out of the
untrusted process, ``ray_sandbox`` runs test lists on Ray). Nothing here samples, scores with a
verifier or imports another plugin package; tasks (``bonbench_tasks``) choose and configure graders
and load the problems. Importing the package loads no grader (this file imports nothing), and the
math grader imports sympy and ``math_verify`` only when an answer needs them.
"""
