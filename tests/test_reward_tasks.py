"""The imdb and tldr tasks on the real data: deterministic prompts, reward-judged runs end to end
from sample files (the offline reward models), and the --reward-model flag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bonbench.api.task import get_task
from bonbench.apps.cli import main


@pytest.fixture(scope="module")
def imdb(data_dir: Path) -> Any:
    return get_task("imdb", data_dir=str(data_dir))


def test_imdb_prompts_are_deterministic_openings(data_dir: Path, imdb: Any) -> None:
    assert len(imdb.problems) == 512 and imdb.judged_by == "reward" and imdb.default_metrics == ("mean",)
    assert all(2 <= len(p.input.split()) <= 8 for p in imdb.problems)
    assert all(p.meta["words"] == len(p.input.split()) and "<br" not in p.input for p in imdb.problems)
    assert len({p.meta["words"] for p in imdb.problems}) == 7  # every length 2..8 occurs
    again = get_task("imdb", data_dir=str(data_dir))
    assert again.problems == imdb.problems
    fewer = get_task("imdb", data_dir=str(data_dir), n_prompts=10)
    assert fewer.problems == imdb.problems[:10]  # n_prompts only selects; each prompt is fixed by (seed, id)
    other = get_task("imdb", data_dir=str(data_dir), seed=1, n_prompts=10)
    assert [p.id for p in other.problems] != [p.id for p in fewer.problems]
    train = get_task("imdb", data_dir=str(data_dir), split="train")
    assert len(train.problems) == 5000 and all(p.id.startswith("imdb/train/") for p in train.problems)
    assert imdb.render(imdb.problems[0], "base").text == imdb.problems[0].input


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_imdb_rewards_positive_continuations_higher(tmp_path: Path, data_dir: Path, imdb: Any,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    problems = imdb.problems[:6]
    good = " is a wonderful, moving film with brilliant acting. I loved every minute and highly recommend it."
    bad = " is a boring, awful mess with terrible acting. I hated every minute and want my money back."
    rows = [{"problem_id": p.id, "sample_idx": i, "completion": text}
            for p in problems for i, text in enumerate([good, bad, good, bad])]
    code = main(["score", "--task", "imdb", "--samples", str(_write(tmp_path / "s.jsonl", rows)), "--data-dir", str(data_dir),
                 "--metric", "mean,max@2", "--out", str(tmp_path / "results")])
    out = capsys.readouterr()
    assert code == 0, out.err
    run_dir = Path(out.out.strip().splitlines()[-1])
    doc = json.loads((run_dir / "metrics.json").read_text())
    grades = [json.loads(line) for line in next((run_dir / "grades").glob("*.jsonl")).read_text().splitlines()]
    by_idx = {i: [g["score"] for g in grades if g["sample_idx"] == i] for i in range(4)}
    assert all(g["correct"] is None and 0.0 <= g["score"] <= 1.0 for g in grades)
    assert min(by_idx[0]) > 0.9 and max(by_idx[1]) < 0.1
    assert doc["metrics"]["mean"]["value"] == pytest.approx(sum(g["score"] for g in grades) / len(grades))
    assert doc["metrics"]["max@2"]["value"] > doc["metrics"]["mean"]["value"]
    assert doc["grading"]["grade_args"]["reward_model"] == "imdb-sentiment"
    # beside max@2, the KL of reward-best-of-2 selection (to the run's own policy: no --ref-model)
    from bonbench.metrics.winrate import bon_kl, bon_kl_bound
    from bonbench.pipeline import compare
    from bonbench.pipeline import stages as pipeline
    from bonbench.run.reopen import reopen

    per = {p.id: bon_kl([g["score"] for g in sorted(grades, key=lambda g: g["sample_idx"]) if g["problem_id"] == p.id], 2)
           for p in problems}
    kl2 = doc["metrics"]["kl_bon@2"]
    assert kl2["value"] == pytest.approx(sum(per.values()) / len(per))
    # the run's own policy; an imported file that names no sampling settings says so (issue 24)
    assert kl2["reference"] == f"{doc['model']} (sampling settings unknown)"
    assert kl2["analytic"] == pytest.approx(bon_kl_bound(2)) and 0 < kl2["value"] <= bon_kl_bound(2)
    assert doc["per_problem"]["kl_bon@2"] == pytest.approx(per)
    # with per-sample log-ratios to a reference policy, the selection-weighted mean is added
    run = reopen(run_dir, data_dir=str(data_dir)).runs[0]
    graded = pipeline.grade(run, pipeline.load_samples(run))
    shifted = compare.bon_kls(run, graded, [2], {key: 0.25 for key in graded}, "ref", n_boot=10)
    assert shifted.metrics["kl_bon@2"]["value"] == pytest.approx(kl2["value"] + 0.25)
    # pass@k is refused on a reward-judged task, in one line
    code = main(["score", "--task", "imdb", "--samples", str(tmp_path / "s.jsonl"), "--data-dir", str(data_dir),
                 "--metric", "pass@2", "--out", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 1 and "judged by a reward model" in err and "max@k" in err and len(err.strip().splitlines()) == 1


def test_tldr_references_beat_degenerate_samples(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = get_task("tldr", data_dir=str(data_dir))
    assert len(task.problems) == 1945 and task.problems[0].input.endswith("TL;DR:")
    assert task.render(task.problems[0], "base").stop == ("\n",)
    problems = task.problems[:20]
    rows = []
    for p in problems:
        rows.append({"problem_id": p.id, "sample_idx": 0, "completion": " " + p.target})
        rows.append({"problem_id": p.id, "sample_idx": 1, "completion": ""})
        rows.append({"problem_id": p.id, "sample_idx": 2, "completion": " " + p.input})
    for spec in ("tldr-proxy-eval", "tldr-proxy-train"):
        code = main(["score", "--task", "tldr", "--samples", str(_write(tmp_path / "t.jsonl", rows)), "--reward-model", spec,
                     "--data-dir", str(data_dir), "--metric", "mean", "--out", str(tmp_path / "results")])
        out = capsys.readouterr()
        assert code == 0, out.err
        run_dir = Path(out.out.strip().splitlines()[-1])
        grades = {(g["problem_id"], g["sample_idx"]): g["score"] for g in
                  map(json.loads, next((run_dir / "grades").glob(f"*{spec}*.jsonl")).read_text().splitlines())}
        wins = sum(grades[(p.id, 0)] > max(grades[(p.id, 1)], grades[(p.id, 2)]) for p in problems)
        assert wins >= 18, (spec, wins)


def test_reward_model_flag_only_for_reward_tasks(tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--task", "math500", "--reward-model", "imdb-sentiment", "--data-dir", str(data_dir),
                 "--dry-run", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and "not judged by a reward model" in err and "--verifier rm:" in err
    code = main(["run", "--task", "imdb", "--reward-model", "no-such-rm", "--data-dir", str(data_dir), "--dry-run",
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and "no-such-rm" in err


def test_winrate_against_references_and_a_reference_run(tmp_path: Path, data_dir: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from bonbench.metrics.winrate import winrate_curve

    task = get_task("tldr", data_dir=str(data_dir))
    problems = task.problems[:8]
    # samples: the reference itself (ties: 1/2), the post copied (loses), the title (loses)
    rows = [{"problem_id": p.id, "sample_idx": i, "completion": text}
            for p in problems for i, text in enumerate([" " + p.target, " " + p.input, " " + p.meta["title"]])]
    path = _write(tmp_path / "t.jsonl", rows)
    base = ["--task", "tldr", "--data-dir", str(data_dir), "--out", str(tmp_path / "results")]
    assert main(["score", "--samples", str(path), "--metric", "mean,winrate,winrate@3", *base]) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    doc = json.loads((run_dir / "metrics.json").read_text())
    grades = {(g["problem_id"], g["sample_idx"]): g["score"] for g in
              map(json.loads, next((run_dir / "grades").glob("reward-*[!s].jsonl")).read_text().splitlines())}
    refs = {g["problem_id"]: g["score"] for g in
            map(json.loads, next((run_dir / "grades").glob("*.references.jsonl")).read_text().splitlines())}
    assert all(refs[p.id] == pytest.approx(grades[(p.id, 0)]) for p in problems)  # the reference scored as a sample
    expected = winrate_curve([[grades[(p.id, i)] for i in range(3)] for p in problems], [[refs[p.id]] for p in problems])
    assert doc["metrics"]["winrate"]["value"] == pytest.approx(expected[:, 0].mean())
    assert doc["metrics"]["winrate@3"]["value"] == pytest.approx(expected[:, 2].mean())
    assert doc["metrics"]["winrate"]["against"] == "reference answers"
    # against a reference run: a run against itself wins exactly half the time at k = 1
    assert main(["score", str(run_dir), "--metric", "winrate", "--ref-run", str(run_dir), "--data-dir", str(data_dir)]) == 0
    capsys.readouterr()
    doc = json.loads((run_dir / "metrics.json").read_text())
    assert doc["metrics"]["winrate"]["value"] == pytest.approx(0.5) and doc["metrics"]["winrate"]["against"].startswith("run ")
    # a task without rewards or references: one line
    assert main(["run", "--task", "math500", "--metric", "winrate", "--data-dir", str(data_dir), "--dry-run",
                 "--out", str(tmp_path)]) == 1
    assert "not judged by a reward model" in capsys.readouterr().err
    assert main(["run", "--task", "imdb", "--metric", "winrate", "--data-dir", str(data_dir), "--dry-run",
                 "--out", str(tmp_path)]) == 1
    assert "no reference answers to win against; give --ref-run" in capsys.readouterr().err
