"""Layer 4, search strategies: best-of-N, beam search, DVTS and particle filtering over one search tree (``engine``)."""
