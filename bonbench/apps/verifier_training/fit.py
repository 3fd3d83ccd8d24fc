"""The verifier's logistic head: the class-count check, the held-out split by problem, the grouped
cross-validated fit (scikit-learn) and AUROC.

This module fits and measures on features in memory; it reads and writes no files.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bonbench.apps.verifier_training.training_data import LabelledSample
from bonbench.core.errors import BonbenchError
from bonbench.plugins.verifiers import model as vm


def check_class_counts(rows: Sequence[LabelledSample], min_class: int) -> None:
    """Refuse (before any feature is computed) training data whose rarer class has fewer than
    ``min_class`` samples: a head fit on a handful of positives scores noise, and its report would
    look like a verifier."""
    n_pos = sum(r.label for r in rows)
    n_neg = len(rows) - n_pos
    rare, label = (n_pos, "correct") if n_pos <= n_neg else (n_neg, "wrong")
    if rare < min_class:
        rare_label = 1 if label == "correct" else 0
        n_probs = len({r.problem.id for r in rows if r.label == rare_label})
        problems = f"{n_probs} problem{'' if n_probs == 1 else 's'}"
        anyway = f", or pass --min-class {rare} to fit anyway" if rare else ""  # zero: nothing to fit at all
        raise BonbenchError(f"only {rare} of {len(rows)} training samples are {label} ({problems}), fewer than "
                            f"--min-class {min_class}: sample more problems or more samples per problem (--n), or "
                            f"{'easier' if rare_label else 'harder'} problems{anyway}")


def split_problems(rows: Sequence[LabelledSample], fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of rows whose problem is held out (a seeded hash of the problem id, so the split
    is the same on every run and never puts one problem's samples on both sides)."""
    def held(pid: str) -> bool:
        h = int(hashlib.sha256(f"{seed}:{pid}".encode()).hexdigest()[:8], 16)
        return h / 0xFFFFFFFF < fraction

    return np.array([held(r.problem.id) for r in rows], dtype=bool)


def fit_head(head: vm.ScalarHead, feats: torch.Tensor, labels: np.ndarray, groups: Sequence[str], folds: int,
             seed: int) -> dict[str, Any]:
    """Logistic regression on standardised features, L2 strength by grouped-CV AUROC (scikit-learn),
    copied into ``head``. Returns the chosen C and the CV AUROC."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import GroupKFold

    if labels.min() == labels.max():
        raise BonbenchError(f"every training sample is {'correct' if labels[0] else 'wrong'}: a verifier needs both; "
                            "sample more problems or more samples per problem (--n), or easier problems (-T level=1)")
    mu, sigma = head.standardise_from(feats)  # on the features' device: the head may be on the GPU
    x = ((feats - mu) / sigma).double().numpy()
    n_groups = len(set(groups))
    k = max(2, min(folds, n_groups))
    cv = list(GroupKFold(n_splits=k).split(x, labels, groups))
    clf = LogisticRegressionCV(Cs=np.logspace(-4, 1, 11).tolist(), l1_ratios=(0.0,), cv=cv, scoring="roc_auc",
                               max_iter=2000, random_state=seed, use_legacy_attributes=False)
    with warnings.catch_warnings():  # folds without a positive: reported once, as cv_folds_with_both_classes
        warnings.filterwarnings("ignore", message="Only one class is present")
        clf.fit(x, labels)
    with torch.no_grad():
        head.linear.weight.copy_(torch.as_tensor(clf.coef_, dtype=torch.float32))
        head.linear.bias.copy_(torch.as_tensor(clf.intercept_, dtype=torch.float32))
    grid = clf.scores_ if not isinstance(clf.scores_, dict) else next(iter(clf.scores_.values()))
    folds_by_c = np.asarray(grid, dtype=np.float64).reshape(k, -1)  # [folds, Cs]; NaN where a fold has one class
    per_c = np.nanmean(folds_by_c, axis=0) if np.isfinite(folds_by_c).any() else None
    # with very few correct samples (the 270M model at T = 1: ~2% of MATH level 1) most folds have no
    # positive, the CV AUROC is undefined and the choice of C means little: recorded as None, not NaN
    return {"C": float(np.ravel(clf.C_)[0]), "cv_auroc": None if per_c is None else float(np.nanmax(per_c)),
            "cv_folds": k, "cv_folds_with_both_classes": int(np.isfinite(folds_by_c[:, 0]).sum())}


def auroc(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float | None:
    """Area under the ROC curve (scikit-learn); None when only one class is present."""
    from sklearn.metrics import roc_auc_score

    y = np.asarray(labels)
    if y.size == 0 or y.min() == y.max():
        return None
    return float(roc_auc_score(y, np.asarray(scores, dtype=np.float64)))
