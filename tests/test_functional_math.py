"""functional_math: loading and aligning the real MATH() snapshots with static MATH (every MATH test
problem statically, or the functionalized ids only), filters, both gap definitions (the authors':
static and combined accuracy over every static problem, coverage rule; and the functional-only
variant) on hand-computed synthetic grades and on the real ids, their shared-bootstrap CIs, the
variant breakdown scored by the pipeline, gold self-agreement through the MATH grader."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Grade, Problem, Sample
from bonbench.plugins.graders.math import MathGrader
from bonbench_tasks import functional_math as fm

SNAPS = fm.SNAPSHOTS


@pytest.fixture(scope="module")
def task(data_dir: Path):
    """The default task: every MATH test problem statically, snapshots for the functionalized ids."""
    return fm.functional_math_task(data_dir=data_dir)


@pytest.fixture(scope="module")
def fn_task(data_dir: Path):
    """``-T static=functionalized``: the 1,745 functionalized ids only, static + three snapshots each."""
    return fm.functional_math_task(data_dir=data_dir, static="functionalized")


def test_static_all_is_every_math_test_problem_and_functionalized_ids_are_a_subset(task, data_dir: Path) -> None:
    """On the real files: 5,000 static problems (the MATH test ids, in file order sorted), the 1,745
    functionalized ids among them with three snapshots each, and ``meta["functionalized"]`` marks
    exactly the ids that the snapshot files have (the ids coverage counts as testable)."""
    import json

    math_ids = [json.loads(line)["unique_id"] for line in open(data_dir / "math" / "test.jsonl")]
    snap_ids = {json.loads(line)["unique_id"] for line in open(data_dir / "functional_math" / "Oct-2023.jsonl")}
    assert len(math_ids) == len(set(math_ids)) == fm.N_MATH_TEST and len(snap_ids) == fm.N_UNIQUE_IDS
    assert snap_ids < set(math_ids)
    variants = Counter(p.meta["variant"] for p in task.problems)
    assert variants == {"static": 5000, "Oct-2023": 1745, "Nov-2023": 1745, "Dec-2023": 1745}
    assert len(task.problems) == 5000 + 3 * 1745 == 10235
    static = [p for p in task.problems if p.meta["variant"] == "static"]
    assert {p.meta["unique_id"] for p in static} == set(math_ids)
    assert {p.meta["unique_id"] for p in static if p.meta["functionalized"]} == snap_ids
    assert task.extra_metrics.functionalized == snap_ids and task.extra_metrics.static_set == "all"
    # ids without snapshots have their static problem only; every group is adjacent, static first
    by_uid: dict[str, list[str]] = {}
    for p in task.problems:
        by_uid.setdefault(p.meta["unique_id"], []).append(p.meta["variant"])
    assert all(v == (["static", *SNAPS] if uid in snap_ids else ["static"]) for uid, v in by_uid.items())
    assert [p.id for p in task.problems[:3]] == ["static/test/algebra/1.json", "static/test/algebra/10.json",
                                                 "Oct-2023/test/algebra/10.json"]
    assert task.hash_args == fm.functional_math_task(data_dir=data_dir, static="functionalized").hash_args, \
        "-T static only selects problems: both sets share one sample pool"


def test_counts_and_id_scheme(fn_task) -> None:
    task = fn_task
    assert len(task.problems) == fm.N_UNIQUE_IDS * 4
    variants = Counter(p.meta["variant"] for p in task.problems)
    assert variants == {"static": 1745, "Oct-2023": 1745, "Nov-2023": 1745, "Dec-2023": 1745}
    assert len({p.id for p in task.problems}) == len(task.problems)
    for p in task.problems:
        assert p.id == f"{p.meta['variant']}/{p.meta['unique_id']}"
        assert p.meta["snapshot"] == (None if p.meta["variant"] == "static" else p.meta["variant"])
    assert [p.meta["variant"] for p in task.problems[:5]] == ["static", *SNAPS, "static"]
    assert task.fingerprint.startswith("sha256:")


def test_variants_are_aligned_by_unique_id(fn_task, data_dir: Path) -> None:
    """Every unique_id has static + three snapshots, adjacent, with the same level and subject; the
    static problem is the MATH test item and the snapshots differ from it."""
    import json

    task = fn_task

    math_rows = {r["unique_id"]: r for r in map(json.loads, open(data_dir / "math" / "test.jsonl"))}
    groups: dict[str, list[Problem]] = {}
    order: list[str] = []
    for p in task.problems:
        uid = p.meta["unique_id"]
        if uid not in groups:
            order.append(uid)
        groups.setdefault(uid, []).append(p)
    assert len(groups) == 1745 and order == sorted(order)
    for uid, ps in groups.items():
        assert [p.meta["variant"] for p in ps] == ["static", *SNAPS]
        assert len({(p.meta["level"], p.meta["subject"]) for p in ps}) == 1
        static = ps[0]
        assert static.input == math_rows[uid]["problem"] and static.target == math_rows[uid]["answer"]
    # the snapshots are new instances: most differ from the static text and answer
    changed = sum(ps[1].input != ps[0].input for ps in groups.values())
    assert changed > 1700
    ex = groups["test/algebra/6.json"]
    assert [p.target for p in ex[1:]] == ["65.192", "310.4658", "302.3723"]


def test_snapshot_level_and_subject_filters(data_dir: Path) -> None:
    fn = {"static": "functionalized"}
    one = fm.functional_math_task(data_dir=data_dir, snapshots="Oct-2023", **fn)
    assert Counter(p.meta["variant"] for p in one.problems) == {"static": 1745, "Oct-2023": 1745}
    two = fm.functional_math_task(data_dir=data_dir, snapshots="dec-2023, Nov-2023", **fn)
    assert [p.meta["variant"] for p in two.problems[:3]] == ["static", "Nov-2023", "Dec-2023"]
    lvl = fm.functional_math_task(data_dir=data_dir, level="5", **fn)
    assert len(lvl.problems) == 213 * 4 and {p.meta["level"] for p in lvl.problems} == {5}
    assert len(fm.functional_math_task(data_dir=data_dir, level="Level 1", **fn).problems) == 261 * 4
    geo = fm.functional_math_task(data_dir=data_dir, subject="geometry", **fn)
    assert len(geo.problems) == 144 * 4
    # static=all: every MATH test problem of the level / subject statically (1,324 at level 5, 479 geometry)
    lvl_all = fm.functional_math_task(data_dir=data_dir, level=5)
    assert Counter(p.meta["variant"] for p in lvl_all.problems) == {"static": 1324, **{s: 213 for s in SNAPS}}
    geo_all = fm.functional_math_task(data_dir=data_dir, subject="Geometry", static="ALL")
    assert Counter(p.meta["variant"] for p in geo_all.problems) == {"static": 479, **{s: 144 for s in SNAPS}}
    nt = fm.functional_math_task(data_dir=data_dir, subject="Number Theory", level=2, snapshots="Nov-2023")
    assert {p.meta["subject"] for p in nt.problems} == {"Number Theory"}
    assert {p.meta["level"] for p in nt.problems} == {2}
    assert one.hash_args == two.hash_args == lvl.hash_args, "filters must not change the run id"


@pytest.mark.parametrize("kwargs,match", [
    ({"snapshots": "Jan-2024"}, "unknown snapshot"),
    ({"level": "7"}, "not a MATH level"),
    ({"subject": "topology"}, "unknown -T subject"),
    ({"static": "some"}, "not a static set; choose all .* or functionalized"),
])
def test_bad_arguments_name_the_fix(data_dir: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(BonbenchError, match=match):
        fm.functional_math_task(data_dir=data_dir, **kwargs)


def test_no_data_dir_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BONBENCH_DATA_DIR", raising=False)
    with pytest.raises(BonbenchError, match="no hub copy.*--data-dir"):
        fm.functional_math_task(data_dir=None)


def test_missing_snapshot_file_names_the_fix(tmp_path: Path) -> None:
    (tmp_path / "functional_math").mkdir()
    with pytest.raises(BonbenchError, match="Oct-2023.jsonl"):
        fm.functional_math_task(data_dir=tmp_path)


# ----------------------------------------------------------------------------------------------
# metrics on synthetic grades


def _grades(pid: str, correct: list[bool | None], answers: list[str | None] | None = None) -> list[Grade]:
    answers = answers or [("right" if c else "wrong") for c in correct]
    return [Grade(pid, i, "math", 1, c, answer=a) for i, (c, a) in enumerate(zip(correct, answers, strict=True))]


def _table(rows: dict[str, dict[str, list[bool | None]]]) -> dict[str, list[Grade]]:
    """``{uid: {variant: [correct per sample]}}`` -> ``{problem_id: grades}``."""
    out = {}
    for uid, row in rows.items():
        for variant, correct in row.items():
            pid = fm.problem_id(variant, uid)
            out[pid] = _grades(pid, correct)
    return out


def _uid(name: str) -> str:
    return f"test/algebra/{name}.json"


def _synthetic() -> dict[str, list[Grade]]:
    """Three unique_ids, two samples per problem, all functionalized and tested.

    A: static 1,1 (1.0); Oct 1,0 (0.5); Nov 1,1; Dec 1,1     -> functional 1 * .5 * 1 * 1 = 0.5
    B: static 1,0 (0.5); Oct 0,0 (0.0); Nov 1,1; Dec 1,1     -> functional 0
    C: static 0,0 (0.0); Oct 1,1; Nov 1,1; Dec 1,1           -> functional 0
    static = 1.5/3 = 0.5; functional = 0.5/3 = 1/6; gap = 100 * (0.5 - 1/6) / 0.5 = 66.67
    Every id is tested, so combined = functional and both definitions agree (coverage 1).
    """
    return _table({
        _uid("A"): {"static": [True, True], "Oct-2023": [True, False], "Nov-2023": [True, True], "Dec-2023": [True, True]},
        _uid("B"): {"static": [True, False], "Oct-2023": [False, False], "Nov-2023": [True, True], "Dec-2023": [True, True]},
        _uid("C"): {"static": [False, False], "Oct-2023": [True, True], "Nov-2023": [True, True], "Dec-2023": [True, True]},
    })


def _functional(grades: dict[str, list[Grade]], snapshots: tuple[str, ...] = SNAPS, seed: int = 0, **kw) -> dict:
    return fm.functional_metrics(grades, snapshots, n_boot=1000, seed=seed, **kw)


def _all_solved(uid_static: bool, **snaps: bool) -> dict[str, list[bool]]:
    return {"static": [uid_static], **{s: [snaps.get(s.split("-")[0].lower(), True)] for s in SNAPS}}


def test_functional_static_and_gap_hand_computed() -> None:
    m = _functional(_synthetic())
    assert m["static_accuracy_functional_only"]["value"] == pytest.approx(0.5)
    assert m["functional_accuracy"]["value"] == pytest.approx(1 / 6)
    assert m["reasoning_gap_functional_only"]["value"] == pytest.approx(100 * (0.5 - 1 / 6) / 0.5)
    # every id tested: the authors' definition gives the same numbers, coverage 1
    assert m["static_accuracy"]["value"] == pytest.approx(0.5)
    assert m["combined_accuracy"]["value"] == pytest.approx(1 / 6)
    assert m["reasoning_gap"]["value"] == pytest.approx(100 * (0.5 - 1 / 6) / 0.5)
    assert m["reasoning_gap"]["coverage"] == m["functional_coverage"]["value"] == 1.0
    assert "withheld" not in m["reasoning_gap"]
    for name in ("static_accuracy_functional_only", "functional_accuracy", "reasoning_gap_functional_only",
                 "static_accuracy", "combined_accuracy", "reasoning_gap"):
        lo, hi = m[name]["ci95"]
        assert lo <= m[name]["value"] <= hi
        assert m[name]["n_problems"] == 3
    assert m["functional_accuracy"]["n_incomplete"] == 0 and m["reasoning_gap"]["n_functional_tested"] == 3
    assert 0.0 <= m["functional_accuracy"]["ci95"][0] and m["static_accuracy"]["ci95"][1] <= 1.0


def test_the_two_definitions_differ_on_a_hand_computed_case() -> None:
    """One greedy sample per problem. Five MATH test ids; A-D are functionalized, E is not.

        id  static  Oct Nov Dec   combined (authors)    functional (all four solved)
        A     1      1   1   1        1                     1
        B     1      0   1   1        0                     0
        C     1      1   1   1        1                     1
        D     0      1   1   1        0 (static failed)     0
        E     1      -   -   -        1 (static kept)       - (not functionalized)

    Authors: static = 4/5 = 0.8, combined = 3/5 = 0.6, gap = 100 * (0.8 - 0.6) / 0.8 = 25.0;
    statically solved A, B, C, E, tested A, B, C: coverage 3/4 = 75% > 70%, so the gap is reported.
    Functional only (A-D): static = 3/4, functional = 2/4, gap = 100 * (0.75 - 0.5) / 0.75 = 33.33.
    """
    grades = _table({
        _uid("A"): _all_solved(True), _uid("B"): _all_solved(True, oct=False), _uid("C"): _all_solved(True),
        _uid("D"): _all_solved(False), _uid("E"): {"static": [True]},
    })
    fn_ids = {_uid(x) for x in "ABCD"}
    m = _functional(grades, functionalized=fn_ids)
    assert m["static_accuracy"]["value"] == pytest.approx(0.8) and m["static_accuracy"]["n_problems"] == 5
    assert m["combined_accuracy"]["value"] == pytest.approx(0.6)
    assert m["reasoning_gap"]["value"] == pytest.approx(25.0)
    assert m["reasoning_gap"]["coverage"] == pytest.approx(0.75) == m["functional_coverage"]["value"]
    assert m["reasoning_gap"]["n_functional_tested"] == 4 and m["reasoning_gap"]["static_set"] == "all"
    assert m["static_accuracy_functional_only"]["value"] == pytest.approx(0.75)
    assert m["functional_accuracy"]["value"] == pytest.approx(0.5)
    assert m["reasoning_gap_functional_only"]["value"] == pytest.approx(100 / 3)
    assert m["reasoning_gap_functional_only"]["n_problems"] == 4
    # without an explicit functionalized set, an id with snapshot grades counts as functionalized: same here
    assert _functional(grades)["reasoning_gap"] == m["reasoning_gap"]


def test_low_coverage_withholds_the_gap_with_a_warning(task) -> None:
    """As above plus F (not functionalized, solved statically): statically solved A, B, C, E, F,
    tested A, B, C: coverage 3/5 = 60% <= 70%, so the gap is withheld (null) with the reason and
    the raw value 100 * (5/6 - 4/6) / (5/6) = 20.0; the task's metrics object warns."""
    rows = {"A": _all_solved(True), "B": _all_solved(True, oct=False), "C": _all_solved(True),
            "D": _all_solved(False), "E": {"static": [True]}, "F": {"static": [True]}}
    # real ids, so that the task's functionalized set decides: the first four functionalized ones and
    # two MATH test ids without snapshots
    fn_uids = sorted(task.extra_metrics.functionalized)[:4]
    other = sorted({p.meta["unique_id"] for p in task.problems if not p.meta["functionalized"]})[:2]
    uids = dict(zip("ABCDEF", fn_uids + other, strict=True))
    grades = _table({uids[k]: v for k, v in rows.items()})
    metrics = task.extra_metrics
    with pytest.warns(UserWarning, match=r"reasoning_gap withheld: only 60\.0% of the statically solved problems"):
        m = metrics(grades, seed=0, n_boot=200)
    gap = m["reasoning_gap"]
    assert gap["value"] is None and gap["ci95"] == [None, None]
    assert gap["raw_value"] == pytest.approx(20.0) and gap["coverage"] == pytest.approx(0.6)
    assert "70% or less" in gap["withheld"]
    assert m["static_accuracy"]["value"] == pytest.approx(5 / 6) and m["combined_accuracy"]["value"] == pytest.approx(4 / 6)
    assert m["reasoning_gap_functional_only"]["value"] == pytest.approx(100 / 3), "the variant is always reported"


