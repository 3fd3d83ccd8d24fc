"""The trainer: inference-aware fine-tuning beside the evaluation pipeline.

It uses the layers below it (tasks, graders, reward models, the hf and vLLM samplers, the run
store's row conventions); nothing below ``bonbench.apps`` imports it. The objectives are not here:
the interface (``Group``, ``Objective``, the ``@register_objective`` decorator, ``make_objective``) is
``bonbench.api.objective`` and the built-in objectives are the plugin package
``bonbench.plugins.objectives`` (``tang``, ``chow``, ``amini``, ``bonbon``), each turning one prompt
group's rewards into per-sample weights.

Modules: ``config`` (``TrainConfig``, checked once, hashed for resume) and ``train_flags`` / ``command``
(``bonbench train``'s flags and handler); ``setup`` checks a run before its model loads; ``policy``
(the LoRA or fully trained causal LM, its reference, log-probabilities, export) and ``value`` (the
learned value head); ``loop`` runs the steps (``Trainer`` composes the parts and reads top to
bottom), ``step`` draws and grades a step's rollouts (``Sampling``), ``signals`` turns them into
the step's signals, weights and log row, ``rollout`` holds the pure group and weight arithmetic,
``update`` takes the optimiser step (``Update``); ``hooks`` is the loop's callback seam (progress,
warnings, stop); ``vllm_rollout`` draws rollouts through one vLLM engine with the live adapter and
``rollout_server`` syncs the adapter to vLLM servers; ``checkpoint`` saves and resumes; ``watch``
decides when to save and words progress lines and warnings; ``distributed`` makes a launcher's
processes data-parallel ranks.

What it does not do: evaluate (``bonbench run`` / ``bonbench.pipeline`` score a checkpoint's exported
model like any other) or define an objective's mathematics (``bonbench.plugins.objectives``).
"""
