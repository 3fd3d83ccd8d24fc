"""``bonbench train-verifier``: a learned verifier from grader-labelled samples that bonbench drew.

Steps, each resumable:

1. **Data.** Every ``--samples-from`` run directory is reopened (its task rebuilt from config.json);
   its samples and the grades of the task's current grader are joined by (problem_id, sample_idx).
   A sample without a grade, a reward-judged task, runs of different task families or of different
   policies are refused with a one-line error.
2. **Evaluation problems excluded, checked.** The problems of the family's evaluation sets (MATH
   test and MATH-500 for math; MBPP test and HumanEval for code) are loaded and compared with
   the training problems by id and by a normalised problem-text hash; any overlap is an error.
3. **Features.** The frozen backbone's feature of every sample (``verifier_model``), computed in
   chunks appended to ``features/`` so a killed run resumes where it stopped.
4. **Head.** Logistic regression (scikit-learn ``LogisticRegressionCV``, the L2 strength chosen by
   AUROC with folds grouped by problem, so one problem's samples never sit on both sides) on the
   standardised features, copied into the torch head.
5. **LoRA** (``--method lora``): the backbone's adapters and the head fine-tuned together with
   binary cross-entropy on the problems not held out, starting from the head fit on those same
   problems; training state saved every ``--save-every`` steps (atomically) and resumed.
6. **Manifest**, written last: a folder with ``bonbench_verifier.json`` is a finished verifier.

Held-out quality (AUROC on problems of the training runs that the head, or the adapters, did not
see) is reported in the manifest; evaluation on other runs is ``bonbench eval-verifier``
(``bonbench.apps.analysis.verifiers``).
This module trains and writes the verifier folder; it does not sample (``bonbench run`` does).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import pickle
import re
import shutil
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import torch

from bonbench.core import flags, outputs
from bonbench.plugins.verifiers import folder as vf
from bonbench.plugins.verifiers import model as vm
from bonbench.core.errors import BonbenchError
from bonbench.core.models import EMBEDDED_MODEL, ResolvedModel, resolve_model
from bonbench.core.records import Grade, Problem, Sample
from bonbench.core.store import RunStore, atomic_write_json, read_json

Progress = Callable[[str, int, int], None]
TRAIN_CONFIG = "train_verifier_config.json"
FEATURES = vf.FEATURES_DIR
STATE = "training_state"
FEATURE_CHUNK = 256

# The evaluation sets of each family: (task, task args). Training problems must be none of these.
EVAL_SETS: dict[str, tuple[tuple[str, dict[str, str]], ...]] = {
    "math": (("math", {"split": "test"}), ("math500", {})),
    "code": (("mbpp", {"split": "test"}), ("mbpp", {"split": "test", "variant": "sanitized"}), ("humaneval", {})),
}


@dataclass(frozen=True)
class TrainVerifierRequest:
    """The flags of ``bonbench train-verifier`` as values (see ``docs/verifiers.md``)."""

    run_dirs: tuple[Path, ...]
    task: str | None = None  # the family the runs must belong to (checked); default: the runs'
    name: str | None = None  # folder name under <out>/verifiers (default: <family>-<policy slug>-<method>)
    model: str | None = None  # the backbone (default: the embedded Gemma 3 270M)
    method: str = "head"  # head: frozen backbone + logistic head; lora: + LoRA adapters fine-tuned
    out: Path = Path("results")
    data_dir: str | None = None
    max_length: int = vf.DEFAULT_MAX_LENGTH
    batch_size: int = 16
    dtype: str = "bfloat16"
    folds: int = 5
    seed: int = 0
    val_fraction: float = 0.2  # problems held out of training to report AUROC on
    drop_eval_overlap: bool = False  # leave out training problems that are evaluation problems (else refuse)
    # fewest samples of the rarer class (correct or wrong) to fit on: below it the head fits noise and the
    # grouped CV has folds without a positive (MBPP train with the 270M model: 1 correct of 480)
    min_class: int = 10
    # lora only
    epochs: int = 1
    lr: float = 1e-4
    lora_rank: int = 8
    lora_alpha: int = 16
    micro_batch: int = 8
    save_every: int = 50

    def settings(self) -> dict[str, Any]:
        """What a resumed training must share with the first one (everything but paths and batch size)."""
        d = asdict(self)
        for k in ("run_dirs", "out", "data_dir", "name", "batch_size", "save_every", "min_class"):
            d.pop(k)
        return d


@dataclass(frozen=True)
class LabelledSample:
    """One training row: a graded sample of a run, keyed by (run hash, problem_id, sample_idx)."""

    run: str
    problem: Problem
    sample: Sample
    label: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.run, self.sample.problem_id, self.sample.sample_idx)


@dataclass(frozen=True)
class TrainingData:
    rows: tuple[LabelledSample, ...]
    family: str
    tasks: tuple[str, ...]
    policy: Mapping[str, Any]  # name, fingerprint, model_type of the model that drew the samples
    runs: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for r in sorted(self.rows, key=lambda r: r.key):
            h.update(json.dumps([*r.key, r.label, hashlib.sha256(r.sample.completion.encode()).hexdigest()]).encode())
        return "sha256:" + h.hexdigest()[:16]


# ------------------------------------------------------------------------------------ data


def normalised_text_hash(text: str) -> str:
    """Problem identity across datasets whose ids differ: lowercased, whitespace collapsed."""
    return hashlib.sha256(re.sub(r"\s+", " ", text).strip().lower().encode()).hexdigest()


def _policy_family(cfg: Mapping[str, Any]) -> str | None:
    try:
        return vf.model_type(resolve_model(cfg["model"]).path)
    except BonbenchError:
        return None  # a served or imported model: no config.json to read the family from


def assemble(run_dirs: Sequence[Path], *, data_dir: str | None = None, family: str | None = None) -> TrainingData:
    """Graded samples of ``run_dirs`` joined by key (see the module docstring, step 1)."""
    from bonbench.pipeline.stages import grading_id
    from bonbench.run.runner import load_task

    if not run_dirs:
        raise BonbenchError("give at least one --samples-from RUN_DIR (a run directory `bonbench run` printed)")
    rows: list[LabelledSample] = []
    tasks, policies, runs = set(), {}, []
    for d in run_dirs:
        store = RunStore(Path(d))
        if not store.exists():
            raise BonbenchError(f"--samples-from {str(d)!r} is not a run directory (no config.json); pass the directory "
                                "`bonbench run` printed")
        doc = store.read_config()
        cfg = doc["config"]
        task = load_task(cfg["task"], cfg.get("task_args", {}), data_dir=data_dir, out=store.results_root)
        if task.judged_by != "correctness":
            raise BonbenchError(f"run {d} is of task {task.name!r}, judged by a reward model: a learned verifier learns "
                                "correctness; use a task with a grader (math, mbpp, ...)")
        fam = vf.task_family(task.name)
        if family is not None and fam != vf.task_family(family):
            raise BonbenchError(f"run {d} is of task {task.name!r} (family {fam}), not {family!r}; drop it or change --task")
        tasks.add(task.name)
        problems = {p.id: p for p in task.problems}
        samples = store.samples.read()
        if not samples:
            raise BonbenchError(f"run {d} has no samples; run `bonbench run` with its settings first")
        unknown = sorted({pid for pid, _ in samples} - set(problems))
        if unknown:
            raise BonbenchError(f"run {d} has samples of {len(unknown)} problems its task args do not select (e.g. "
                                f"{unknown[0]!r}); train from runs made with one set of -T filters")
        gid = grading_id(task)
        grades: dict[tuple[str, int], Grade] = store.grades(task.grader.name).read(
            lambda g: g.graded_under(task.grader.version, gid))
        ungraded = [k for k in samples if k not in grades]
        if ungraded:
            raise BonbenchError(f"run {d} has {len(ungraded)} samples without grades (e.g. {ungraded[0]}); grade them "
                                f"with `bonbench score {d}`")
        for key in sorted(samples):
            g = grades[key]
            rows.append(LabelledSample(doc["hash"], problems[key[0]], samples[key], 1 if g.correct else 0))
        policies[cfg["model_fingerprint"]] = cfg
        runs.append({"run_dir": str(Path(d).resolve()), "hash": doc["hash"], "task": task.name,
                     "task_args": cfg.get("task_args", {}), "n_samples": len(samples)})
    families = {vf.task_family(t) for t in tasks}
    if len(families) > 1:
        raise BonbenchError(f"the runs are of tasks of different families ({', '.join(sorted(tasks))}); train one verifier per family")
    if len(policies) > 1:
        names = sorted({c["model"] for c in policies.values()})
        raise BonbenchError(f"the runs were sampled by {len(policies)} different models ({', '.join(names)}); a verifier "
                            "learns one policy's samples: pass runs of one model")
    cfg = next(iter(policies.values()))
    policy = {"name": cfg["model"], "fingerprint": cfg["model_fingerprint"], "model_type": _policy_family(cfg)}
    return TrainingData(rows=tuple(rows), family=families.pop(), tasks=tuple(sorted(tasks)), policy=policy, runs=tuple(runs))


def check_no_eval_problems(data: TrainingData, *, data_dir: str | None = None,
                           drop: bool = False) -> tuple[TrainingData, dict[str, Any]]:
    """Refuse training rows whose problem is in one of the family's evaluation sets, by id or by
    normalised text; with ``drop``, leave those problems out instead (MBPP's train split repeats a
    few test-split task texts). Returns the data to train on and what was checked (for the manifest)."""
    from bonbench.run.runner import load_task

    sets = EVAL_SETS.get(data.family, ())
    if not sets:
        raise BonbenchError(f"bonbench has no evaluation sets listed for task family {data.family!r}, so it cannot check "
                            "that evaluation problems are excluded; use math or mbpp runs")
    train_ids = {r.problem.id for r in data.rows}
    train_text = {normalised_text_hash(r.problem.input): r.problem.id for r in data.rows}
    checked, dropped = [], set()
    for name, args in sets:
        task = load_task(name, args, data_dir=data_dir, out=Path("results"))
        by_id = sorted(train_ids & {p.id for p in task.problems})
        by_text = sorted(train_text[h] for h in {normalised_text_hash(p.input) for p in task.problems} & set(train_text))
        bad = by_id or by_text
        if bad and not drop:
            how = "id" if by_id else "problem text"
            label = " ".join([name] + [f"{k}={v}" for k, v in args.items()])
            raise BonbenchError(f"{len(bad)} training problems are evaluation problems of {label} "
                                f"(same {how}, e.g. {bad[0]!r}); sample "
                                "the training runs from the train split (-T split=train), or pass --drop-eval-overlap to leave them out")
        dropped |= set(by_id) | set(by_text)
        checked.append({"task": name, "task_args": args, "n_problems": len(task.problems), "fingerprint": task.fingerprint})
    kept = tuple(r for r in data.rows if r.problem.id not in dropped)
    if not kept:
        raise BonbenchError("every training problem is an evaluation problem; sample the train split (-T split=train)")
    report = {"by": ["problem_id", "normalised_text_sha256"], "sets": checked, "n_train_problems": len(train_ids - dropped),
              "dropped": sorted(dropped)}
    return replace(data, rows=kept), report


# ------------------------------------------------------------------------------------ features


class FeatureCache:
    """Features of training rows in ``features/part-NNNNN.pt`` files ({"keys", "feats"}), written
    atomically one chunk at a time, so a killed run keeps every finished chunk."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def load(self) -> dict[tuple[str, str, int], torch.Tensor]:
        out: dict[tuple[str, str, int], torch.Tensor] = {}
        for part in sorted(self.root.glob("part-*.pt")):
            try:
                blob = torch.load(part, weights_only=True)
                pairs = list(zip(blob["keys"], blob["feats"], strict=True))
            except (RuntimeError, EOFError, OSError, ValueError, KeyError, TypeError, pickle.UnpicklingError) as exc:
                # parts are renamed into place whole, so this one was damaged after it was written
                raise BonbenchError(f"cached features {part} are damaged ({str(exc).splitlines()[0][:80]}); delete that "
                                    "file and rerun: its samples' features are computed again") from None
            for key, row in pairs:
                out[tuple(key)] = row  # type: ignore[index]
        return out

    def append(self, keys: Sequence[tuple[str, str, int]], feats: torch.Tensor) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        n = len(list(self.root.glob("part-*.pt")))
        tmp = self.root / f".part-{n:05d}.tmp"
        with _saving(tmp, "the features computed so far are kept"):
            torch.save({"keys": [list(k) for k in keys], "feats": feats.contiguous()}, tmp)
            tmp.rename(self.root / f"part-{n:05d}.pt")