def test_coverage_of_exactly_70_percent_is_withheld_as_in_the_authors_code() -> None:
    """Ten statically solved ids, seven tested: coverage 70%, and the authors' check is ``<= 70``."""
    rows = {_uid(f"t{i}"): _all_solved(True) for i in range(7)}
    rows.update({_uid(f"u{i}"): {"static": [True]} for i in range(3)})
    m = _functional(_table(rows))
    assert m["functional_coverage"]["value"] == pytest.approx(0.7)
    assert m["reasoning_gap"]["value"] is None and m["reasoning_gap"]["raw_value"] == 0.0
    rows[_uid("t7")] = _all_solved(True)  # 8 of 11: 72.7%, reported
    assert _functional(_table(rows))["reasoning_gap"]["value"] == 0.0


def test_static_set_functionalized_withholds_the_authors_gap() -> None:
    m = _functional(_synthetic(), static_set="functionalized")
    assert m["reasoning_gap"]["value"] is None and "-T static=all" in m["reasoning_gap"]["withheld"]
    assert m["reasoning_gap"]["raw_value"] == pytest.approx(m["reasoning_gap_functional_only"]["value"])


def test_authors_definition_with_n_samples_hand_computed() -> None:
    """_synthetic (A, B, C functionalized) plus E (static 1,1) and F (static 1,0) without snapshots.
    Per id, static s / combined c: A 1 / .5, B .5 / 0, C 0 / 0, E 1 / 1, F .5 / .5.
    static = 3/5 = 0.6, combined = 2/5 = 0.4, gap = 100 * 0.2 / 0.6 = 33.33 (functional only: 66.67);
    coverage = (1 + .5 + 0) / (1 + .5 + 0 + 1 + .5) = 0.5: withheld."""
    grades = {**_synthetic(), **_table({_uid("E"): {"static": [True, True]}, _uid("F"): {"static": [True, False]}})}
    m = _functional(grades)
    assert m["static_accuracy"]["value"] == pytest.approx(0.6) and m["combined_accuracy"]["value"] == pytest.approx(0.4)
    assert m["reasoning_gap"]["raw_value"] == pytest.approx(100 / 3) and m["reasoning_gap"]["value"] is None
    assert m["functional_coverage"]["value"] == pytest.approx(0.5)
    assert m["reasoning_gap_functional_only"]["value"] == pytest.approx(200 / 3)


