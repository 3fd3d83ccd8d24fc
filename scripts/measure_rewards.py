"""The figures docs/rewards.md reports for the offline reward models, measured on the data mirror.

- imdb-sentiment: IMDB test accuracy and 10-bin ECE (from the model's cache marker, measured when it
  was trained; built first if needed); with ``--cv``, the 3-fold cross-validation grid on the train
  split that chose the regularisation C (several minutes).
- tldr-proxy-train / tldr-proxy-eval on all posts of the TL;DR file: the share of posts where the
  human reference scores strictly above each degenerate summary, above a bag of the post's 12 most
  frequent content words (the train proxy's known hole) and above the 1.3B PPO policy's sample
  (information only), and how far the two proxies agree.

Usage: ``python scripts/measure_rewards.py [--data-dir ../shared/data] [--cv]``
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path

import numpy as np

from bonbench.api.reward import get_reward_model
from bonbench.plugins.rewards import imdb, tldr


def imdb_figures(data_dir: Path, cv: bool) -> None:
    reward = get_reward_model("imdb-sentiment", data_dir=data_dir)
    test = reward.marker["test"]
    print(f"imdb-sentiment: test accuracy {test['accuracy']:.4f}, ECE(10 bins) {test['ece']:.4f} on {test['n']} reviews; "
          f"trained in {reward.marker['train_seconds']} s; C={reward.marker['C']}")
    if cv:
        from sklearn.feature_extraction.text import TfidfTransformer
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold, cross_val_score

        texts, labels = imdb.read_split(data_dir / imdb.TRAIN_FILE)
        x = TfidfTransformer(sublinear_tf=True).fit_transform(imdb.NgramCounter.fit(texts).transform(texts))
        folds = StratifiedKFold(3, shuffle=True, random_state=0)
        for c in (2, 4, 8, 16, 32, 64, 128):
            acc = cross_val_score(LogisticRegression(C=c, solver="liblinear", max_iter=1000), x, np.asarray(labels), cv=folds)
            print(f"  3-fold CV on train, C={c:<4} accuracy {acc.mean():.4f}")


def tldr_figures(data_dir: Path) -> None:
    rows = tldr.read_posts(data_dir / tldr.DATA_FILE)
    stop = tldr._stop_words()
    others = dict(tldr.degenerate_summaries(rows))
    others["keyword bag (12 words)"] = [
        " ".join(w for w, _ in Counter(tldr.content_words(tldr.words(f"{r['title']} {r['post']}"), stop)).most_common(12))
        for r in rows]
    others["PPO 1.3B sample (info)"] = [r["policy_sample"] for r in rows]
    models = [get_reward_model(name, data_dir=data_dir) for name in (tldr.TRAIN_NAME, tldr.EVAL_NAME)]
    print(f"TL;DR, {len(rows)} posts: share where the reference scores strictly above ...")
    table = {m.name: tldr.reference_wins(m, rows, others) for m in models}
    print(f"  {'alternative':<26}" + "".join(f"{m.name:>18}" for m in models))
    for label in others:
        print(f"  {label:<26}" + "".join(f"{table[m.name][label]:>18.3f}" for m in models))
    prompts = [r["prompt"] for r in rows]
    texts = [r["summary"] for r in rows] + [r["policy_sample"] for r in rows]
    a, b = (np.asarray(m.score(prompts + prompts, texts)) for m in models)
    from scipy.stats import spearmanr

    n = len(rows)
    same_pick = float(np.mean((a[:n] > a[n:]) == (b[:n] > b[n:])))
    print(f"  agreement of the two proxies on references and PPO samples: Spearman {spearmanr(a, b).statistic:.3f}; "
          f"same pick between reference and PPO sample on {same_pick:.3f} of posts")
    for m, s in zip(models, (a, b), strict=True):
        print(f"  {m.name}: mean reward reference {s[:n].mean():.3f}, PPO sample {s[n:].mean():.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("BONBENCH_DATA_DIR",
                                                             str(Path(__file__).resolve().parents[2] / "shared" / "data")))
    parser.add_argument("--cv", action="store_true", help="also rerun the cross-validation that chose C (minutes)")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    imdb_figures(Path(args.data_dir), args.cv)
    tldr_figures(Path(args.data_dir))


if __name__ == "__main__":
    main()
