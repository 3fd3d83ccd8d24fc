"""Layer 3, the plugin API: the one page a plugin author reads.

Every plugin kind registers the same way (``bonbench.core.registry``): a decorator in-process, or
an entry point in its package's metadata, one group per kind:

- task: ``@register_task(name, family=...)``; group ``bonbench.tasks`` (modules, imported to register)
- verifier: ``@register_verifier(name)``; group ``bonbench.verifiers`` (``name`` or scheme ``prefix:``)
- reward model: ``@register_reward_model(name)``; group ``bonbench.reward_models`` (``name`` or ``prefix:``)
- sampler backend: ``@register_sampler(name, options=Options)``; group ``bonbench.samplers``
- objective: ``@register_objective(name, paper=...)``; group ``bonbench.objectives`` (modules)
- metric kind: ``register_metric(MetricKind(...))``; group ``bonbench.metrics`` (records or modules)
- search strategy: ``@register_strategy(name)`` on a class whose keyword arguments are its options;
  group ``bonbench.strategies`` (``name = "module:Class"``)

Factory keyword arguments are the plugin's CLI options (``-T`` for tasks, ``-O`` for objectives,
``?key=value`` for reward models), coerced by annotation.

This package is a documented facade: it hands on the decorators, protocols and lookups of its
modules (``task``, ``verifier``, ``reward``, ``sampler``, ``objective``, ``metric``, ``search``) so that a plugin author
writes ``from bonbench.api import register_task``. Nothing inside bonbench or bonbench_tasks imports
through it: they import each name from the module that defines it (``tests/layer_rules.py`` FACADES).

This package implements no plugin: the built-ins are ``bonbench.plugins`` and ``bonbench_tasks``.
It imports from ``bonbench.core`` only, never a plugin: a registry reads its entry points (and
imports the plugin modules they name) when its names are first asked for, not when the api is imported.
"""

from bonbench.api.metric.kind import MetricKind, Param, register_metric
from bonbench.api.objective import Group, Objective, make_objective, register_objective
from bonbench.api.reward import RewardModel, get_reward_model, register_reward_model, reward_model_names
from bonbench.api.sampler import Sampler, SampleRequest, SamplingParams, register_sampler, sampler_names
from bonbench.api.search.contract import (
                                          PartialScorer,
                                          StepSampler,
                                          Strategy,
                                          make_strategy,
                                          register_strategy,
                                          strategy_names,
)
from bonbench.api.task import (
                               Grader,
                               GraderOptions,
                               PromptStyle,
                               Task,
                               family_tasks,
                               get_task,
                               register_task,
                               task_family,
                               task_names,
)
from bonbench.api.verifier import Verifier, get_verifier, register_verifier, verifier_names

__all__ = ["Grader", "GraderOptions", "Group", "MetricKind", "Objective", "Param", "PartialScorer", "PromptStyle",
           "RewardModel", "SampleRequest", "Sampler", "SamplingParams", "StepSampler", "Strategy", "Task", "Verifier",
           "family_tasks", "get_reward_model", "get_task", "get_verifier", "make_objective", "make_strategy",
           "register_metric", "register_objective", "register_reward_model", "register_sampler", "register_strategy",
           "register_task", "register_verifier", "reward_model_names", "sampler_names", "strategy_names", "task_family",
           "task_names", "verifier_names"]
