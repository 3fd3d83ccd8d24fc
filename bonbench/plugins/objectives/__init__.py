"""Inference-aware objectives as pure per-group weight functions (the interface: ``bonbench.api.objective``).

``tang``: mean policy gradient (RLOO, GRPO / Dr.GRPO normalisations) and the k-sample objectives of
Tang et al. (pass@k / max@k, maj@k, leave-p-out, softmax interpolation, U-statistic groups).
``chow``: Chow et al.'s BoN-aware objectives (BoN-SFT, BoN-RL-V/S, BoN-RLB, BoN-RLB(P)) and their
baselines (STaR, RL-V, RL-S, SFT). ``amini``: variational BoN (vBoN, vBoN-L) and
KL-regularised RL. ``bonbon``: BoNBoN (Gui et al.). ``ksample``: the k-sample estimators behind
``tang``; ``common``: the helpers ``chow``, ``amini`` and ``bonbon`` share.

Importing the package registers these objectives (it hands on no names: ``Group``, ``REGISTRY``
and ``make_objective`` are ``bonbench.api.objective``'s); it imports numpy, not torch (only
``bonbon.bonbon_loss_torch`` imports torch, when called). Nothing here samples, grades, computes a
log-probability or takes a gradient step: the trainer (``bonbench.apps.trainer``) fills each
``Group`` and applies the weights. No other plugin package is imported.
"""

from bonbench.plugins.objectives import amini, bonbon, chow, tang  # noqa: F401  (importing them registers their objectives)