def test_one_sample_matches_the_papers_all_variants_rule() -> None:
    grades = {}
    # X solved everywhere; Y misses Dec only; Z misses static only; W misses everything
    for uid, miss in {"X": set(), "Y": {"Dec-2023"}, "Z": {"static"}, "W": {"static", *SNAPS}}.items():
        for v in ("static", *SNAPS):
            pid = fm.problem_id(v, uid)
            grades[pid] = _grades(pid, [v not in miss])
    m = _functional(grades)
    assert m["static_accuracy"]["value"] == pytest.approx(2 / 4)
    assert m["functional_accuracy"]["value"] == pytest.approx(1 / 4) == m["combined_accuracy"]["value"]
    assert m["reasoning_gap"]["value"] == pytest.approx(50.0) == m["reasoning_gap_functional_only"]["value"]


def test_functional_uses_only_selected_snapshots_and_skips_incomplete_groups() -> None:
    grades = _synthetic()
    only_nov = _functional(grades, ("Nov-2023",))
    # A: 1 * 1, B: .5 * 1, C: 0 -> functional = 1.5/3 = static -> gap 0
    assert only_nov["functional_accuracy"]["value"] == pytest.approx(0.5)
    assert only_nov["reasoning_gap_functional_only"]["value"] == pytest.approx(0.0)
    assert only_nov["reasoning_gap"]["value"] == pytest.approx(0.0)
    # D is functionalized but only its static problem was graded (e.g. --limit cut its group): it is
    # an incomplete group for the functional-only metrics, and untested (static outcome kept) for the
    # authors'
    grades[fm.problem_id("static", _uid("D"))] = _grades(fm.problem_id("static", _uid("D")), [True, True])
    m = _functional(grades, functionalized={_uid(x) for x in "ABCD"})
    assert m["functional_accuracy"]["n_incomplete"] == 1 and m["functional_accuracy"]["n_problems"] == 3
    assert m["static_accuracy_functional_only"]["value"] == pytest.approx(0.5)
    assert m["static_accuracy"]["value"] == pytest.approx(2.5 / 4) and m["static_accuracy"]["n_problems"] == 4
    assert m["combined_accuracy"]["value"] == pytest.approx(1.5 / 4)
    assert m["reasoning_gap"]["n_functional_tested"] == 3
    # without the functionalized set, a static-only id is one without a functional version: not incomplete
    assert _functional(grades)["functional_accuracy"]["n_incomplete"] == 0


