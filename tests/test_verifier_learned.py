"""Learned verifiers (``bonbench train-verifier``, ``--verifier learned:PATH``, ``bonbench eval-verifier``) on a
tiny random Gemma 3 with a character tokenizer (built here) and scripted runs of the real MATH train split
(graded by the real math grader) and of MBPP train / HumanEval (graded by the real sandbox); the eval-id
exclusion on the real MATH / MATH-500 / MBPP / HumanEval ids."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bonbench.apps.cli import main
from bonbench.apps.verifier_training.fit import auroc, check_class_counts, split_problems
from bonbench.apps.verifier_training.request import TrainVerifierRequest
from bonbench.apps.verifier_training.train import train_verifier
from bonbench.apps.verifier_training.training_data import LabelledSample, TrainingData, assemble, check_no_eval_problems
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Sample
from bonbench.plugins.verifiers.manifest import (
    HEAD_FILE,
    MANIFEST,
    VERIFIERS_DIR,
    display_name,
    read_verifier_manifest,
    verifier_text,
    weights_sha256,
)
from bonbench.run.execute import execute
from bonbench.run.plan import plan
from bonbench.run.request import RunRequest
from bonbench.run.resolve import load_task

CHARS = [chr(c) for c in range(32, 127)] + ["\n"]
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIALS + CHARS)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))  # no merges: one char per token
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                                   unk_token="<unk>")


def build_tiny_gemma(folder: Path, seed: int = 0) -> Path:
    """A 2-layer Gemma 3 over printable ASCII characters (random weights)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    cfg = Gemma3TextConfig(vocab_size=len(SPECIALS) + len(CHARS), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=16,
                           layer_types=["sliding_attention", "full_attention"], max_position_embeddings=4096,
                           initializer_range=0.2, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    Gemma3ForCausalLM(cfg).save_pretrained(folder)
    _tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gemma(tmp_path_factory.mktemp("tiny") / "tiny-gemma")


def _completions(problem: Problem, n: int) -> list[str]:
    """Half right (the gold answer boxed, a short sentence), half wrong (a long wrong derivation), so
    that even random features tell them apart on the training problems."""
    out = []
    for i in range(n):
        if i % 2 == 0:
            out.append(f"So the answer is $\\boxed{{{problem.target}}}$.")
        else:
            out.append(f"We compute step by step, {'and then ' * (3 + i)} we get $\\boxed{{{problem.target}9}}$ maybe.")
    return out


def _code_completions(problem: Problem, n: int) -> list[str]:
    """Half the reference solution (MBPP's code, HumanEval's canonical body), half a stub that fails
    the tests: the labels are the sandbox's verdicts."""
    entry = problem.meta["entry_point"]
    out = []
    for i in range(n):
        if "canonical_solution" in problem.meta:  # HumanEval: the body that follows the prompt
            out.append(problem.meta["canonical_solution"] if i % 2 == 0 else "    return None\n")
        else:
            code = problem.meta["code"] if i % 2 == 0 else f"def {entry}(*args):\n    return None"
            out.append(f"```python\n{code}\n```")
    return out


def _scripted_run(out: Path, data_dir: Path, task_args: dict[str, str], name: str, limit: int, n: int = 4,
                  task: str = "math") -> Path:
    from bonbench.run.resolve import load_task

    t = load_task(task, task_args, data_dir=str(data_dir), out=out)
    make = _completions if task.startswith("math") else _code_completions
    rows = []
    for p in t.problems[:limit]:
        for i, c in enumerate(make(p, n)):
            rows.append({"problem_id": p.id, "sample_idx": i, "completion": c})
    path = out.parent / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = execute(plan(RunRequest(task=task, task_args=task_args, samples=path, model=name, metrics=("pass@1",),
                                  data_dir=str(data_dir), out=out, n_boot=50)))
    return res.runs[0].store.root


@pytest.fixture(scope="module")
def train_run(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("runs") / "results"
    return _scripted_run(out, data_dir, {"split": "train", "level": "1"}, "policy", limit=24)


@pytest.fixture(scope="module")
def verifier(tmp_path_factory: pytest.TempPathFactory, tiny: Path, train_run: Path, data_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("vout")
    return train_verifier(TrainVerifierRequest(run_dirs=(train_run,), model=str(tiny), out=out, data_dir=str(data_dir),
                                               name="v", batch_size=8, folds=3, dtype="float32", max_length=256))


def test_train_verifier_end_to_end(verifier: Path, train_run: Path) -> None:
    doc = read_verifier_manifest(verifier)
    assert doc["task_family"] == "math" and doc["method"] == "head"
    assert doc["data"]["n_samples"] == 24 * 4 and doc["data"]["n_correct"] == 24 * 2  # the real grader's labels
    assert doc["data"]["runs"][0]["run_dir"] == str(train_run.resolve())
    assert {s["task"] for s in doc["eval_excluded"]["sets"]} == {"math", "math500"}
    assert doc["weights_sha256"] == weights_sha256(verifier)
    assert doc["base"]["model_type"] == "gemma3_text"
    # the two kinds of completion differ in length and words: the head separates them on its training data
    assert doc["metrics"]["train_auroc"] > 0.9
    assert doc["metrics"]["heldout"]["n_problems"] > 0


def test_save_load_round_trip_identical_scores(verifier: Path, train_run: Path, data_dir: Path) -> None:
    from bonbench.plugins.verifiers.manifest import verifier_text
    from bonbench.plugins.verifiers.model import load_verifier_model
    from bonbench.run.resolve import load_task

    task = load_task("math", {"split": "train", "level": "1"}, data_dir=str(data_dir), out=verifier.parent)
    texts = [verifier_text(p, c) for p in task.problems[:5] for c in _completions(p, 2)]
    a = load_verifier_model(verifier).score_texts(texts, batch_size=3)
    copy = verifier.parent / "copy"
    shutil.copytree(verifier, copy)
    b = load_verifier_model(copy).score_texts(texts, batch_size=7)  # another batching: same scores
    assert np.allclose(a, b, atol=1e-5)
    assert len(set(np.round(a, 6))) > 1


def test_learned_verifier_in_a_run(verifier: Path, data_dir: Path, tmp_path: Path) -> None:
    # a held-out run (MATH-500 problems) scored with --verifier learned:PATH through the CLI
    out = tmp_path / "results"
    run = _scripted_run(out, data_dir, {}, "policy", limit=6, task="math500")
    spec = f"learned:{verifier}"
    assert main(["score", str(run), "--metric", "bon@4", "--verifier", spec, "--n-boot", "50", "--data-dir", str(data_dir)]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["metrics"]["bon@4"]["verifier"] == "learned:v"
    weights = read_verifier_manifest(verifier)["weights_sha256"]
    assert metrics["metrics"]["bon@4"]["verifier_fingerprint"].startswith("w:" + weights[:16])
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["config"]["verifier"] == spec and "learned:v" in cfg["verifiers"]
    rows = [json.loads(line) for line in (run / "scores" / "learned:v.jsonl").read_text().splitlines()]
    assert len(rows) == 6 * 4 and all(0.0 < r["score"] < 1.0 for r in rows)
    # its cost: the tokens the backbone read (one per character here, + <bos>, truncated) and one forward
    problems = {p.id: p for p in load_task("math500", {}, data_dir=str(data_dir), out=out).problems}
    samples = {(r["problem_id"], r["sample_idx"]): r["completion"]
               for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}
    limit = read_verifier_manifest(verifier)["hyper"]["max_length"]
    for r in rows:
        text = verifier_text(problems[r["problem_id"]], samples[r["problem_id"], r["sample_idx"]])
        assert r["calls"] == 1 and r["tokens"] == min(limit, 1 + len(text))


def test_config_records_the_verifier_used(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    run = _scripted_run(out, data_dir, {}, "policy", limit=2, task="math500")
    assert main(["score", str(run), "--metric", "bon@2", "--verifier", "oracle", "--n-boot", "20",
                 "--data-dir", str(data_dir)]) == 0
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["config"]["verifier"] == "oracle" and cfg["verifiers"] == ["oracle"]


def test_default_verifier_is_learned_when_one_exists_for_task_and_model(verifier: Path, train_run: Path) -> None:
    from bonbench.api.metric.grammar import parse_metrics
    from bonbench.run.rules import default_verifier

    specs = parse_metrics(["bon@4"])
    fp = json.loads((train_run / "config.json").read_text())["config"]["model_fingerprint"]
    out = verifier.parent.parent
    assert default_verifier(specs, None, task="math500", model_fingerprint=fp, out=out) == f"learned:{verifier.resolve()}"
    assert default_verifier(specs, None, task="math", model_fingerprint="sha256:other", out=out) == "logprob"
    assert default_verifier(specs, None, task="mbpp", model_fingerprint=fp, out=out) == "logprob"
    assert default_verifier(specs, "oracle", task="math", model_fingerprint=fp, out=out) == "oracle"
    assert default_verifier(parse_metrics(["pass@4"]), None, task="math", model_fingerprint=fp, out=out) is None


def test_eval_verifier_reports_curves_auroc_and_paired_diff(verifier: Path, data_dir: Path, tmp_path: Path) -> None:
    from bonbench.apps.analysis.verifier_eval import evaluate

    out = tmp_path / "results"
    run = _scripted_run(out, data_dir, {}, "policy", limit=8, task="math500")
    res = evaluate([run], [f"learned:{verifier}", "oracle"], data_dir=str(data_dir), n_boot=50)
    assert res.n == 4 and res.n_problems == 8
    assert res.auroc["oracle"] == 1.0
    # oracle bon@k is pass@k exactly
    assert np.allclose(res.curves["bon:oracle"]["value"], res.curves["pass"]["value"])
    diff = res.paired[f"learned:{verifier} - oracle"]
    assert np.allclose(diff["diff"], np.array(res.curves[f"bon:learned:{verifier}"]["value"]) - res.curves["pass"]["value"])


def test_code_verifier_mbpp_train_to_humaneval(tiny: Path, data_dir: Path, tmp_path: Path) -> None:
    # the code family end to end: MBPP train samples labelled by the sandbox, the four MBPP train problems
    # that repeat test problems dropped, then the verifier scores and is evaluated on HumanEval
    from bonbench.apps.analysis.verifier_eval import evaluate

    out = tmp_path / "results"
    train = _scripted_run(out, data_dir, {"split": "train"}, "coder", limit=8, task="mbpp")  # ids 601..608
    folder = train_verifier(TrainVerifierRequest(run_dirs=(train,), model=str(tiny), out=tmp_path, data_dir=str(data_dir),
                                                 batch_size=8, folds=3, dtype="float32", max_length=256,
                                                 drop_eval_overlap=True))
    doc = read_verifier_manifest(folder)
    assert folder.name == "code-coder-head" and doc["task_family"] == "code" and doc["tasks"] == ["mbpp"]
    assert doc["eval_excluded"]["dropped"] == ["mbpp/602"]  # 602 is test problem 217's text
    # the references pass their tests, the stubs fail: 7 problems x 2 of each
    assert doc["data"]["n_samples"] == 7 * 4 and doc["data"]["n_correct"] == 7 * 2
    he = _scripted_run(out, data_dir, {}, "coder", limit=6, task="humaneval")
    res = evaluate([he], [f"learned:{folder}", "oracle"], data_dir=str(data_dir), n_boot=50)
    assert res.n == 4 and res.n_problems == 6
    assert res.curves["pass"]["value"][-1] == 1.0 and res.curves["pass"]["value"][0] == 0.5  # canonical bodies pass
    assert res.auroc["oracle"] == 1.0 and res.auroc[f"learned:{folder}"] is not None
    assert np.allclose(res.curves["bon:oracle"]["value"], res.curves["pass"]["value"])


# ---------------------------------------------------------------------------------------------- bad input


def test_samples_without_grades_refused(train_run: Path, tiny: Path, data_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "results" / train_run.relative_to(train_run.parents[3])  # <out>/runs/<task>/<model>/<hash>
    shutil.copytree(train_run, run)
    shutil.rmtree(run / "grades")
    with pytest.raises(BonbenchError, match="without grades.*bonbench score"):
        train_verifier(TrainVerifierRequest(run_dirs=(run,), model=str(tiny), out=tmp_path, data_dir=str(data_dir)))


def test_eval_ids_in_training_samples_refused_by_cli(data_dir: Path, tmp_path: Path, tiny: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    test_run = _scripted_run(out, data_dir, {}, "policy", limit=3)  # MATH *test* problems
    code = main(["train-verifier", "--samples-from", str(test_run), "--model", str(tiny), "--out", str(tmp_path),
                 "--data-dir", str(data_dir)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert err[0].startswith("error: 3 training problems are evaluation problems of math split=test (same id")
    assert "-T split=train" in err[0] and "--drop-eval-overlap" in err[0]


def test_too_few_of_a_class_refused_before_any_work(train_run: Path, tiny: Path, data_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # train_run has 48 correct and 48 wrong samples on 24 problems; asking for 49 of each must refuse
    # in one line, name the flag that overrides it, and leave no verifier folder behind
    code = main(["train-verifier", "--samples-from", str(train_run), "--model", str(tiny), "--out", str(tmp_path),
                 "--data-dir", str(data_dir), "--min-class", "49"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert err[0].startswith("error: only 48 of 96 training samples are correct (24 problems), fewer than --min-class 49")
    assert err[0].endswith("pass --min-class 48 to fit anyway")
    assert not (tmp_path / VERIFIERS_DIR).exists()


def test_class_count_check_counts_the_rarer_class(data_dir: Path) -> None:
    p = Problem("p0", "What is 1+1?", "2", {})
    mostly_right = tuple(LabelledSample("r", p, Sample("p0", i, "x", 1, "stop"), int(i != 0)) for i in range(12))
    with pytest.raises(BonbenchError, match=r"only 1 of 12 training samples are wrong \(1 problem\).*harder problems, "
                                            r"or pass --min-class 1 to fit anyway"):
        check_class_counts(mostly_right, 2)
    check_class_counts(mostly_right, 1)  # one of each is allowed when asked for
    all_wrong = tuple(LabelledSample("r", p, Sample("p0", i, "x", 1, "stop"), 0) for i in range(5))
    with pytest.raises(BonbenchError, match=r"only 0 of 5 training samples are correct.*easier problems$"):
        check_class_counts(all_wrong, 1)  # none at all: no override offered


def _rows(problems: list[Problem]) -> tuple[LabelledSample, ...]:
    return tuple(LabelledSample("r", p, Sample(p.id, 0, "x", 1, "stop"), 0) for p in problems)


def test_eval_exclusion_by_text_on_real_ids(data_dir: Path) -> None:
    from bonbench.run.resolve import load_task

    train = load_task("math", {"split": "train", "level": "1"}, data_dir=str(data_dir), out=Path("results")).problems
    ok = TrainingData(rows=_rows(list(train)), family="math", tasks=("math",), policy={})
    _, checked = check_no_eval_problems(ok, data_dir=str(data_dir))  # the real level-1 train split is clean
    assert checked["n_train_problems"] == len(train) == 564 and checked["dropped"] == []
    # the one MATH train problem whose text is a MATH test problem's (under another id) is caught by its text
    full = load_task("math", {"split": "train"}, data_dir=str(data_dir), out=Path("results")).problems
    dup = [p for p in full if p.id == "train/geometry/6032.json"]
    with pytest.raises(BonbenchError,
                       match=r"evaluation problems of math split=test \(same problem text, e.g. 'train/geometry/6032.json'"):
        check_no_eval_problems(TrainingData(rows=_rows(list(train[:3]) + dup), family="math", tasks=("math",), policy={}),
                               data_dir=str(data_dir))
    # a MATH-500 problem renamed: still caught by text
    m500 = load_task("math500", {}, data_dir=str(data_dir), out=Path("results")).problems[0]
    renamed = Problem(id="train/renamed/1.json", input="  " + m500.input.upper() + "\n", target=m500.target)
    with pytest.raises(BonbenchError, match="same problem text"):
        check_no_eval_problems(TrainingData(rows=_rows([renamed]), family="math", tasks=("math",), policy={}),
                               data_dir=str(data_dir))


def test_eval_exclusion_code_family_on_real_ids(data_dir: Path) -> None:
    from bonbench.run.resolve import load_task

    train = load_task("mbpp", {"split": "train"}, data_dir=str(data_dir), out=Path("results")).problems
    data = TrainingData(rows=_rows(list(train)), family="code", tasks=("mbpp",), policy={})
    # MBPP's train split repeats four test-split task texts under other ids (602 = 217, 704 = 248, 872 = 216,
    # and 928 = 427 of the sanitized variant): refused, or left out on request
    with pytest.raises(BonbenchError, match=r"3 training problems are evaluation problems of mbpp split=test \(same problem "
                                            r"text, e.g. 'mbpp/602'\).*--drop-eval-overlap"):
        check_no_eval_problems(data, data_dir=str(data_dir))
    kept, checked = check_no_eval_problems(data, data_dir=str(data_dir), drop=True)
    assert checked["dropped"] == ["mbpp/602", "mbpp/704", "mbpp/872", "mbpp/928"]
    assert len(kept.rows) == len(train) - 4 and {s["task"] for s in checked["sets"]} == {"mbpp", "humaneval"}
    humaneval = load_task("humaneval", {}, data_dir=str(data_dir), out=Path("results")).problems
    with pytest.raises(BonbenchError, match="evaluation problems of humaneval \\(same id, e.g. 'HumanEval/0'"):
        check_no_eval_problems(TrainingData(rows=_rows(list(humaneval[:1])), family="code", tasks=("humaneval",), policy={}),
                               data_dir=str(data_dir))


def test_verifier_for_another_model_family_refused(verifier: Path, tiny: Path, data_dir: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other"
    shutil.copytree(verifier, other)
    doc = json.loads((other / MANIFEST).read_text())
    doc["policy"]["model_type"] = "qwen2"  # learned from a Qwen policy's samples
    (other / MANIFEST).write_text(json.dumps(doc))
    code = main(["run", "--task", "math500", "--model", str(tiny), "--backend", "hf", "--metric", "bon@2", "--limit", "1",
                 "--verifier", f"learned:{other}", "--out", str(tmp_path / "r"), "--data-dir", str(data_dir), "--dry-run"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert err[0].startswith("error: verifier 'other' learned from samples of a qwen2 model, not gemma3_text; train one")


def test_verifier_whose_base_model_changed_refused(verifier: Path, tiny: Path, tmp_path: Path) -> None:
    from bonbench.plugins.verifiers.model import load_verifier_model

    other = tmp_path / "moved"
    shutil.copytree(verifier, other)
    doc = json.loads((other / MANIFEST).read_text())
    doc["base"]["fingerprint"] = "sha256:0000000000000000"
    (other / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(BonbenchError, match="retrain it with `bonbench train-verifier`"):
        load_verifier_model(other)


def test_not_a_verifier_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["score", str(tmp_path), "--verifier", f"learned:{tmp_path}"])
    assert code == 1


def test_auroc_matches_brute_force_pair_count() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    s = np.round(rng.normal(size=200) + y, 1)  # rounded: ties count 1/2
    pos, neg = s[y == 1], s[y == 0]
    brute = ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (pos.size * neg.size)
    assert auroc(y.tolist(), s.tolist()) == pytest.approx(brute, abs=1e-12)
    assert auroc([1, 1], [0.1, 0.2]) is None


def test_lora_method_trains_saves_and_resumes(tiny: Path, train_run: Path, data_dir: Path, tmp_path: Path) -> None:
    from bonbench.plugins.verifiers.manifest import verifier_text
    from bonbench.plugins.verifiers.model import load_verifier_model

    req = TrainVerifierRequest(run_dirs=(train_run,), model=str(tiny), out=tmp_path, data_dir=str(data_dir), name="lv",
                               method="lora", batch_size=8, folds=3, dtype="float32", max_length=128, micro_batch=16,
                               save_every=2, lr=1e-3)
    folder = train_verifier(req)
    doc = read_verifier_manifest(folder)
    assert doc["method"] == "lora" and (folder / "adapter" / "adapter_config.json").is_file()
    # the adapters learn from the problems not held out only, so the held-out AUROC is the LoRA verifier's own
    held_problems = doc["metrics"]["heldout"]["n_problems"]
    assert 0 < held_problems < 24 and doc["training"]["lora"]["n_samples"] == 96 - 4 * held_problems
    steps = -(-doc["training"]["lora"]["n_samples"] // 16)
    assert doc["training"]["lora"]["steps"] == steps
    state = torch.load(folder / "training_state" / "state.pt", weights_only=False)
    assert state["step"] == steps and len(state["losses"]) == steps
    rows = assemble([train_run], data_dir=str(data_dir)).rows
    held_rows = [r for r, h in zip(rows, split_problems(rows, req.val_fraction, req.seed), strict=True) if h]
    assert len({r.problem.id for r in held_rows}) == held_problems
    scores = load_verifier_model(folder).score_texts([verifier_text(r.problem, r.sample.completion) for r in held_rows])
    assert doc["metrics"]["heldout"]["auroc"] == pytest.approx(auroc([r.label for r in held_rows], scores), abs=1e-6)
    assert "head_auroc" in doc["metrics"]["heldout"]
    # a rerun with the same settings resumes at the saved step: no step is redone, the weights are the same
    again = train_verifier(req)
    assert read_verifier_manifest(again)["weights_sha256"] == doc["weights_sha256"]
    # the adapters are part of the weights hash and of the loaded model
    text = [verifier_text(train_run_problem(data_dir), "So the answer is $\\boxed{1}$.")]
    loaded = load_verifier_model(folder).score_texts(text)
    assert 0.0 < loaded[0] < 1.0
    # a damaged saved training state: one line naming what to delete; the finished verifier stays as it was
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and "training_state" not in p.parts}
    state_file = folder / "training_state" / "state.pt"
    state_file.write_bytes(state_file.read_bytes()[:100])
    with pytest.raises(BonbenchError, match=r"training state .*state.pt is damaged .*delete .*training_state and rerun"):
        train_verifier(req)
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and "training_state" not in p.parts} == before
    # other settings under the same name: refused, naming the fix
    with pytest.raises(BonbenchError, match="trained with other settings or data \\(lr\\)"):
        train_verifier(TrainVerifierRequest(**{**req.__dict__, "lr": 1e-2}))


def train_run_problem(data_dir: Path) -> Problem:
    from bonbench.run.resolve import load_task

    return load_task("math", {"split": "train", "level": "1"}, data_dir=str(data_dir), out=Path("results")).problems[0]


def test_killed_feature_extraction_resumes(tiny: Path, train_run: Path, data_dir: Path, tmp_path: Path) -> None:
    from bonbench.apps.verifier_training.features import FeatureCache

    req = TrainVerifierRequest(run_dirs=(train_run,), model=str(tiny), out=tmp_path, data_dir=str(data_dir), name="r",
                               batch_size=8, folds=3, dtype="float32", max_length=256)
    from safetensors.torch import load_file

    full = train_verifier(req)
    before = load_file(str(full / HEAD_FILE))
    # as if killed after 40 rows' features were saved: no manifest, a partial feature cache
    (full / MANIFEST).unlink()
    with pytest.raises(BonbenchError, match="training has not finished; rerun the same"):
        read_verifier_manifest(full)
    cache = FeatureCache(full / "features")
    have = cache.load()
    keys = sorted(have)[:40]
    shutil.rmtree(full / "features")
    cache.append(keys, torch.stack([have[k] for k in keys]))
    seen: list[int] = []
    again = train_verifier(req, progress=lambda stage, advance, total: seen.append(total) if stage == "features" else None)
    assert set(seen) == {96 - 40}  # only the missing rows were computed
    after = load_file(str(again / HEAD_FILE))
    # the same head up to float noise (the resumed rows were batched with other rows, so padded differently)
    for name, value in before.items():
        assert torch.allclose(value, after[name], rtol=1e-3, atol=1e-4), name
    assert read_verifier_manifest(again)["weights_sha256"] == weights_sha256(again)


def test_verifier_figure_has_short_distinct_legends_and_a_fitted_axis(tmp_path: Path) -> None:
    """Small bon@k values (a weak policy) stay readable: the y axis fits the bands, every curve has
    its own colour, and a learned verifier is named by its folder, not its path."""
    from bonbench.apps.analysis import plots
    from bonbench.apps.analysis.plotkit import save_figure as real_save
    from bonbench.apps.analysis.rundir import Curve
    assert display_name("learned:/a/b/verifiers/math-gemma-3-270m-head/") == "learned:math-gemma-3-270m-head"
    assert display_name("logprob") == "logprob"
    k = np.arange(1, 17, dtype=float)
    small = {name: Curve(k, 0.01 * np.log1p(k) * (i + 1), 0.005 * np.ones_like(k), 0.05 * np.log1p(k) * (i + 1) / 3)
             for i, name in enumerate(["pass", "maj", "bon learned:x", "bon logprob", "bon oracle"])}
    seen: dict[str, Any] = {}

    def keep(fig, out):
        seen["ax"] = fig.axes[0]
        return real_save(fig, out)

    plots.save_figure = keep  # patched where plot_k_curves looks it up
    try:
        plots.plot_k_curves(small, tmp_path / "c.png", ylim=None)
    finally:
        plots.save_figure = real_save
    ax = seen["ax"]
    top = max(float(c.hi.max()) for c in small.values())
    assert top < ax.get_ylim()[1] < 0.5
    colours = [line.get_color() for line in ax.get_lines()]
    assert len(set(colours)) == len(colours) == 5


# ------------------------------------------------------------------------------------ bad input (issue 24)


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_truncated_base_model_is_one_line_and_a_finished_verifier_stays(verifier: Path, tiny: Path, train_run: Path,
                                                                         data_dir: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut-gemma"
    shutil.copytree(tiny, cut)
    weights = cut / "model.safetensors"
    weights.write_bytes(tiny.joinpath("model.safetensors").read_bytes()[:-1000])  # a download cut short
    # a finished verifier of the same name must survive the failed retraining byte for byte
    out = verifier.parent
    before = {p: p.read_bytes() for p in verifier.rglob("*") if p.is_file()}
    code = main(["train-verifier", "--samples-from", str(train_run), "--model", str(cut), "--out", str(out),
                 "--name", verifier.name + "-cut", "--data-dir", str(data_dir), "--dtype", "float32", "--folds", "3"])
    line = _one_error_line(capsys.readouterr().err)
    assert code == 1 and str(weights.parent) in line and "damaged or cut short" in line
    assert not (out / VERIFIERS_DIR / (verifier.name + "-cut")).exists()  # nothing was started
    assert {p: p.read_bytes() for p in verifier.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("flag, value, message", [("--folds", "0", "--folds must be >= 2 (got 0)"),
                                                  ("--folds", "1", "--folds must be >= 2 (got 1)"),
                                                  ("--min-class", "-1", "--min-class must be >= 1 (got -1)"),
                                                  ("--val-fraction", "1", "--val-fraction must be in [0, 1) (got 1)"),
                                                  ("--batch-size", "0", "--batch-size must be >= 1 (got 0)"),
                                                  ("--lr", "0", "--lr must be > 0 (got 0)")])
def test_meaningless_train_verifier_numbers_refused_before_any_work(flag: str, value: str, message: str, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # the run directory does not even exist: the flags are checked first
    code = main(["train-verifier", "--samples-from", str(tmp_path / "no-run"), "--out", str(tmp_path), flag, value])
    assert code == 1 and _one_error_line(capsys.readouterr().err) == f"error: {message}"
    assert list(tmp_path.iterdir()) == []


def test_damaged_feature_cache_is_one_line(tmp_path: Path) -> None:
    from bonbench.apps.verifier_training.features import FeatureCache

    cache = FeatureCache(tmp_path / "features")
    cache.append([("r", "p", 0)], torch.zeros(1, 4))
    part = next((tmp_path / "features").glob("part-*.pt"))
    part.write_bytes(part.read_bytes()[:50])
    with pytest.raises(BonbenchError, match=r"part-00000.pt are damaged .*delete that file and rerun"):
        cache.load()


def test_head_fit_with_the_head_on_another_device_than_the_features() -> None:
    """`train-verifier` on a GPU: the head sits on the GPU, the features come back on the host, where
    scikit-learn fits. Before the fix `feats - head.mu` mixed the two devices and raised. The meta device
    stands in for the GPU here (the same device check fires); the fit must equal the all-CPU one."""
    from bonbench.apps.verifier_training.fit import fit_head
    from bonbench.plugins.verifiers.model import ScalarHead

    feats = torch.randn(40, 4, generator=torch.Generator().manual_seed(0)) * 3 + 1
    labels = (np.arange(40) % 3 == 0).astype(int)
    groups = [str(i // 4) for i in range(40)]
    on_cpu, elsewhere = ScalarHead(4), ScalarHead(4).to("meta")
    assert fit_head(elsewhere, feats, labels, groups, folds=3, seed=0) == fit_head(on_cpu, feats, labels, groups, folds=3, seed=0)
    assert torch.allclose(on_cpu.mu, feats.mean(0)) and torch.allclose(on_cpu.sigma, feats.std(0))