@contextlib.contextmanager
def _saving(tmp: Path, kept: str) -> Iterator[None]:
    """Around a torch/safetensors save to ``tmp``: a full disk or a read-only folder (an OSError, or
    the RuntimeError torch's writer raises for it) removes ``tmp`` and is a one-line BonbenchError."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and outputs.os_error_message(tmp, exc) is None:
            raise
        if isinstance(exc, RuntimeError) and "writ" not in str(exc).lower():
            raise  # not a write failure: a bug, shown as such
        raise BonbenchError(f"cannot write {tmp.parent} ({str(exc).splitlines()[0][:100]}): free space on that "
                            f"filesystem or make it writable, then rerun the same command; {kept}") from None


def extract_features(model: vm.VerifierModel, rows: Sequence[LabelledSample], cache: FeatureCache,
                     batch_size: int, progress: Progress) -> torch.Tensor:
    """[N, 2H] features of ``rows`` (in order), computing only those not cached yet."""
    have = cache.load()
    todo = [r for r in rows if r.key not in have]
    total = len(todo)
    if total:
        progress("features", 0, total)
    for start in range(0, total, FEATURE_CHUNK):
        chunk = todo[start:start + FEATURE_CHUNK]
        feats = model.features([vm.verifier_text(r.problem, r.sample.completion) for r in chunk], batch_size,
                               lambda k: progress("features", k, total))
        cache.append([r.key for r in chunk], feats)
        have.update({r.key: f for r, f in zip(chunk, feats, strict=True)})
    return torch.stack([have[r.key] for r in rows]) if rows else torch.empty(0)


# ------------------------------------------------------------------------------------ training


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
    head.standardise_from(feats)
    x = ((feats - head.mu) / head.sigma).double().numpy()
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


def auroc(labels: Sequence[int], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve (scikit-learn); None when only one class is present."""
    from sklearn.metrics import roc_auc_score

    y = np.asarray(labels)
    if y.size == 0 or y.min() == y.max():
        return None
    return float(roc_auc_score(y, np.asarray(scores, dtype=np.float64)))