def test_undecided_grades_count_as_wrong_and_zero_static_gives_nan_gap() -> None:
    grades = {}
    for v in ("static", *SNAPS):
        pid = fm.problem_id(v, "U")
        grades[pid] = _grades(pid, [None, False])
    m = _functional(grades)
    assert m["static_accuracy"]["value"] == 0.0 and m["functional_accuracy"]["value"] == 0.0
    gap = m["reasoning_gap_functional_only"]["value"]
    assert gap != gap  # NaN: undefined at static 0
    assert m["reasoning_gap"]["value"] is None and "static accuracy is 0" in m["reasoning_gap"]["withheld"]


def test_identical_groups_give_a_degenerate_ci() -> None:
    grades = {}
    for uid in ("P", "Q", "R"):
        for v in ("static", *SNAPS):
            pid = fm.problem_id(v, uid)
            grades[pid] = _grades(pid, [True, v != "Oct-2023"])
    m = _functional(grades)
    # every id: static 1.0, Oct 0.5, others 1.0 -> functional 0.5, gap 50 in every resample
    assert m["functional_accuracy"]["ci95"] == [pytest.approx(0.5), pytest.approx(0.5)]
    for name in ("reasoning_gap_functional_only", "reasoning_gap"):
        assert m[name]["ci95"] == [pytest.approx(50.0), pytest.approx(50.0)]


