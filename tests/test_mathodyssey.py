"""mathodyssey: loading the real 387 problems, answer cleaning on real debris, abstention, filters,
gold self-agreement through the MATH grader, hub-schema flattening, the level and subject breakdowns."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Sample
from bonbench.plugins.graders.math import MathGrader
from bonbench_tasks import mathodyssey as mo

# (raw answer exactly as in mathodyssey/test.jsonl, cleaned answer)
CLEAN_CASES = [
    ("16\\\\\n\\noindent", "16"),                                            # Problem_1
    ("52000 \\\\\n\\noindent", "52000"),                                     # Problem_30
    ("$127$\\\\\n\\noindent", "127"),                                        # Problem_25
    ("$4$ \\\\\n\\noindent", "4"),                                           # Problem_47
    ("100!\\\\\n\\noindent", "100!"),                                        # Problem_7
    ("1,9\\\\\n\\noindent", "1,9"),                                          # Problem_15
    ("$\\frac{\\sqrt{2}}{2}$ \\\\\n\\noindent", "\\frac{\\sqrt{2}}{2}"),     # Problem_59
    ("$(0,\\frac{1}{2}) \\cup (2,+\\infty)$ \\\\\n\\noindent", "(0,\\frac{1}{2}) \\cup (2,+\\infty)"),  # Problem_66
    ("$\\frac{4}{29} \\sqrt{29}$\n\\\\\n\\noindent", "\\frac{4}{29} \\sqrt{29}"),  # Problem_92
    ("\\frac{\\sqrt{30}}{12} $.\n\n\\noindent", "\\frac{\\sqrt{30}}{12}"),  # Problem_104: unmatched $
    ("$\\frac{40}{243}$.\\\\\n\\noindent", "\\frac{40}{243}"),               # Problem_127
    ("C\n\n\\noindent", "C"),                                                # Problem_151
    ("$A$\\\\\n\\noindent", "A"),                                            # Problem_152
    ("B.\n\n\\noindent", "B"),                                               # Problem_233
    ("B, F\\\\\n\\noindent", "B, F"),                                        # Problem_200
    ("4ft \\\\\n\\noindent", "4"),                                           # Problem_180: unit
    ("5 Robins. \\\\\n\\noindent", "5"),                                     # Problem_183: unit + period
    ("a. 3, b. 4 \\\\\n\\noindent", "(3, 4)"),                               # Problem_212: part labels
    ("\\$ 9681.72 \\\\\n\\noindent", "9681.72"),                             # Problem_213: currency
    ("13.45 years\\\\\n\\noindent", "13.45"),                                # Problem_214
    ("$y = ce^{-\\frac{1}{x}}+1$.\\\\\n\\noindent", "y = ce^{-\\frac{1}{x}}+1"),  # Problem_287
    ("10. \\\\\n\\noindent", "10"),                                          # Problem_288
    ("[1,2,3]. \\\\\n\\noindent", "[1,2,3]"),                                # Problem_290
    ("[3, 1, 1; 1, 3, 1; 1, 1, 3] \n\n\\\\\n\\noindent", "[3, 1, 1; 1, 3, 1; 1, 1, 3]"),  # Problem_291
    ("13.5\\\\\n\n\\noindent", "13.5"),                                      # Problem_292
    ("$2\n$ \\\\\n\\noindent", "2"),                                         # Problem_295: newline inside $
    ("$-1.$ \\\\\n\\noindent", "-1"),                                        # Problem_300: period inside $
    ("$x^4-10x^2+1.$ \\\\\n\\noindent", "x^4-10x^2+1"),                      # Problem_311
    ("1.25 \\\\ \n\n\\noindent", "1.25"),                                    # Problem_319
    ("$\\alpha=1$ and $\\beta=4$. \\\\\n\\noindent", "\\alpha=1, \\beta=4"),  # Problem_328: several values
    ("$\\frac{\\sqrt{2}\\pi}{4}$ or $\\frac{\\pi}{2\\sqrt{2}}$. \\\\\n\\noindent", "\\frac{\\sqrt{2}\\pi}{4}"),  # Problem_333
    ("2e \\\\\n\n\\noindent", "2e"),                                         # Problem_337: e is not a unit
    ("No \\\\ \n\n\n\\noindent", "No"),                                      # Problem_342
    ("[4.8, 2.28] \\\\\n\t\\noindent", "[4.8, 2.28]"),                       # Problem_371: tab
    ("No \\\\\n\n  \n\t\\noindent", "No"),                                   # Problem_372
    ("$(106.44, 109.12)$. \\\\\n\t\\noindent", "(106.44, 109.12)"),          # Problem_376
    ("$2\\theta^2/n$. \\\\\n\\noindent", "2\\theta^2/n"),                    # Problem_382
    # rules the data set does not exercise today but the hub copy or a fix might
    ("Answer: $\\text{12 cm}$", "12"),
    ("\\[ x=3 \\quad \\]", "x=3"),
    ("$\\frac{1}{2}$ \\\\", "\\frac{1}{2}"),
    ("3 pi", "3 pi"),
    ("$\\$12$, $\\$15$", "12, 15"),
]


@pytest.mark.parametrize("raw,expected", CLEAN_CASES)
def test_clean_answer_rules(raw: str, expected: str) -> None:
    assert mo.clean_answer(raw) == expected
    assert mo.clean_answer(expected) == expected, "cleaning must be idempotent"


def test_clean_question_strips_environment_debris() -> None:
    raw = "What is $1+1$?\n\t\n\\end{problem}\n\\noindent"
    assert mo.clean_question(raw) == "What is $1+1$?"


@pytest.mark.parametrize("gold,reason", [
    ("\\\\\n\\noindent", "empty"),
    ("Suppose not. Then there is a smallest counterexample, which contradicts minimality.", "prose"),
    ("The sequence converges because it is monotone and bounded", "prose"),
    ("\\frac{1}{", "unparsable|not self-equivalent"),
])
def test_abstention_reasons(gold: str, reason: str) -> None:
    assert mo.abstention_reason(gold) in reason.split("|")
    assert mo.abstains(gold)


@pytest.mark.parametrize("gold", ["Yes", "No.", "[3, 1, 1; 1, 3, 1; 1, 1, 3]", "$y = ce^{-\\frac{1}{x}}+1$.",
                                  "$\\alpha=1$ and $\\beta=4$.", "B, F", "5 Robins.", "(106.44, 109.12)"])
def test_hard_but_checkable_answers_are_not_abstained(gold: str) -> None:
    assert mo.abstention_reason(gold) is None


def test_loads_all_387_problems(data_dir: Path) -> None:
    task = mo.mathodyssey_task(data_dir=data_dir, include_abstained=True)
    assert len(task.problems) == mo.N_PROBLEMS
    assert [p.id for p in task.problems] == [f"Problem_{i}" for i in range(1, 388)]
    levels = Counter(p.meta["level"] for p in task.problems)
    assert levels == {"high school competition": 148, "high school math": 138, "college math": 101}
    assert all("\\end{problem}" not in p.input and not p.input.endswith("\\noindent") for p in task.problems)
    assert all("\\noindent" not in p.target and "$" not in p.target.replace("\\$", "") for p in task.problems)
    assert task.fingerprint.startswith("sha256:")


def test_abstention_report_on_real_data(data_dir: Path) -> None:
    rows, _ = mo.load_rows(data_dir)
    abstained = {r["problem_id"]: mo.abstention_reason(r["answer"]) for r in rows if mo.abstains(r["answer"])}
    print(f"\nmathodyssey abstained gold answers: {len(abstained)} {abstained}")
    task = mo.mathodyssey_task(data_dir=data_dir)
    assert len(task.problems) == mo.N_PROBLEMS - len(abstained)
    assert not set(abstained) & {p.id for p in task.problems}
    report = task.extra_metrics({})["gold_abstained"]
    assert report["value"] == len(abstained)
    assert report["problem_ids"] == sorted(abstained, key=lambda pid: int(pid.split("_")[1]))
    assert f"{len(abstained)} of {mo.N_PROBLEMS}" in task.description
    # honest abstention: every real answer is a short final answer the grader can compare
    assert len(abstained) <= 2, abstained


def _mirror(tmp_path: Path, rows: list[dict]) -> Path:
    (tmp_path / "mathodyssey").mkdir()
    with open(tmp_path / "mathodyssey" / "test.jsonl", "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return tmp_path


def test_include_abstained_and_report_with_a_proof_answer(tmp_path: Path) -> None:
    base = {"reasoning": "", "label": "Algebra", "level": "high school math"}
    rows = [
        {"problem_id": "Problem_1", "question": "1+1?\n\\end{problem}\n\\noindent", "answer": "2\\\\\n\\noindent", **base},
        {"problem_id": "Problem_2", "question": "Prove it.", "answer": "By induction on n, the claim holds for every n.", **base},
    ]
    root = _mirror(tmp_path, rows)
    task = mo.mathodyssey_task(data_dir=root)
    assert [p.id for p in task.problems] == ["Problem_1"]
    assert task.problems[0].target == "2" and task.problems[0].input == "1+1?"
    report = task.extra_metrics({"Problem_1": []})["gold_abstained"]
    assert report["value"] == 1 and report["problem_ids"] == ["Problem_2"] and report["n_problems"] == 2
    assert "Problem_2" in task.description
    kept = mo.mathodyssey_task(data_dir=root, include_abstained=True)
    assert [p.id for p in kept.problems] == ["Problem_1", "Problem_2"]
    assert kept.problems[1].meta["abstained"] is True and kept.problems[1].meta["abstention_reason"] == "prose"


@pytest.mark.parametrize("level,count", [
    ("high school competition", 148), ("hs-competition", 148), ("high school math", 138), ("hs-math", 138),
    ("high school mathematics questions", 138), ("High-School-Mathematics", 138), ("university", 101),
    ("college math", 101), ("university-level", 101), ("hs-math,university", 239),
])
def test_level_filter_and_aliases(data_dir: Path, level: str, count: int) -> None:
    task = mo.mathodyssey_task(data_dir=data_dir, level=level, include_abstained=True)
    assert len(task.problems) == count


@pytest.mark.parametrize("subject,count", [
    ("Algebra", 151), ("algebra", 151), ("numbertheory", 4), ("Number Theory", 4), ("calculus", 5),
    ("calculus and analysis", 24), ("PRECALCULUS", 47), ("statistics,probability", 38),
])
def test_subject_filter_is_case_and_space_insensitive(data_dir: Path, subject: str, count: int) -> None:
    task = mo.mathodyssey_task(data_dir=data_dir, subject=subject, include_abstained=True)
    assert len(task.problems) == count
    assert len({p.meta["subject"] for p in task.problems}) == len(subject.split(","))


def test_filters_combine_and_reject_unknown_values(data_dir: Path) -> None:
    task = mo.mathodyssey_task(data_dir=data_dir, level="hs-competition", subject="geometry", include_abstained=True)
    assert len(task.problems) == 25
    with pytest.raises(BonbenchError, match="unknown -T level"):
        mo.mathodyssey_task(data_dir=data_dir, level="kindergarten")
    with pytest.raises(BonbenchError, match="unknown -T subject"):
        mo.mathodyssey_task(data_dir=data_dir, subject="topology")


def test_gold_self_agreement_through_the_math_grader(data_dir: Path) -> None:
    """Every kept gold answer, boxed as a completion, grades correct against itself (>= 99.5%)."""
    task = mo.mathodyssey_task(data_dir=data_dir)
    problems = {p.id: p for p in task.problems}
    samples = [Sample(p.id, 0, f"So the final answer is $\\boxed{{{p.target}}}$.", 10, "stop") for p in task.problems]
    grades = MathGrader(workers=1).grade(problems, samples)
    failed = [(g.problem_id, problems[g.problem_id].target, g.answer, g.error) for g in grades if not g.correct]
    print(f"\nmathodyssey gold self-agreement: {len(grades) - len(failed)}/{len(grades)}; failures: {failed}")
    assert (len(grades) - len(failed)) / len(grades) >= 0.995


def test_grader_accepts_equivalent_forms_of_cleaned_gold(data_dir: Path) -> None:
    task = mo.mathodyssey_task(data_dir=data_dir)
    problems = {p.id: p for p in task.problems}
    cases = {"Problem_213": "9681.72", "Problem_180": "4 ft", "Problem_333": "\\frac{\\pi}{2\\sqrt{2}}",
             "Problem_339": "no", "Problem_152": "A", "Problem_328": "\\alpha = 1, \\beta = 4",
             "Problem_104": "\\frac{\\sqrt{30}}{12}", "Problem_291": "[3,1,1;1,3,1;1,1,3]"}
    # swapped labelled values are wrong: the grader matches named values by name (grader version 2)
    wrong = {"Problem_213": "9681.73", "Problem_339": "yes", "Problem_152": "B", "Problem_291": "[3,1,1;1,3,1;1,1,4]",
             "Problem_328": "\\alpha = 4, \\beta = 1"}
    samples = [Sample(pid, 0, f"\\boxed{{{ans}}}", 5, "stop") for pid, ans in cases.items()]
    samples += [Sample(pid, 1, f"\\boxed{{{ans}}}", 5, "stop") for pid, ans in wrong.items()]
    grades = {g.key: g for g in MathGrader(workers=1).grade(problems, samples)}
    assert all(grades[(pid, 0)].correct for pid in cases), [(k, g.answer) for k, g in grades.items()
                                                            if k[1] == 0 and not g.correct]
    assert not any(grades[(pid, 1)].correct for pid in wrong)


def test_flatten_accepts_wrapped_and_hub_shaped_rows() -> None:
    fields = {"question": "q", "answer": "1\\\\\n\\noindent", "reasoning": "r", "label": "Algebra", "level": "college math"}
    assert mo._flatten({"Problem_7": fields}, 0)["problem_id"] == "Problem_7"
    hub_row = {"Problem_6": None, "Problem_7": fields, "Problem_8": None}
    assert mo._flatten(hub_row, 6) == {"problem_id": "Problem_7", **fields}
    assert mo._flatten(fields, 4)["problem_id"] == "Problem_5"
    with pytest.raises(BonbenchError, match="schema changed"):
        mo._flatten({"foo": 1}, 0)


def test_renders_with_the_math_task_prompts(data_dir: Path) -> None:
    task = mo.mathodyssey_task(data_dir=data_dir)
    p = task.problems[0]
    base = task.render(p, "base")
    chat = task.render(p, "chat")
    assert base.text is not None and p.input in base.text and base.stop
    assert chat.messages is not None and any(p.input in m["content"] for m in chat.messages)
    assert task.grader.name == "math"


def test_grades_are_passed_through_unchanged_for_metrics(data_dir: Path) -> None:
    task = mo.mathodyssey_task(data_dir=data_dir)
    g = Grade("Problem_1", 0, "math", 1, True, answer="16")
    out = task.extra_metrics({"Problem_1": [g]})
    assert set(out) == {"gold_abstained"}


def test_registered_and_t_args_coerce(data_dir: Path) -> None:
    from bonbench.api.task import get_task, task_names

    assert "mathodyssey" in task_names()
    t = get_task("mathodyssey", data_dir=str(data_dir), level="university", subject="Statistics", include_abstained="true")
    assert len(t.problems) == 17 and t.extra_metrics({})["gold_abstained"]["excluded"] is False


def test_hub_path_maps_wrapped_rows(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    """Without a data dir the loader asks the hub; rows in the upstream one-key form (as the hub
    loads them: every row carries all Problem_N columns, None except its own) are flattened."""
    upstream = [json.loads(line) for line in open(data_dir / "mathodyssey" / "final-odyssey-math-with-levels.jsonl")]
    keys = [next(iter(r)) for r in upstream]
    hub_rows = [{k: (r[k] if k in r else None) for k in keys} for r in upstream[:5]]
    calls = []

    def fake_hub(hub_id: str, split: str, config: str | None = None):
        calls.append((hub_id, split))
        return hub_rows, "hub:fake"

    monkeypatch.delenv("BONBENCH_DATA_DIR", raising=False)
    monkeypatch.setattr(mo, "load_hub", fake_hub)
    task = mo.mathodyssey_task(data_dir=None)
    assert calls == [(mo.HUB_ID, "test")]
    assert [p.id for p in task.problems] == ["Problem_1", "Problem_2", "Problem_3", "Problem_4", "Problem_5"]
    assert task.problems[0].target == "16" and task.fingerprint == "hub:fake"


# ----------------------------------------------------------------------------------------------
# breakdowns: level and subject, scored by the pipeline


def test_task_declares_level_and_subject_breakdowns(data_dir: Path) -> None:
    task = mo.mathodyssey_task(data_dir=data_dir)
    assert dict(task.breakdowns) == {"level": mo.level_of, "subject": mo.subject_of}
    assert Counter(mo.level_of(p) for p in task.problems) == {
        "high school competition": 148, "high school math": 138, "college math": 101}
    subjects = Counter(mo.subject_of(p) for p in task.problems)
    assert len(subjects) == 13 and subjects["Algebra"] == 151 and subjects["Series"] == 1
    only = mo.mathodyssey_task(data_dir=data_dir, level="university")
    assert {mo.level_of(p) for p in only.problems} == {"college math"}


def test_pipeline_scores_levels_and_subjects_with_the_shared_estimators(data_dir: Path, tmp_path: Path) -> None:
    """Every level and subject gets pass@k / maj@k equal to the shared estimators on that group's
    problems alone with the run's seed and n_boot; the groups' pass@1 recombine into the dataset's;
    gold_abstained stays a report."""
    import hashlib

    from bonbench.api.metric.grammar import parse_metrics
    from bonbench.api.metric.values import compute_metrics
    from bonbench.core.config import RunConfig
    from bonbench.metrics.estimators import ProblemOutcome
    from bonbench.pipeline import stages as pipeline
    from bonbench.pipeline.prepared import prepare
    from bonbench.plugins.samplers.scripted import ScriptedSampler

    task = mo.mathodyssey_task(data_dir=data_dir)
    targets = {p.id: p.target for p in task.problems}

    def script(pid: str, idx: int) -> str:
        right = int(hashlib.sha256(f"{pid}:{idx}".encode()).hexdigest(), 16) % 3 == 0
        return f"So the final answer is $\\boxed{{{targets[pid] if right else '-98765'}}}$."

    run = prepare(task, RunConfig(task=task.name, model="scripted", backend="scripted", n=2, seed=11),
                  tmp_path / "results")
    pipeline.sample(run, ScriptedSampler(script))
    doc = pipeline.evaluate(run, parse_metrics(["pass@1,2", "maj@2"]), verifier=None, n_boot=300)
    m = doc["metrics"]
    assert m["gold_abstained"]["value"] == 0 and "gold_abstained[" not in "".join(m)

    grades = {}
    for g in map(json.loads, (run.store.root / "grades" / "math.jsonl").read_text().splitlines()):
        grades.setdefault(g["problem_id"], {})[g["sample_idx"]] = g
    for breakdown, group_of in task.breakdowns.items():
        groups: dict[str, list] = {}
        for p in task.problems:
            gs = [grades[p.id][i] for i in sorted(grades[p.id])]
            groups.setdefault(group_of(p), []).append(
                ProblemOutcome(p.id, tuple(1.0 if g["correct"] else 0.0 for g in gs), tuple(g["answer"] for g in gs)))
        for group, outs in groups.items():
            alone, _ = compute_metrics(outs, ["pass@1", "pass@2", "maj@2"], n_boot=300, seed=11)
            for name, value in alone.items():
                got = m[f"{name}[{breakdown}={group}]"]
                assert (got["value"], got["ci95"], got["n_problems"]) == (value.value, list(value.ci95), len(outs))
        total = sum(m[f"pass@1[{breakdown}={g}]"]["value"] * len(outs) for g, outs in groups.items())
        assert total / len(task.problems) == pytest.approx(m["pass@1"]["value"])
    assert 0.2 < m["pass@1"]["value"] < 0.5  # the script is right a third of the time: the grader saw the answers
