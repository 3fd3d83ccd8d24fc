"""Tang et al.'s toy bandit, reproduced with bonbench's own objective weights (objectives/tang.py).

Setting (Tang, Zheng, Synnaeve, Munos 2025, arXiv 2503.19595, bandit experiment; math-reference
Findings): 100 arms whose rewards are drawn N(0, 1) once per seed, a softmax policy pi = softmax(theta)
from theta_0 = 0 (uniform), k = 4, learning rate 1.0. Updates are *sampled*, as in the paper: each
step draws G = k arms iid from pi, computes the weights w with the same functions the trainer uses,
and ascends theta += lr * sum_i w_i (e_{a_i} - pi) (the score function of a softmax). Methods:

* mean PG      tang.mean_weights(r, "loo")          RLOO for E[r] with the trainer's 1/G scale
* mean PG x G  G * tang.mean_weights(r, "loo")      the same advantages summed, not averaged
                                                    (the k-sample estimators' per-sample scale)
* max@4 LOO    tang.passk_weights(r, 4, "loo")      unbiased for grad E[max of 4 rewards]
* max@4 biased tang.passk_weights(r, 4, "biased")   mean-centred, unbiased for grad J_3

Tracked per step, exactly from pi: E[r], max@4 = E[max of 4 iid rewards] (called pass@4 here as in
the paper, real rewards) and KL(pi || pi_0) with pi_0 uniform. Bands over seeds: mean and 10-90%
(metrics figure), mean +- 1.96 standard errors (pass@4-vs-KL figure and tables; seeds share their
arms across methods, so the method differences are paired by seed). ``--exact`` ascends each
estimator's exact expectation instead (grad E[r], G grad E[r], grad J_k, grad J_(k-1)): the same
objectives without sampling noise.

Writes docs/img/bandit_tang_metrics.png (metrics against steps) and
docs/img/bandit_tang_pass_vs_kl.png (pass@4 against KL; ``--exact``: bandit_tang_exact_*.png),
prints pass@4 at fixed KL levels with the step at which each method reaches them, and says whether
"k-sample objectives are more KL-efficient" held in this run (results: docs/objectives-tang.md).
Not a test; run by hand (about 11 s at the defaults on 2 cores):
    python benchmarks/bandit_tang.py --seeds 100 --steps 1000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bonbench.plugins.objectives import tang

REPO = Path(__file__).resolve().parents[1]


def methods(k: int) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    return {
        "mean PG (RLOO, w=A/G)": lambda r: tang.mean_weights(r, "loo"),
        "mean PG x G (w=A)": lambda r: r.size * tang.mean_weights(r, "loo"),
        f"max@{k} LOO": lambda r: tang.passk_weights(r, k, "loo"),
        f"max@{k} biased": lambda r: tang.passk_weights(r, k, "biased"),
    }


COLORS = ["#1f77b4", "#17becf", "#d62728", "#ff7f0e"]


def softmax_rows(theta: np.ndarray) -> np.ndarray:
    z = np.exp(theta - theta.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def metrics(pi: np.ndarray, R: np.ndarray, order: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """E[r], E[max of k iid draws] (sorted CDF: sum_j R_(j) (F_j^k - F_(j-1)^k)) and KL(pi || uniform)."""
    mean = (pi * R).sum(axis=1)
    F = np.cumsum(np.take_along_axis(pi, order, axis=1), axis=1)
    Fk = np.clip(F, 0.0, 1.0) ** k
    top = (np.take_along_axis(R, order, axis=1) * np.diff(Fk, prepend=0.0, axis=1)).sum(axis=1)
    A = pi.shape[1]
    kl = (pi * np.log(np.clip(pi, 1e-300, None) * A)).sum(axis=1)
    return mean, top, kl


def exact_grad(pi: np.ndarray, R: np.ndarray, order: np.ndarray, m: int) -> np.ndarray:
    """grad_theta J_m, J_m = E[max of m iid draws] = sum_j R_(j) (F_j^m - F_(j-1)^m) (sorted CDF F).

    dJ/dpi_a = sum_{j >= rank(a)} (R_(j) - R_(j+1)) m F_j^(m-1) (R_(n+1) = 0); then the softmax
    chain rule pi * (g - <pi, g>)."""
    F = np.cumsum(np.take_along_axis(pi, order, axis=1), axis=1)
    Rs = np.take_along_axis(R, order, axis=1)
    step = Rs - np.concatenate([Rs[:, 1:], np.zeros((R.shape[0], 1))], axis=1)
    g_sorted = np.cumsum((step * m * np.clip(F, 0, 1) ** (m - 1))[:, ::-1], axis=1)[:, ::-1]
    g = np.empty_like(g_sorted)
    np.put_along_axis(g, order, g_sorted, axis=1)
    return pi * (g - (pi * g).sum(axis=1, keepdims=True))


def run(weights_of: Callable[[np.ndarray], np.ndarray], R: np.ndarray, steps: int, G: int, k: int, lr: float,
        seed: int, exact: tuple[float, int] | None = None) -> np.ndarray:
    """[3, steps + 1, S] of (E[r], max@k, KL) for every seed (rows of R): sampled updates, or with
    ``exact = (c, m)`` the estimator's exact expectation c grad J_m instead."""
    S, A = R.shape
    order = np.argsort(R, axis=1)
    rng = np.random.default_rng(seed)
    theta = np.zeros((S, A))
    out = np.empty((3, steps + 1, S))
    rows = np.repeat(np.arange(S), G)
    for t in range(steps + 1):
        pi = softmax_rows(theta)
        out[:, t] = metrics(pi, R, order, k)
        if t == steps:
            break
        if exact is not None:
            theta += lr * exact[0] * exact_grad(pi, R, order, exact[1])
            continue
        cdf = np.cumsum(pi, axis=1)
        u = rng.random((S, G)) * cdf[:, -1:]
        arms = np.minimum((cdf[:, None, :] <= u[:, :, None]).sum(axis=2), A - 1)  # inverse CDF
        w = np.stack([weights_of(R[s, arms[s]]) for s in range(S)])
        np.add.at(theta, (rows, arms.ravel()), lr * w.ravel())
        theta -= lr * w.sum(axis=1, keepdims=True) * pi
    return out