def _random_grades(n_ids: int, n: int, seed: int) -> dict[str, list[Grade]]:
    """Grades of ``n_ids`` unique_ids whose snapshots are solved less often than the static problem."""
    rng = np.random.default_rng(seed)
    out = {}
    for u in range(n_ids):
        p = rng.beta(1.0, 1.5)
        for v in ("static", *SNAPS):
            pv = p if v == "static" else p * rng.uniform(0.5, 1.0)
            pid = fm.problem_id(v, f"test/algebra/{u}.json")
            out[pid] = _grades(pid, [bool(rng.random() < pv) for _ in range(n)])
    return out


def test_cis_come_from_the_shared_bootstrap_with_the_given_seed() -> None:
    """Static and functional intervals are ``bootstrap_ci`` of the per-id values (same seed, same
    resamples); the gap's is that of its linearisation, which agrees with a percentile bootstrap of
    the ratio itself (the same resamples) to within 0.05 points on 1,745 ids."""
    from bonbench.metrics.estimators import bootstrap_ci

    grades = _random_grades(1745, 4, seed=1)
    m = _functional(grades, seed=7)
    acc = {v: np.array([np.mean([g.correct for g in grades[fm.problem_id(v, f"test/algebra/{u}.json")]])
                        for u in sorted(map(str, range(1745)))]) for v in ("static", *SNAPS)}
    static, functional = acc["static"], np.prod([acc[v] for v in ("static", *SNAPS)], axis=0)
    for name in ("static_accuracy", "static_accuracy_functional_only"):
        assert m[name]["ci95"] == list(bootstrap_ci(static, n_boot=1000, seed=7))
    for name in ("functional_accuracy", "combined_accuracy"):  # every id tested: combined = functional
        assert m[name]["ci95"] == list(bootstrap_ci(functional, n_boot=1000, seed=7))
    idx = np.random.default_rng(7).integers(0, len(static), size=(1000, len(static)))  # bootstrap_ci's resamples
    s_boot, f_boot = static[idx].mean(axis=1), functional[idx].mean(axis=1)
    ratio_ci = np.quantile(100 * (s_boot - f_boot) / s_boot, [0.025, 0.975])
    for name in ("reasoning_gap_functional_only", "reasoning_gap"):
        assert m[name]["ci95"] == pytest.approx(ratio_ci, abs=0.05)
        assert m[name]["ci95"] != pytest.approx(list(ratio_ci), abs=1e-9), "linearised, not the ratio's"
    # another seed gives other resamples, the same values
    other = _functional(grades, seed=8)
    assert all(other[k]["value"] == m[k]["value"] for k in m)
    assert all(other[k]["ci95"] != m[k]["ci95"] for k in m if k != "functional_coverage")  # coverage 1: [1, 1]


