"""Reward models: backends of the ``bonbench.api.reward.RewardModel`` interface, offline defaults and their specs.

- ``base``: ``RewardModel`` (re-exported from the api), ``RewardGrader`` (a task grader), ``RewardVerifier`` (a bon@k verifier)
- ``registry``: spec strings and names -> models (``get_reward_model``) over the one plugin registry
  (``bonbench.reward_models`` entry points)
- ``schemes``: the ``hf:`` and ``vllm:`` spec schemes, registered like any plugin
- ``hf``: Hugging Face sequence classifiers; ``vllm_pooling``: the same through vLLM's pooling runner
- ``imdb``: the offline IMDB sentiment classifier; ``tldr``: the offline TL;DR proxy rewards

Importing this package imports neither torch nor scikit-learn; the backends do, when built.
It imports no other plugin package: ``RewardGrader`` and ``RewardVerifier`` have the shape of the
api's ``Grader`` and ``Verifier``, and tasks (``bonbench_tasks``) choose the reward model that
grades them. Nothing here samples or writes run rows (the pipeline stores grades and scores); the
offline models are trained once into bonbench's cache (``bonbench.core.cache``).
"""

from __future__ import annotations

from bonbench.plugins.rewards.base import RewardGrader, RewardModel, RewardVerifier, reward_prompt
from bonbench.plugins.rewards.registry import (describe_reward_models, get_reward_model, parse_spec, register_reward_model,
                                       reward_model_names, reward_verifier)

__all__ = ["RewardGrader", "RewardModel", "RewardVerifier", "describe_reward_models", "get_reward_model", "parse_spec",
           "register_reward_model", "reward_model_names", "reward_prompt", "reward_verifier"]