def at_kl(kl: np.ndarray, value: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Per seed: value at the first crossing of KL = level (linear in KL between steps), and that step;
    NaN for seeds that never reach the level."""
    steps, S = kl.shape
    val, step = np.full(S, np.nan), np.full(S, np.nan)
    for s in range(S):
        hit = np.nonzero(kl[:, s] >= level)[0]
        if hit.size == 0:
            continue
        t = hit[0]
        if t == 0:
            val[s], step[s] = value[0, s], 0
            continue
        a = (level - kl[t - 1, s]) / (kl[t, s] - kl[t - 1, s])
        val[s] = value[t - 1, s] + a * (value[t, s] - value[t - 1, s])
        step[s] = t - 1 + a
    return val, step


def se95(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(1.96 * x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else float("nan")


def band(ax, x, y, color, label, se=False):
    """Mean over seeds (columns of y) with a 10-90% band, or a +-1.96 se band with ``se``."""
    mean = np.nanmean(y, axis=1)
    ax.plot(x, mean, color=color, lw=1.6, label=label)
    if se:
        half = np.array([se95(row) for row in y])
        lo, hi = mean - half, mean + half
    else:
        lo, hi = np.nanpercentile(y, 10, axis=1), np.nanpercentile(y, 90, axis=1)
    ax.fill_between(x, lo, hi, color=color, alpha=0.15, lw=0)


def figures(res: dict[str, np.ndarray], k: int, kl_grid: np.ndarray, out_dir: Path, title: str, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = next(iter(res.values())).shape[1] - 1
    x = np.arange(steps + 1)
    fig = Figure(figsize=(12, 3.6), layout="constrained")
    axes = fig.subplots(1, 3)
    for (name, r), color in zip(res.items(), COLORS, strict=False):
        for ax, m in zip(axes, r, strict=False):
            band(ax, x, m, color, name)
    for ax, lab in zip(axes, ["E[r]", f"pass@{k} = E[max of {k}]", "KL(pi || pi_0)"], strict=True):
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlabel("step (linear to 10, log after)")
        ax.set_ylabel(lab)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title + "; mean and 10-90% of seeds", fontsize=9)
    paths = [out_dir / f"{stem}_metrics.png"]
    FigureCanvasAgg(fig)
    fig.savefig(paths[0], dpi=110)

    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    ax = fig.add_subplot()
    for (name, r), color in zip(res.items(), COLORS, strict=False):
        curve = np.stack([at_kl(r[2], r[1], lv)[0] for lv in kl_grid])  # [levels, S]
        ok = np.isfinite(curve).mean(axis=1) >= 0.5  # drawn where at least half the seeds got there
        band(ax, kl_grid[ok], curve[ok], color, name, se=True)
    ax.set_xlabel("KL(pi || pi_0) (first crossing per seed)")
    ax.set_ylabel(f"pass@{k} = E[max of {k}]")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title.replace(", lr", ",\nlr") + "; mean +- 1.96 se", fontsize=8)
    paths.append(out_dir / f"{stem}_pass_vs_kl.png")
    FigureCanvasAgg(fig)
    fig.savefig(paths[1], dpi=110)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--arms", type=int, default=100)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--group", type=int, default=None, help="samples per step (default k)")
    ap.add_argument("--lr", type=float, default=1.0)
    ap.add_argument("--kl", type=float, nargs="+", default=[0.5, 1.0, 2.0, 3.0])
    ap.add_argument("--exact", action="store_true", help="ascend each estimator's exact expectation (no sampling)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = ap.parse_args()
    k, G = args.k, args.group or args.k
    R = np.stack([np.random.default_rng(s).normal(size=args.arms) for s in range(args.seeds)])
    t0 = time.perf_counter()
    # exact expectations (tang.py's scale conventions): mean PG = grad E[r] (x G for the summed one),
    # max@k LOO = grad J_k, max@k biased = grad J_(k-1)
    expect = [(1.0, 1), (float(G), 1), (1.0, k), (1.0, k - 1)]
    res = {name: run(fn, R, args.steps, G, k, args.lr, seed=1000 + j, exact=expect[j] if args.exact else None)
           for j, (name, fn) in enumerate(methods(k).items())}
    took = time.perf_counter() - t0
    how = "exact expected updates" if args.exact else f"G = {G} sampled/step"
    title = (f"{args.arms}-armed N(0,1) bandit, softmax from theta_0 = 0, k = {k}, {how}, "
             f"lr {args.lr:g}, {args.seeds} seeds")
    kl_max = max(float(np.nanmax(r[2])) for r in res.values())
    paths = figures(res, k, np.linspace(0.0, min(kl_max, 1.2 * max(args.kl)), 60), args.out, title,
                    "bandit_tang_exact" if args.exact else "bandit_tang")

    print(title)
    shown = ", ".join(str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p) for p in paths)
    print(f"{args.steps} steps, {took:.1f} s; figures: {shown}")
    uniform = np.mean(next(iter(res.values()))[1, 0])
    print(f"\nmax@{k} of the best arm (upper limit): {np.mean(R.max(axis=1)):.3f}; uniform policy: {uniform:.3f}")
    print(f"\nby step: pass@{k} (mean +- 1.96 se) and KL (mean)")
    marks = sorted({s for s in (10, 100, 300, args.steps) if s <= args.steps})
    print(f"{'method':24s}" + "".join(f"{'step ' + str(s):>22s}" for s in marks))
    for name, r in res.items():
        print(f"{name:24s}" + "".join(f"{r[1, s].mean():9.3f} +-{se95(r[1, s]):.3f} KL {r[2, s].mean():4.2f}" for s in marks))

    print(f"\nat fixed KL: pass@{k} (mean +- 1.96 se over seeds reaching it) [median step, seeds reaching]")
    print(f"{'method':24s}" + "".join(f"{'KL ' + format(lv, 'g'):>28s}" for lv in args.kl))
    at = {name: [at_kl(r[2], r[1], lv) for lv in args.kl] for name, r in res.items()}
    for name in res:
        cells = []
        for val, step in at[name]:
            n = int(np.isfinite(val).sum())
            cells.append(f"{np.nanmean(val):7.3f} +-{se95(val):.3f} [{np.nanmedian(step):5.0f}, {n:3d}]" if n
                         else f"{'not reached':>28s}")
        print(f"{name:24s}" + "".join(f"{c:>28s}" for c in cells))

    print("\nverdict: is pass@k higher at equal KL for the k-sample objectives than for mean PG? (paired by seed)")
    names = list(res)
    word: dict[tuple[str, str, float], str] = {}
    for ref in names[:2]:
        for name in names[2:]:
            for lv, (a, _), (b, _) in zip(args.kl, at[name], at[ref], strict=True):
                d = a - b
                d = d[np.isfinite(d)]
                if d.size < 2:
                    word[name, ref, lv] = "too few seeds"
                    print(f"  KL {lv:g}: {name} vs {ref}: too few seeds reach it ({d.size})")
                    continue
                m, e = d.mean(), se95(d)
                word[name, ref, lv] = "YES" if m - e > 0 else ("NO" if m + e < 0 else "inconclusive")
                print(f"  KL {lv:g}: {name} - {ref} = {m:+.3f} +- {e:.3f} over {d.size} seeds -> {word[name, ref, lv]}")
    print(f"\nSUMMARY ({how}, lr {args.lr:g}, {args.steps} steps, {args.seeds} seeds): "
          f"'k-sample objectives are more KL-efficient' (pass@{k} at equal KL, both max@{k} estimators vs both mean-PG scalings)")
    for lv in args.kl:
        ws = {pair: w for pair, w in word.items() if pair[2] == lv}
        nos = sorted({f"{ref} beats {name}" for (name, ref, _), w in ws.items() if w == "NO"})
        if all(w == "YES" for w in ws.values()):
            verdict = "HOLDS"
        elif nos:
            verdict = "DOES NOT HOLD: " + "; ".join(nos)
        else:
            yes = sorted({f"{name} > {ref}" for (name, ref, _), w in ws.items() if w == "YES"})
            verdict = "NOT ESTABLISHED: significant only for " + ("; ".join(yes) if yes else "none")
        print(f"  KL {lv:g}: {verdict}")

if __name__ == "__main__":
    main()
