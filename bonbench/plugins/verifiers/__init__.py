"""Verifier plugins: the built-in oracle and logprob verifiers and learned verifiers (``learned:PATH`` folders)."""
