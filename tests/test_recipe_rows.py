"""The recipe's fast row reader (``recipe_rows``) against the slow path (a record per row): the same
inputs and the same recipe JSON on the store's own rows, and on hand-written rows in odd layouts
(repeated keys, a regrade, another key order, a nested key, an escaped id, a torn last line), where
it either reads exactly what the slow path reads or declines and the slow path reads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from bonbench.apps.analysis import recipe_table
from bonbench.apps.analysis.recipe import RULES, build_recipe
from bonbench.apps.analysis.recipe_rows import fast_inputs
from bonbench.apps.analysis.recipe_table import TableSpec, compute_table, deployable_verifiers
from bonbench.apps.analysis.recipe_write import recipe_json
from bonbench.apps.analysis.run_rows import outcomes_by_verifier
from bonbench.apps.analysis.rundir import load_run
from bonbench.apps.analysis.synthetic import VERIFIER, write_synthetic_run
from bonbench.core.errors import BonbenchError

IDS = [f"q{i:02d}" for i in range(6)]


@pytest.fixture(autouse=True)
def recipe_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache"))


def write_run(root: Path, model: str = "m", n: int = 5, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    return write_synthetic_run(root, np.linspace(0.1, 0.9, len(IDS)), n=n, model=model, problem_ids=IDS, seed=seed,
                               n_tokens=rng.integers(5, 90, size=(len(IDS), n)), prompt_tokens=40, verifier_tokens=7,
                               answers=True, n_boot=10)


def same(run_dir: Path) -> bool:
    """Whether the fast path read ``run_dir`` (True) or declined (False); where it read, exactly what
    the slow path reads: the outcomes, and the table's token counts and values."""
    run = load_run(run_dir)
    verifiers = deployable_verifiers(run)
    got = fast_inputs(run, verifiers)
    if got is None:
        return False
    want = outcomes_by_verifier(run, verifiers)
    assert list(got[2]) == list(want)
    for name, outcomes in want.items():
        for a, b in zip(got[2][name], outcomes, strict=True):
            assert (a.problem_id, a.correct, a.answers) == (b.problem_id, b.correct, b.answers)
            assert (a.scores is None) == (b.scores is None)
            if a.scores is not None:
                assert np.array_equal(np.array(a.scores, dtype=float), np.array(b.scores, dtype=float))
    fast = compute_table(run, TableSpec(0.5, RULES))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(recipe_table, "fast_inputs", lambda run, verifiers: None)
        slow = compute_table(run, TableSpec(0.5, RULES))
    assert (fast.ids, fast.n, fast.notes) == (slow.ids, slow.n, slow.notes)
    assert np.array_equal(fast.prompt, slow.prompt) and np.array_equal(fast.gen, slow.gen)
    assert fast.verifier_tokens.keys() == slow.verifier_tokens.keys()
    for name, tokens in slow.verifier_tokens.items():
        assert np.array_equal(fast.verifier_tokens[name], tokens, equal_nan=True)
    assert fast.values.keys() == slow.values.keys()
    for key, (Ns, values) in slow.values.items():
        assert fast.values[key][0] == Ns and np.array_equal(fast.values[key][1], values, equal_nan=True)
    return True


def rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def put(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


def test_the_store_layout_is_read_fast_and_gives_the_slow_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "results"
    runs = [write_run(root, "a", seed=1), write_run(root, "b", n=6, seed=2)]
    assert all(same(r) for r in runs)
    fast = recipe_json(build_recipe([root], [120.0, 300.0], by="difficulty", n_boot=30))
    monkeypatch.setattr(recipe_table, "fast_inputs", lambda run, verifiers: None)
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path / "cache2"))
    assert recipe_json(build_recipe([root], [120.0, 300.0], by="difficulty", n_boot=30)) == fast


def test_repeated_keys_keep_the_slow_paths_rows(tmp_path: Path) -> None:
    """grades and scores: a key's first row; the ledger: a score's last row, over the samples' keys;
    a regrade under another grader version is not read when metrics.json names the grading."""
    run = write_run(tmp_path / "results")
    grades, scores = run / "grades" / "synthetic.jsonl", run / "scores" / f"{VERIFIER}.jsonl"
    g, s = rows(grades), rows(scores)
    flipped = [{**r, "correct": not r["correct"], "answer": "Z"} for r in g[:4]]
    put(grades, [json.dumps(r, ensure_ascii=False) for r in g + flipped])
    later = [{**r, "score": -1.0, "tokens": 1000} for r in s[:3]]
    stray = {**s[0], "problem_id": "unsampled", "tokens": 5}
    put(scores, [json.dumps(r) for r in s + later + [stray]])
    assert same(run)
    meta = json.loads((run / "metrics.json").read_text())
    meta["grading"] = {"grader": "synthetic", "grader_version": 2, "grading_id": "x"}
    (run / "metrics.json").write_text(json.dumps(meta))
    regraded = [{**r, "grader_version": 2, "grading_id": "x", "correct": True, "answer": "R"} for r in g[::2]]
    put(grades, [json.dumps(r) for r in g + regraded])
    assert load_run(run).meta.get("grading", {}).get("grader_version") == 2
    assert same(run)


