"""The trainer: inference-aware fine-tuning beside the evaluation pipeline.

It uses the pipeline (tasks, graders, reward models, the hf sampler, the run store's row
conventions); the pipeline never imports it. ``objectives`` turns one prompt group's rewards into
per-sample weights; ``setup`` checks a run before its model loads; ``loop`` runs rollouts and
``update`` the optimiser steps; ``checkpoint`` saves and resumes; ``watch`` decides when to save and
words progress lines and warnings;
``distributed`` makes a launcher's processes data-parallel ranks; ``rollout_server`` syncs the LoRA
adapter to vLLM servers that draw the rollouts.
"""