def test_the_math_reference_example_on_the_real_ids(task) -> None:
    """math-reference, "Functional MATH reasoning gap": 30% static and 10% functional on the
    functionalized subset, 30% static elsewhere -> 66.7% functional-only vs 23.3% by the authors'
    definition. Built on the real 5,000 static / 1,745 functionalized ids with one sample each: of
    the sorted functionalized ids, i % 10 < 3 solved statically and i % 10 < 1 also in every
    snapshot; of the others, i % 10 < 3 solved statically. Exact expectation from the counts:
    static = (s_f + s_o) / 5000, combined = (f_f + s_o) / 5000, gap = 100 (s_f - f_f) / (s_f + s_o),
    coverage = s_f / (s_f + s_o) ~ 34.9%: withheld, the number is under raw_value."""
    fn_ids = sorted(task.extra_metrics.functionalized)
    others = sorted({p.meta["unique_id"] for p in task.problems} - set(fn_ids))
    assert len(fn_ids) == 1745 and len(others) == 3255
    rows = {}
    for i, uid in enumerate(fn_ids):
        rows[uid] = {"static": [i % 10 < 3], **{s: [i % 10 < 1] for s in SNAPS}}
    for i, uid in enumerate(others):
        rows[uid] = {"static": [i % 10 < 3]}
    s_f, f_f = sum(i % 10 < 3 for i in range(1745)), sum(i % 10 < 1 for i in range(1745))
    s_o = sum(i % 10 < 3 for i in range(3255))
    assert (s_f, f_f, s_o) == (525, 175, 978)
    m = fm.functional_metrics(_table(rows), SNAPS, n_boot=200, seed=0, functionalized=set(fn_ids))
    gap = m["reasoning_gap"]
    assert gap["raw_value"] == pytest.approx(100 * (s_f - f_f) / (s_f + s_o)) == pytest.approx(23.3, abs=0.05)
    assert m["reasoning_gap_functional_only"]["value"] == pytest.approx(100 * (s_f - f_f) / s_f) == \
        pytest.approx(66.7, abs=0.05)
    assert m["static_accuracy"]["value"] == pytest.approx((s_f + s_o) / 5000)
    assert m["combined_accuracy"]["value"] == pytest.approx((f_f + s_o) / 5000)
    assert gap["coverage"] == pytest.approx(s_f / (s_f + s_o)) and gap["value"] is None
    assert gap["n_functional_tested"] == 1745 and gap["n_problems"] == 5000


def test_task_declares_the_variant_breakdown(task) -> None:
    assert dict(task.breakdowns) == {"variant": fm.variant_of}
    groups = Counter(fm.variant_of(p) for p in task.problems)
    assert groups == {"static": 5000, "Oct-2023": 1745, "Nov-2023": 1745, "Dec-2023": 1745}


def test_task_extra_metrics_needs_the_runs_bootstrap_settings(task) -> None:
    fn_ids = sorted(task.extra_metrics.functionalized)[:3]
    rename = {_uid(x): uid for x, uid in zip("ABC", fn_ids, strict=True)}
    grades = {fm.problem_id(v, rename[u]): gs for pid, gs in _synthetic().items() for v, u in [fm.split_problem_id(pid)]}
    out = task.extra_metrics(grades, seed=3, n_boot=500, specs=["pass@1"], scores_by_problem=None)
    assert set(out) == {"static_accuracy", "combined_accuracy", "reasoning_gap", "functional_coverage",
                        "static_accuracy_functional_only", "functional_accuracy", "reasoning_gap_functional_only"}
    assert out == fm.functional_metrics(grades, SNAPS, n_boot=500, seed=3, functionalized=set(fn_ids))
    with pytest.raises(TypeError, match="seed"):
        task.extra_metrics(grades)