def odd_run(root: Path, odd: str) -> Path:
    """A run whose rows are in an odd layout ``odd`` (or broken so)."""
    run = write_run(root)
    grades, samples = run / "grades" / "synthetic.jsonl", run / "samples.jsonl"
    g = rows(grades)
    if odd == "key order":
        put(grades, [json.dumps(dict(reversed(list(r.items())))) for r in g])
        put(samples, [json.dumps(dict(reversed(list(r.items())))) for r in rows(samples)])
    elif odd == "nested key":
        put(grades, [json.dumps({**r, "detail": {"answer": "elsewhere", "correct": True}}) for r in g])
    elif odd == "escaped id":
        for path in (grades, samples, run / "scores" / f"{VERIFIER}.jsonl"):  # written as \\q (json escapes it)
            put(path, [json.dumps({**r, "problem_id": str(r["problem_id"]).replace("q", "\\q")}) for r in rows(path)])
    elif odd == "blank line":
        grades.write_text(grades.read_text() + "\n")
    elif odd == "torn last line":
        samples.write_text(samples.read_text() + '{"schema": 1, "problem_id": "q0')
    elif odd == "no prompt count":
        put(samples, [json.dumps({**r, "prompt_tokens": None}) for r in rows(samples)])
    elif odd == "not a row":
        grades.write_text(grades.read_text() + "[1, 2]\n")
    elif odd == "no verdict":  # a hand-edited grade without ``correct``: the records refuse it
        put(grades, [json.dumps({k: v for k, v in r.items() if k != "correct" or i}) for i, r in enumerate(g)])
    return run


@pytest.mark.parametrize("odd", ["key order", "nested key", "escaped id", "blank line"])
def test_other_layouts_read_as_the_slow_path_reads_them(tmp_path: Path, odd: str) -> None:
    """Rows of another writer's layout: ``row_scan`` reads each as json does, so the fast path reads
    them and gets what the slow path gets (``same``)."""
    assert same(odd_run(tmp_path / "results", odd))


@pytest.mark.parametrize("odd", ["torn last line", "no prompt count", "not a row", "no verdict"])
def test_broken_rows_are_left_to_the_slow_path(tmp_path: Path, odd: str) -> None:
    """Where the records warn or refuse, the fast path declines and the slow path says so."""
    root = tmp_path / "results"
    run = odd_run(root, odd)
    assert not same(run)
    if odd == "torn last line":  # the slow path drops it with a warning, its row to be redone
        with pytest.warns(UserWarning, match="torn"):
            assert build_recipe([root], [300.0], n_boot=20).choices
    else:  # one line naming what is missing or the line (tests/test_recipe.py)
        with pytest.raises(BonbenchError, match="prompt token counts|is not valid JSON|is not a row|malformed Grade row"):
            build_recipe([root], [300.0], n_boot=20)


def test_unscored_samples_score_minus_infinity(tmp_path: Path) -> None:
    run = write_run(tmp_path / "results")
    scores = run / "scores" / f"{VERIFIER}.jsonl"
    put(scores, [json.dumps(r) for r in rows(scores)[2:]])
    assert same(run)
    got = fast_inputs(load_run(run), [VERIFIER])
    assert got is not None
    scored = got[2][VERIFIER][0].scores
    assert scored is not None and scored[:2] == (-math.inf, -math.inf)


def test_rules_choose_which_strategies_are_computed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--rules`` (default maj,bon) leaves wmaj and bom out unless asked; the strategies it keeps
    have the values they have among every rule; an unknown rule is one line naming the choices."""
    from bonbench.apps.cli import main

    root = tmp_path / "results"
    write_run(root)
    every = build_recipe([root], [300.0], n_boot=10)
    # every rule but wmaj, left out with a note: the synthetic verifier's scores go below 0
    assert {s.rule for s in every.strategies} == {"single", "maj", "bon", "bom", "pass"}
    few = build_recipe([root], [300.0], n_boot=10, rules=("bon",))
    assert {s.rule for s in few.strategies} == {"single", "bon", "pass"}
    assert set(few.strategies) <= set(every.strategies)
    with pytest.raises(BonbenchError, match="--rules takes maj, bon, wmaj, bom .*not 'best'"):
        build_recipe([root], [300.0], rules=("maj", "best"))
    for flags, rules in (([], {"single", "maj", "bon"}), (["--rules", "maj,bon,bom"], {"single", "maj", "bon", "bom"})):
        assert main(["recipe", str(root), "--budget", "300", "--json", "--n-boot", "10", "--out",
                     str(tmp_path / "out"), *flags]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert {s["rule"] for s in doc["strategies"]} - {"pass"} == rules
