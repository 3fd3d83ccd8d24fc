"""The trainer: inference-aware fine-tuning beside the evaluation pipeline.

It uses the pipeline (tasks, graders, reward models, the hf sampler, the run store's row
conventions); the pipeline never imports it. ``objectives`` turns one prompt group's rewards into
per-sample weights; ``loop`` runs rollouts and optimiser steps; ``checkpoint`` saves and resumes;
``distributed`` makes a launcher's processes data-parallel ranks; ``rollout_server`` syncs the LoRA
adapter to vLLM servers that draw the rollouts.
"""
