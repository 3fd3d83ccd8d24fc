"""Chow et al.'s BoN-aware fine-tuning objectives and their baselines, as per-group weights.

Chow, Tennenholtz, Gur, Zhuang, Dai, Thiagarajan, Boutilier, Agarwal, Kumar, Faust 2024,
"Inference-Aware Fine-Tuning for Best-of-N Sampling in Large Language Models" (arXiv 2412.15287,
ICLR 2025; math-reference §2). The policy is trained for the way it is used: N draws, a verifier r
picks y* = argmax_i r(x, y_i) (ties uniform), the environment reward R grades the pick,

    J_N(x) = E_{y_1..N iid pi}[ R(x, y*) ] = E_{y ~ pi_bon}[ R(x, y) ]                      (§2.1)

Objectives here (weights w with E[sum_i w_i grad log pi(y_i | x)] = the ascent gradient, base.py):

* ``bon_rl_s`` / ``bon_rl_v``: BoN-RL (§2.4), the exact N-sample identity
  grad J_N = E[(R(y*) - b) sum_i grad log pi(y_i)], averaged over all N-subsets of the G samples
  (U-statistic, ties uniform). Lemma 2's text states a single-sample form (REINFORCE on the BoN pick
  under the tilted policy); this is not that form but the exact gradient of the same J_N.
  S: the pick is by the reward itself; V: by the verifier score (``Group.scores``), graded by the
  reward. Exactly unbiased for grad J_N with baseline none, loo or value.
* ``bon_rlb`` / ``bon_rlb_p``: Lemma 3 / Corollary 4 (§2.6) for a 0/1 reward, whose BoN distribution
  has the closed form of Eq. 8 (§2.5, ``bon_binary``); with the reward as its own verifier J_N is
  pass@N. Default: exactly unbiased U-statistic estimates of p^(N-1) from the other samples. The
  reported (g+, g-) weights at a plug-in p_hat stay as p_estimate='plugin' (biased; at G = 4, 8 the
  expected step of bon_rlb's plug-in form points against grad J). Of the two signs of g-, the exact
  one is '+' (sign='plus'); Lemma 3's prose implies '-', whose expectation is (1+p)/(1-p) grad J.
* ``bon_sft``: Lemma 1 (§2.3), maximum likelihood of the expert answer under the exponential tilt
  pi_lambda = pi exp(lambda_N Q_pi) / Z that approximates pi_bon (§2.2; ``lambda_n``).
* baselines: ``sft`` (expert rows), ``star`` (SFT on the policy's own correct samples), ``rl_s`` /
  ``rl_v`` (RLOO policy gradient on the reward / on the verifier score).

Scale: every weight carries the group's 1/G (a mean over the group's samples), so the expected
step of each objective is the gradient of its per-prompt objective whatever G is.

Rows with ``expert=True`` are demonstrations, not samples of pi: the sample-based objectives give them
weight 0 and use the other rows; ``sft`` and ``bon_sft`` use them as described.

Modules: ``rl`` (BoN-RL, RL-S, RL-V), ``rlb`` (Eq. 8, BoN-RLB, BoN-RLB(P)), ``sft`` (lambda_N,
BoN-SFT, SFT, STaR); shared helpers live in ``objectives/common.py``. Importing the package imports
the three modules, which registers their objectives; it hands on none of their names.

Exactness of every estimator is checked on a tabular softmax policy in tests/test_objectives_bon.py and
tests/test_objectives_exactness.py; docs/objectives-bon.md has the equations, options, and which
estimators are exact and which biased (with measured bias).
"""

from bonbench.plugins.objectives.chow import rl, rlb, sft  # noqa: F401  (importing them registers their objectives)
