"""Verifier plugins: the built-in oracle and logprob verifiers and learned ones (``learned:PATH`` folders).

``builtin`` (``oracle``: the grade's outcome; ``logprob``: the policy's mean token log-probability),
``folder`` (a learned verifier's folder: lookup and the ``learned:`` scheme), ``manifest`` (file
names, the manifest reader, weight digests) and ``model`` (the backbone and scalar head, torch).

Reward models as verifiers (``rm:SPEC``) are ``bonbench.plugins.rewards``', and training a learned
verifier is ``bonbench train-verifier``'s (``bonbench.apps.verifier_training``). Nothing here samples,
grades or stores scores (the pipeline writes ``scores/<verifier>.jsonl``); importing the package
loads no verifier (this file imports nothing), and no module here imports another plugin package.
"""
