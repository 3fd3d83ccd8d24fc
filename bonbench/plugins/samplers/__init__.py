"""Samplers, the plugin kind that turns prompts into n completions each (layer plugins).

``select.get_sampler`` builds a backend by name through the sampler registry: ``vllm`` (one vLLM
engine), ``hf`` (transformers; its factory, ``hf_factory``, loads torch only when it builds a
sampler), ``openai`` (OpenAI-compatible servers; ``bonbench.core.served_answers`` checks what they
send) and ``scripted`` (completions replayed from a script or given samples). ``ray_backend`` spreads a
sampler over Ray actors, ``local_server`` starts a local ``vllm serve``, ``hf_logprobs`` scores
stored samples by teacher-forced log-probability, and ``engine_log`` and ``cpu_preload`` keep an
engine's output in a log file and preload what vLLM's CPU backend asks for.

Nothing here grades, picks a best-of-k or stores a sample: the pipeline (``bonbench.pipeline``)
writes samples keyed by (problem_id, sample_idx). Importing the package loads no backend (this file
imports nothing), and no module here imports another plugin package.
"""