# ----------------------------------------------------------------------------------------------
# gold self-agreement and prompts


def test_gold_self_agreement_every_variant(task) -> None:
    """Each gold answer, boxed as a completion, grades correct against itself in >= 99.5% of
    problems of every variant (static and each snapshot)."""
    problems = {p.id: p for p in task.problems}
    samples = [Sample(p.id, 0, f"The final answer is $\\boxed{{{p.target}}}$.", 10, "stop") for p in task.problems]
    grades = MathGrader(workers=1).grade(problems, samples)
    by_variant: dict[str, list[Grade]] = {}
    for g in grades:
        by_variant.setdefault(problems[g.problem_id].meta["variant"], []).append(g)
    for variant, gs in sorted(by_variant.items()):
        failed = [(g.problem_id, problems[g.problem_id].target, g.answer, g.error) for g in gs if not g.correct]
        print(f"\nfunctional_math gold self-agreement [{variant}]: {len(gs) - len(failed)}/{len(gs)}; failures: {failed}")
        assert len(gs) == (5000 if variant == "static" else 1745)
        assert (len(gs) - len(failed)) / len(gs) >= 0.995


def test_renders_with_the_math_task_prompts(task) -> None:
    p = next(p for p in task.problems if p.meta["variant"] == "Nov-2023")
    base = task.render(p, "base")
    chat = task.render(p, "chat")
    assert base.problem_id == p.id and base.text is not None and p.input in base.text and base.stop
    assert chat.messages is not None and any(p.input in m["content"] for m in chat.messages)
    assert task.grader.name == "math"


def test_registered_and_t_args_coerce(data_dir: Path) -> None:
    from bonbench.api.task import get_task, task_names

    assert "functional_math" in task_names()
    t = get_task("functional_math", data_dir=str(data_dir), snapshots="Oct-2023", level="Level 3", subject="Prealgebra")
    assert {p.meta["variant"] for p in t.problems} == {"static", "Oct-2023"}
    assert {p.meta["level"] for p in t.problems} == {3} and {p.meta["subject"] for p in t.problems} == {"Prealgebra"}


