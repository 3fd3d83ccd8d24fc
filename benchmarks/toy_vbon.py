"""Amini et al.'s closed forms and vBoN training on a categorical toy (docs/objectives-bon.md).

Part 1: a reference policy over K outcomes with distinct continuous rewards. For N = 1..64 the exact
BoN distribution (amini.bon_probs) gives the win rate against a reference sample (ties half) and
KL(pi_bon || pi_ref), printed beside the continuous-reward values N/(N+1) and log N - (N-1)/N
(math-reference §3.5).

Part 2: a tabular softmax policy started at pi_ref is trained with the objectives' own weights on
sampled groups (G samples per step, plain gradient ascent on the logits, w from
``Objective.weights(Group)``), and KL(pi_theta || pi_bon) is tracked exactly:

* vbon, exact F   : -KL(pi_theta || pi_bon) with pi_bon from the exact strict CDF (amini.vbon_weights)
* vbon, F_hat     : the registered ``vbon`` objective, F_hat from M reference rewards (add-one CDF)
* vbon_l          : the registered ``vbon_l`` objective (bound L), same F_hat
* vbon_l (L1)     : the looser L_1 (its terms carry beta = N(N+1)/2 on log pi_ref, so its step size is
                    lr / beta; with the full lr the policy collapses onto one outcome and stalls)

Not a test: run it by hand, `python benchmarks/toy_vbon.py` (about 20 s on 2 cores); figures go to
docs/img/vbon_toy_closed_forms.png and docs/img/vbon_toy_training.png.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bonbench.api.objective import Group
from bonbench.plugins.objectives import amini

ROOT = Path(__file__).resolve().parents[1]


def toy(K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=1.0, size=K)
    p = np.exp(logits - logits.max())
    return p / p.sum(), rng.normal(size=K)  # pi_ref, distinct continuous rewards


def closed_forms(p_ref: np.ndarray, r: np.ndarray, Ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    win = np.array([amini.bon_win_rate(p_ref, r, int(N)) for N in Ns])
    kl = np.array([amini.bon_kl_to_ref(p_ref, r, int(N)) for N in Ns])
    return win, kl


def softmax(theta: np.ndarray) -> np.ndarray:
    z = np.exp(theta - theta.max())
    return z / z.sum()


def train(kind: str, p_ref: np.ndarray, r: np.ndarray, N: int, ref_rewards: np.ndarray, steps: int, G: int,
          lr: float, seed: int, every: int) -> tuple[np.ndarray, np.ndarray]:
    """Gradient ascent with sampled groups; returns (steps, KL(pi_theta || pi_bon)) at every ``every``."""
    rng = np.random.default_rng(seed)
    K = p_ref.size
    theta = np.log(p_ref).copy()
    log_ref = np.log(p_ref)
    bon = amini.bon_probs(p_ref, r, N)
    F = amini.strict_cdf(p_ref, r)
    with np.errstate(divide="ignore"):
        log_bon_exact = amini.log_bon_prob(np.log(F), log_ref, N)
    obj = {"vbon_fhat": amini.vbon(N=N, ties="strict"), "vbon_l": amini.vbon_l(N=N),
           "vbon_l1": amini.vbon_l(N=N, bound="L1")}.get(kind)
    xs, ys = [], []
    for step in range(steps + 1):
        pi = softmax(theta)
        if step % every == 0 or step == steps:
            xs.append(step)
            ys.append(amini.kl(pi, bon))
        if step == steps:
            break
        y = rng.choice(K, size=G, p=pi)
        lp = np.log(pi)[y]
        if kind == "vbon_exact":
            w = amini.vbon_weights(log_bon_exact[y], lp)
        else:
            w = obj.weights(Group(rewards=r[y], logprobs=lp, ref_logprobs=log_ref[y], ref_rewards=ref_rewards))
        grad = np.bincount(y, weights=w, minlength=K) - w.sum() * pi  # sum_i w_i (e_{y_i} - pi)
        theta += lr * grad
    return np.array(xs), np.array(ys)


def target_kls(p_ref: np.ndarray, r: np.ndarray, N: int, ref_rewards: np.ndarray) -> dict[str, float]:
    """KL(argmax of each objective || pi_bon): where each training run should end up."""
    bon = amini.bon_probs(p_ref, r, N)
    log_ref = np.log(p_ref)
    lf = amini.log_f_hat(r, ref_rewards)
    out = {"vbon_exact": 0.0}
    q = np.exp(amini.log_bon_prob(lf, log_ref, N))
    out["vbon_fhat"] = amini.kl(q / q.sum(), bon)
    for kind, bound in (("vbon_l", "L"), ("vbon_l1", "L1")):
        # argmax over pi of E_pi[h] + H(pi) is pi ~ exp(h); h = the bound's terms without -log pi
        h = amini.vbon_l_terms(lf, np.zeros_like(lf), log_ref, N, bound)
        q = np.exp(h - h.max())
        out[kind] = amini.kl(q / q.sum(), bon)
    return out


LABELS = {"vbon_exact": "vbon, exact F", "vbon_fhat": "vbon, F_hat (M ref)", "vbon_l": "vbon_l (L)",
          "vbon_l1": "vbon_l (L1)"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--K", type=int, default=50)
    ap.add_argument("--N", type=int, default=8)
    ap.add_argument("--M", type=int, default=1000, help="reference rewards per prompt for F_hat")
    ap.add_argument("--G", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = ap.parse_args()
    t0 = time.time()

    p_ref, r = toy(args.K, 0)
    Ns = np.arange(1, 65)
    win, kl = closed_forms(p_ref, r, Ns)
    print(f"Part 1: exact BoN of a random reference over K = {args.K} outcomes, distinct rewards")
    print(f"{'N':>3} {'win rate':>9} {'N/(N+1)':>8} {'KL(bon||ref)':>13} {'logN-(N-1)/N':>13}")
    for N in (1, 2, 4, 8, 16, 32, 64):
        print(f"{N:>3} {win[N - 1]:>9.4f} {N / (N + 1):>8.4f} {kl[N - 1]:>13.4f} {amini.kl_bound(N):>13.4f}")
    K_big = 4000
    p_c, r_c = np.full(K_big, 1.0 / K_big), np.arange(K_big, dtype=float)
    wc, kc = closed_forms(p_c, r_c, np.array([8]))
    print(f"near-continuous check (K = {K_big} equal atoms, N = 8): win {wc[0]:.6f} vs {8 / 9:.6f}, "
          f"KL {kc[0]:.6f} vs {amini.kl_bound(8):.6f}")

    fig = Figure(figsize=(9.0, 3.6), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(Ns, win, "o", ms=3, label=f"exact BoN, K = {args.K}")
    ax1.plot(Ns, Ns / (Ns + 1), "-", label="N/(N+1)")
    ax1.set_xscale("log", base=2)
    ax1.set_xlabel("N")
    ax1.set_ylabel("win rate vs reference (ties half)")
    ax1.legend()
    ax2.plot(Ns, kl, "o", ms=3, label=f"exact KL(bon || ref), K = {args.K}")
    ax2.plot(Ns, [amini.kl_bound(int(N)) for N in Ns], "-", label="log N - (N-1)/N")
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("N")
    ax2.set_ylabel("nats")
    ax2.legend()
    args.out.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(args.out / "vbon_toy_closed_forms.png", dpi=110)

    rng = np.random.default_rng(123)
    ref_rewards = r[rng.choice(args.K, size=args.M, p=p_ref)]
    targets = target_kls(p_ref, r, args.N, ref_rewards)
    every = max(1, args.steps // 60)
    curves = {}
    for kind in LABELS:
        lr = args.lr / (args.N * (args.N + 1) / 2 if kind == "vbon_l1" else 1.0)  # L1's terms are ~beta x larger
        runs = [train(kind, p_ref, r, args.N, ref_rewards, args.steps, args.G, lr, 1000 + s, every)
                for s in range(args.seeds)]
        curves[kind] = (runs[0][0], np.mean([y for _, y in runs], axis=0))
    print(f"\nPart 2: tabular softmax from pi_ref, N = {args.N}, G = {args.G}, lr = {args.lr} (L1: lr/beta), M = {args.M}, "
          f"{args.steps} steps, mean of {args.seeds} seeds; KL(pi_theta || pi_bon) in nats")
    marks = [0, args.steps // 10, args.steps // 3, args.steps]
    head = " ".join(f"{'step ' + str(m):>11}" for m in marks)
    print(f"{'objective':<22} {head} {'optimum':>9}")
    for kind, (xs, ys) in curves.items():
        vals = " ".join(f"{ys[int(np.argmin(np.abs(xs - m)))]:>11.4f}" for m in marks)
        print(f"{LABELS[kind]:<22} {vals} {targets[kind]:>9.4f}")

    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.subplots()
    for kind, (xs, ys) in curves.items():
        line, = ax.plot(xs, ys, label=LABELS[kind])
        ax.axhline(max(targets[kind], 1e-4), color=line.get_color(), ls=":", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("KL(pi_theta || pi_bon)  [nats]")
    ax.set_title(f"K = {args.K}, N = {args.N}, G = {args.G}; dotted: each objective's optimum")
    ax.legend()
    FigureCanvasAgg(fig)
    fig.savefig(args.out / "vbon_toy_training.png", dpi=110)
    print(f"\nwrote {args.out / 'vbon_toy_closed_forms.png'} and {args.out / 'vbon_toy_training.png'} "
          f"in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