def _train_lora(model: vm.VerifierModel, rows: Sequence[LabelledSample], req: TrainVerifierRequest, folder: Path,
                progress: Progress) -> dict[str, Any]:
    """Fine-tune LoRA adapters and the head together (BCE), resuming from ``training_state/``."""
    params = [p for p in model.backbone.parameters() if p.requires_grad] + list(model.head.linear.parameters())
    opt = torch.optim.AdamW(params, lr=req.lr)
    order_rng = np.random.default_rng(req.seed)
    steps_per_epoch = (len(rows) + req.micro_batch - 1) // req.micro_batch
    orders = [order_rng.permutation(len(rows)) for _ in range(req.epochs)]
    total = steps_per_epoch * req.epochs
    state = folder / STATE
    step, losses = 0, []
    if (state / "state.pt").exists():
        try:
            blob = torch.load(state / "state.pt", weights_only=False)
        except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as exc:
            raise BonbenchError(f"the saved LoRA training state {state / 'state.pt'} is damaged "
                                f"({str(exc).splitlines()[0][:80]}); delete {state} and rerun to train the adapters "
                                "from the start") from None
        trainable = dict((n, p) for n, p in model.backbone.named_parameters() if p.requires_grad)
        with torch.no_grad():
            for n, t in blob["adapter"].items():
                trainable[n].copy_(t)
        model.head.load_state_dict(blob["head"])
        opt.load_state_dict(blob["optimizer"])
        step, losses = int(blob["step"]), list(blob["losses"])
    ids = model.encode([vm.verifier_text(r.problem, r.sample.completion) for r in rows])
    labels = torch.tensor([r.label for r in rows], dtype=torch.float32)
    model.backbone.train()
    progress("lora", step, total)
    t0 = time.time()
    start_step = step
    while step < total:
        epoch, i = divmod(step, steps_per_epoch)
        rows_idx = orders[epoch][i * req.micro_batch:(i + 1) * req.micro_batch]
        logits = model.head(model.features_of_batch([ids[j] for j in rows_idx]))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[rows_idx].to(logits.device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        step += 1
        progress("lora", 1, total)
        if step % req.save_every == 0 or step == total:
            tmp = folder / (STATE + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            adapter = {n: p.detach().cpu().clone() for n, p in model.backbone.named_parameters() if p.requires_grad}
            with _saving(tmp, "the last saved training state is kept"):
                tmp.mkdir(parents=True)
                torch.save({"adapter": adapter, "head": model.head.state_dict(), "optimizer": opt.state_dict(),
                            "step": step, "losses": losses}, tmp / "state.pt")
                shutil.rmtree(state, ignore_errors=True)
                tmp.rename(state)
    model.backbone.eval()
    seconds = time.time() - t0
    done = step - start_step
    return {"steps": total, "final_loss": float(np.mean(losses[-20:])) if losses else None,
            "samples_per_s": (done * req.micro_batch / seconds) if done and seconds > 0 else None}


# ------------------------------------------------------------------------------------ driver


def _base_model(req: TrainVerifierRequest) -> ResolvedModel:
    return resolve_model(req.model or EMBEDDED_MODEL)


def default_name(family: str, policy: str, method: str) -> str:
    from bonbench.core.config import model_slug

    return f"{family}-{model_slug(policy)}-{method}"


def train_verifier(req: TrainVerifierRequest, progress: Progress | None = None) -> Path:
    """Assemble, check, featurise, fit, save; returns the verifier folder (see the module docstring)."""
    from bonbench.pipeline.stages import _git_sha

    progress = progress or (lambda stage, advance, total: None)
    if req.method not in ("head", "lora"):
        raise BonbenchError(f"unknown --method {req.method!r}; use head (frozen backbone + trained head) or lora")
    flags.check(req, flags.RANGES["train-verifier"])  # the CLI checks the same ranges when parsing; API callers too
    data = assemble(req.run_dirs, data_dir=req.data_dir, family=req.task)
    data, excluded = check_no_eval_problems(data, data_dir=req.data_dir, drop=req.drop_eval_overlap)
    check_class_counts(data.rows, req.min_class)
    base = _base_model(req)
    base_type = vf.model_type(base.path)
    folder = Path(req.out) / vf.VERIFIERS_DIR / (req.name or default_name(data.family, data.policy["name"], req.method))
    settings = {**req.settings(), "base_fingerprint": base.fingerprint, "data_fingerprint": data.fingerprint(),
                "format": vf.FORMAT}
    if req.method == "lora":  # older LoRA folders trained on every problem: their saved state must not resume here
        settings["lora_fit"] = "problems not held out"
    cfg_path = folder / TRAIN_CONFIG
    if cfg_path.exists():
        old = read_json(cfg_path)
        diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
        if diff:
            raise BonbenchError(f"verifier folder {str(folder)!r} was trained with other settings or data ({', '.join(diff)}); "
                                "pass another --name, or the same flags and runs to resume")
    torch.manual_seed(req.seed)
    # loaded before the folder is touched: a damaged --model is an error that leaves a finished verifier whole
    model = vm.VerifierModel(base, method="head", dtype=req.dtype, max_length=req.max_length)
    outputs.ensure_dir(folder)
    atomic_write_json(cfg_path, settings)
    t0 = time.time()
    n_cached = len(FeatureCache(folder / FEATURES).load())
    feats = extract_features(model, data.rows, FeatureCache(folder / FEATURES), req.batch_size, progress)
    feat_seconds = time.time() - t0
    labels = np.array([r.label for r in data.rows])
    held = split_problems(data.rows, req.val_fraction, req.seed)
    groups = [r.problem.id for r in data.rows]
    held_rows = [r for r, h in zip(data.rows, held) if h]
    # held-out report first (a probe fit on the other problems), then the shipped head
    val: dict[str, Any] = {"n_problems": len({r.problem.id for r in held_rows}), "n_samples": len(held_rows)}
    probe: vm.ScalarHead | None = None
    if held.any() and (~held).any():
        probe = vm.ScalarHead(feats.shape[1])
        t1 = time.time()
        probe_fit = fit_head(probe, feats[~held], labels[~held], [g for g, h in zip(groups, held) if not h], req.folds,
                             req.seed)
        probe_seconds = time.time() - t1
        with torch.no_grad():
            val_scores = torch.sigmoid(probe(feats[held])).double().numpy()
        val.update({"auroc": auroc(labels[held], val_scores), "C": probe_fit["C"], "cv_auroc_train_part": probe_fit["cv_auroc"]})
    # LoRA with a held-out part starts from the probe and never sees the held-out problems, so the held-out
    # AUROC reported is its own (the price: it learns from the other 1 - val_fraction of the problems only);
    # otherwise the head is refit on every problem
    lora_from_probe = req.method == "lora" and probe is not None
    if lora_from_probe:
        start_head, fit, head_seconds = probe, probe_fit, probe_seconds
    else:
        t1 = time.time()
        fit = fit_head(model.head, feats, labels, groups, req.folds, req.seed)
        start_head, head_seconds = model.head, time.time() - t1
    training: dict[str, Any] = {"feature_samples_per_s": (len(data.rows) - n_cached) / feat_seconds
                                if len(data.rows) > n_cached and feat_seconds > 0 else None,
                                "head_fit_s": head_seconds, **fit}
    if req.method == "lora":
        lora_model = vm.VerifierModel(base, method="lora", dtype=req.dtype, max_length=req.max_length,
                                      lora={"rank": req.lora_rank, "alpha": req.lora_alpha})
        lora_model.head.load_state_dict(start_head.state_dict())
        fit_rows = [r for r, h in zip(data.rows, held) if not h] if lora_from_probe else list(data.rows)
        training["lora"] = {**_train_lora(lora_model, fit_rows, req, folder, progress), "n_samples": len(fit_rows)}
        if lora_from_probe:
            scores = lora_model.score_texts([vm.verifier_text(r.problem, r.sample.completion) for r in held_rows],
                                            req.batch_size)
            val["head_auroc"] = val["auroc"]  # the starting head's, for comparison
            val["auroc"] = auroc([r.label for r in held_rows], scores)
        model = lora_model
    # a finished verifier stays usable until its weights are about to change: a rerun that fails before
    # this point (damaged training state, full disk) leaves the previous manifest and weights whole
    (folder / vf.MANIFEST).unlink(missing_ok=True)  # unfinished until the manifest is written again
    model.save(folder)
    manifest = {
        "format": vf.FORMAT,
        "bonbench_verifier": 1,
        "method": req.method,
        "task_family": data.family,
        "tasks": list(data.tasks),
        "base": {"name": base.name, "path": base.path, "fingerprint": base.fingerprint, "model_type": base_type,
                 "revision": base.revision},
        "policy": dict(data.policy),
        "data": {"fingerprint": data.fingerprint(), "runs": list(data.runs), "n_samples": len(data.rows),
                 "n_problems": len({r.problem.id for r in data.rows}), "n_correct": int(labels.sum())},
        "eval_excluded": excluded,
        "hyper": {**req.settings(), "feature": "last-token and mean final hidden state", "text": "verifier_text v1"},
        "metrics": {"heldout": val, "train_auroc": auroc(labels, torch.sigmoid(model.head(feats)).detach().double().numpy())
                    if req.method == "head" else None},
        "training": training,
        "git_sha": _git_sha(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "weights_sha256": vf.weights_sha256(folder),
    }
    atomic_write_json(folder / vf.MANIFEST, manifest)
    return folder