def test_pipeline_end_to_end_with_scripted_completions(data_dir: Path, tmp_path: Path) -> None:
    """Through pipeline.prepare/sample/evaluate on real problems (level 1 algebra: 135 static problems,
    96 of them functionalized): the per-variant metrics are the shared estimators on each variant
    alone (the run's seed and n_boot), static_accuracy is exactly pass@1 of the static variant (value
    and CI: same per-id values, same resamples), and combined / functional accuracy and both gaps
    follow from the per-variant per-problem values."""
    import hashlib
    import json

    from bonbench.api.metric.grammar import parse_metrics
    from bonbench.api.metric.values import compute_metrics
    from bonbench.core.config import RunConfig
    from bonbench.metrics.estimators import ProblemOutcome
    from bonbench.pipeline import stages as pipeline
    from bonbench.pipeline.prepared import prepare
    from bonbench.plugins.samplers.scripted import ScriptedSampler

    t = fm.functional_math_task(data_dir=data_dir, level=1, subject="algebra")
    targets = {p.id: p.target for p in t.problems}
    # out of 4; Dec always right; static problems without snapshots are solved less often, so that
    # the statically solved ones are mostly functionalized (coverage > 70%: the gap is reported)
    hit_rate = {"static": 3, "Oct-2023": 2, "Nov-2023": 3, "Dec-2023": 4, "static-only": 1}
    fn_ids = t.extra_metrics.functionalized

    def script(pid: str, idx: int) -> str:
        h = int(hashlib.sha256(f"{pid}:{idx}".encode()).hexdigest(), 16)
        variant, uid = fm.split_problem_id(pid)
        right = h % 4 < hit_rate[variant if variant != "static" or uid in fn_ids else "static-only"]
        return f"So the answer is $\\boxed{{{targets[pid] if right else 'nope'}}}$."

    cfg = RunConfig(task=t.name, model="scripted", backend="scripted", n=4, seed=5)
    run = prepare(t, cfg, tmp_path / "results")
    pipeline.sample(run, ScriptedSampler(script))
    doc = pipeline.evaluate(run, parse_metrics(["pass@1,2", "maj@4"]), verifier=None, n_boot=200)
    m, pp = doc["metrics"], doc["per_problem"]
    sizes = Counter(p.meta["variant"] for p in t.problems)
    assert sizes == {"static": 135, **{s: 96 for s in SNAPS}}
    variants = ("static", *SNAPS)
    assert {f"{k}[variant={v}]" for k in ("pass@1", "pass@2", "maj@4") for v in variants} <= set(m)
    assert "pass@1[Oct-2023]" not in m, "one naming scheme: metric[breakdown=group]"

    grades = [json.loads(line) for line in (run.store.root / "grades" / "math.jsonl").read_text().splitlines()]
    by_pid: dict[str, list[dict]] = {}
    for g in sorted(grades, key=lambda g: (g["problem_id"], g["sample_idx"])):
        by_pid.setdefault(g["problem_id"], []).append(g)
    for v in variants:
        outs = [ProblemOutcome(p.id, tuple(1.0 if g["correct"] else 0.0 for g in by_pid[p.id]),
                               tuple(g["answer"] for g in by_pid[p.id])) for p in t.problems if p.meta["variant"] == v]
        alone, _ = compute_metrics(outs, ["pass@1", "pass@2", "maj@4"], n_boot=200, seed=5)
        for name, value in alone.items():
            got = m[f"{name}[variant={v}]"]
            assert (got["value"], got["ci95"], got["n_problems"]) == (value.value, list(value.ci95), sizes[v]), (name, v)
    assert m["pass@1[variant=Dec-2023]"]["value"] == 1.0 and m["pass@1[variant=Dec-2023]"]["ci95"] == [1.0, 1.0]
    assert m["pass@1"]["value"] == pytest.approx(
        sum(sizes[v] * m[f"pass@1[variant={v}]"]["value"] for v in variants) / len(t.problems)), \
        "the generic metric pools all variants"

    static = m["static_accuracy"]
    assert (static["value"], static["ci95"], static["n_problems"]) == (
        m["pass@1[variant=static]"]["value"], m["pass@1[variant=static]"]["ci95"], 135)
    p1 = {pid: v for name in (f"pass@1[variant={v}]" for v in variants) for pid, v in pp[name].items()}
    uids = sorted({p.meta["unique_id"] for p in t.problems})
    fn_uids = [u for u in uids if u in fn_ids]
    all_four = {u: np.prod([p1[fm.problem_id(v, u)] for v in variants]) for u in fn_uids}
    s = {u: p1[fm.problem_id("static", u)] for u in uids}
    combined = np.mean([all_four.get(u, s[u]) for u in uids])
    assert m["combined_accuracy"]["value"] == pytest.approx(combined)
    coverage = sum(s[u] for u in fn_uids) / sum(s.values())
    assert m["functional_coverage"]["value"] == pytest.approx(coverage) and coverage > fm.COVERAGE_THRESHOLD
    assert m["reasoning_gap"]["value"] == pytest.approx(100 * (static["value"] - combined) / static["value"])
    lo, hi = m["reasoning_gap"]["ci95"]
    assert lo < m["reasoning_gap"]["value"] < hi
    # the functional-only variant, over the 96 functionalized ids
    s_fn = np.mean([s[u] for u in fn_uids])
    functional = np.mean(list(all_four.values()))
    assert m["static_accuracy_functional_only"]["value"] == pytest.approx(s_fn)
    assert m["functional_accuracy"]["value"] == pytest.approx(functional)
    assert m["reasoning_gap_functional_only"]["value"] == pytest.approx(100 * (s_fn - functional) / s_fn)
    assert m["reasoning_gap_functional_only"]["value"] > m["reasoning_gap"]["value"]
    on_disk = json.loads(run.store.metrics_path.read_text())["metrics"]
    assert on_disk["pass@2[variant=Oct-2023]"] == m["pass@2[variant=Oct-2023]"]
    assert on_disk["reasoning_gap"] == m["reasoning_gap"]


def test_a_withheld_gap_reads_as_nan_and_prints_as_withheld(tmp_path: Path) -> None:
    """metrics.json holds a withheld gap as null; the table says "withheld", the analysis readers
    (leaderboard, plots: ``rundir.load_run``) read NaN, the annotations stay as notes."""
    import json

    from rich.console import Console

    from bonbench.apps.analysis.rundir import load_run
    from bonbench.pipeline.report import print_metrics

    m = fm.functional_metrics(_table({_uid("A"): _all_solved(True), _uid("E"): {"static": [True]}}), SNAPS,
                              n_boot=50, seed=0)
    assert m["reasoning_gap"]["value"] is None  # coverage 1/2
    doc = {"task": "functional_math", "model": "m", "n": 1, "metrics": m, "per_problem": {}}
    (tmp_path / "config.json").write_text(json.dumps({"config": {"task": "functional_math", "model": "m"}}))
    (tmp_path / "metrics.json").write_text(json.dumps(doc))
    run = load_run(tmp_path)
    gap = run.metrics["reasoning_gap"]
    assert gap.value != gap.value and gap.notes["raw_value"] == 0.0 and "70% or less" in gap.notes["withheld"]
    console = Console(width=160, record=True)
    print_metrics(doc, console)
    row = next(line for line in console.export_text().splitlines() if "reasoning_gap " in line)
    assert "withheld" in row and "nan" not in row
