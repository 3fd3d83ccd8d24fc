"""Reward models: one interface (``base.RewardModel``), backends, offline defaults and a registry.

- ``base``: ``RewardModel``, ``RewardGrader`` (a task grader), ``RewardVerifier`` (a bon@k verifier)
- ``registry``: spec strings and names -> models (``get_reward_model``), ``bonbench.reward_models`` entry points
- ``hf``: Hugging Face sequence classifiers; ``vllm_pooling``: the same through vLLM's pooling runner
- ``imdb``: the offline IMDB sentiment classifier; ``tldr``: the offline TL;DR proxy rewards
- ``cache``: the atomic build-once folder the offline models live in

Importing this package imports neither torch nor scikit-learn; the backends do, when built.
"""

from __future__ import annotations

from bonbench.plugins.rewards.base import RewardGrader, RewardModel, RewardVerifier, reward_prompt
from bonbench.plugins.rewards.registry import (describe_reward_models, get_reward_model, parse_spec, register_reward_model,
                                       reward_model_names, reward_verifier)

__all__ = ["RewardGrader", "RewardModel", "RewardVerifier", "describe_reward_models", "get_reward_model", "parse_spec",
           "register_reward_model", "reward_model_names", "reward_prompt", "reward_verifier"]
