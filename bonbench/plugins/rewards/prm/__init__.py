"""Process reward models: per-step scores of a completion from one forward pass (``prm:SOURCE?options``).

- ``family``: the one PRM description record (``PRMFamily``), the public families' presets, how a
  family is recognised from a config and a name, and the step aggregations
- ``encode``: a (question, completion) pair -> token ids and the positions read (tokenizer only)
- ``hf``: the transformers engine (load, batched forward, read the head at those positions)
- ``pooling``: the vLLM engine (``backend=vllm``: the pooling runner's step pooling; qwen and math-shepherd)
- ``verifier``: the ``prm:`` verifier scheme, its options, its stored rows and their re-aggregation

Importing the package imports neither torch, transformers nor vllm (the engines do, when a model loads).
"""
