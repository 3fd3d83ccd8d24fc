"""Reward models: backends of the ``bonbench.api.reward.RewardModel`` interface, offline defaults and their specs.

- ``base``: ``RewardGrader`` (a task grader), ``RewardVerifier`` (a bon@k verifier); the ``RewardModel``
  protocol is ``bonbench.api.reward``'s
- ``registry``: the ``rm:`` verifier scheme and the reward models' descriptions; spec strings -> models is
  ``bonbench.api.reward.get_reward_model``, over the one plugin registry (``bonbench.reward_models`` entry points)
- ``schemes``: the ``hf:`` and ``vllm:`` spec schemes, registered like any plugin
- ``hf``: Hugging Face sequence classifiers; ``vllm_pooling``: the same through vLLM's pooling runner
- ``imdb``: the offline IMDB sentiment classifier; ``tldr``: the offline TL;DR proxy rewards

Importing this package imports neither torch nor scikit-learn; the backends do, when built.
It imports no other plugin package: ``RewardGrader`` and ``RewardVerifier`` have the shape of the
api's ``Grader`` and ``Verifier``, and tasks (``bonbench_tasks``) choose the reward model that
grades them. Nothing here samples or writes run rows (the pipeline stores grades and scores); the
offline models are trained once into bonbench's cache (``bonbench.core.cache``). The package hands
on no names: import each from its module.
"""
