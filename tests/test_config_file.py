"""``--config FILE.toml`` (issue 29, point 5): every command reads its settings from a TOML file, the
flags given with it override the file, and the file's values are parsed exactly as the same flags
would be (same namespace, same request, same run hash). A bad file is one ``error:`` line naming
it, exit 2, before anything is read or written.
"""

from __future__ import annotations

import argparse
import json
import shlex
import typing
from pathlib import Path
from typing import Any

import pytest
from test_settings_cli import COMMANDS, sample_value, subparser

from bonbench.apps.cli import build_parser, main
from bonbench.apps.cli.evaluation import SAMPLING_ONLY
from bonbench.apps.trainer.config import TrainConfig
from bonbench.core import settings, settings_file
from bonbench.core.errors import BonbenchError
from bonbench.run.request import RunRequest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "examples" / "math500-bon.toml"
# what a command needs beyond its sampled settings (train's objective options are checked against the objective)
EXTRA = {"train": (["--objective", "passk", "-O", "k=3", "--baseline", "none"],
                   'objective = "passk"\nobjective_options = {k = 3}\nbaseline = "none"\n')}
SKIP = {"score": SAMPLING_ONLY, "train": ("objective", "objective_options", "full_finetune")}
# the classes whose every setting is sampled (train's objective options and merge's RunRequest flags are given above)
CLASSES = {**COMMANDS, "train": (TrainConfig,), "merge": COMMANDS["merge"][:1]}


def _toml(flag: settings.Flag, words: list[str]) -> str:
    """``flag``'s sampled value as one TOML line, keyed by its flag without the dashes."""
    key = flag.name if flag.meta.get("positional") or not flag.spelling.startswith("--") else flag.spelling[2:]
    if flag.kind == "bool":
        value = "true"
    elif flag.kind == "pairs":
        value = "{" + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in (w.split("=", 1) for w in words)) + "}"
    elif flag.kind == "many":
        value = "[" + ", ".join(json.dumps(w) for w in words) + "]"
    elif flag.kind == "value" and flag.convert in (int, float) and not flag.meta.get("parse"):
        value = words[0]  # a TOML number, not a string
    else:
        value = json.dumps(words[0])
    return f"{key} = {value}\n"


def _both(command: str) -> tuple[list[str], str]:
    """argv giving every setting of ``command`` a non-default value, and the TOML file saying the same."""
    argv, text = list(EXTRA.get(command, ([], ""))[0]), EXTRA.get(command, ([], ""))[1]
    for cls in CLASSES[command]:
        hints = typing.get_type_hints(cls)
        for flag in settings.flags_of(cls):
            if flag.name in SKIP.get(command, ()):
                continue
            _, words = sample_value(flag, hints[flag.name])
            text += _toml(flag, words)
            if flag.meta.get("positional"):
                argv += words
            elif flag.kind in ("many", "pairs"):
                argv += [w for word in words for w in (flag.spelling, word)]
            else:
                argv += [flag.spelling, *words]
    return argv, text


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    settings_file.apply(parser, argv)
    return parser.parse_args(argv)


def _settings(ns: argparse.Namespace) -> dict[str, Any]:
    # the bookkeeping of repeatable flags and the config path are not settings
    return {k: v for k, v in vars(ns).items() if not k.startswith("_") and k != "config"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_file_parses_exactly_as_the_same_flags(command: str, tmp_path: Path) -> None:
    argv, text = _both(command)
    path = tmp_path / "settings.toml"
    path.write_text(text, encoding="utf-8")
    from_flags, from_file = _parse([command, *argv]), _parse([command, "--config", str(path)])
    assert _settings(from_file) == _settings(from_flags)
    assert len(_settings(from_flags)) > 2  # the comparison covers the command's settings, not just its handler
    for cls in CLASSES[command]:
        if cls is not TrainConfig:  # train's request is built with its objective options: compared as namespaces above
            assert settings.from_args(cls, from_file) == settings.from_args(cls, from_flags)


def test_flags_override_the_file_and_the_file_overrides_the_environment(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_MODEL", "env/model")
    path = tmp_path / "run.toml"
    path.write_text('n = 4\nmetric = ["pass@1", "bon@4"]\ntask_args = {subset = "math500", level = "5"}\n'
                    'model = "file/model"\ntemperature = [0.2, 0.7]\n', encoding="utf-8")
    req = settings.from_args(RunRequest, _parse(["run", "--config", str(path)]))
    assert (req.n, req.metrics, req.model, req.temperatures) == (4, ("pass@1", "bon@4"), "file/model", (0.2, 0.7))
    assert req.task_args == {"subset": "math500", "level": "5"}
    ns = _parse(["run", "--n", "8", "--config", str(path), "--metric", "maj@4", "-T", "subset=full", "--model", "m"])
    assert (ns.n, ns.metrics, ns.task_args, ns.model) == (8, ("maj@4",), ("subset=full",), "m")  # a flag replaces it whole
    monkeypatch.delenv("BONBENCH_MODEL")
    assert _parse(["run"]).model is None


def test_the_file_gives_required_settings_and_positionals(tmp_path: Path) -> None:
    path = tmp_path / "gate.toml"
    path.write_text('run = "runs/x"\nbaseline = "b.json"\nmetric = "pass@1"\n', encoding="utf-8")
    ns = _parse(["gate", "--config", str(path)])
    assert (ns.run, ns.baseline, ns.metrics) == (Path("runs/x"), Path("b.json"), ("pass@1",))
    assert _parse(["gate", "--config", str(path), "--run", "other"]).run == Path("other")
    path.write_text('paths = ["a", "b"]\nkind = "bon"\nfit_families = ["exp_power", "power_linear"]\n', encoding="utf-8")
    ns = _parse(["plot", "--config", str(path)])
    assert (ns.paths, ns.kind, ns.fit_families) == ([Path("a"), Path("b")], "bon", "exp_power,power_linear")
    assert _parse(["plot", "c", "--config", str(path)]).paths == [Path("c")]
    path.write_text('run_dir = "runs/r"\npartial = true\nn_boot = 7\n', encoding="utf-8")
    ns = _parse(["merge", "--config", str(path)])
    assert (ns.run_dir, ns.partial, ns.n_boot) == (Path("runs/r"), True, 7)
    path.write_text("timeout = 3\nmemory_mb = 256\n", encoding="utf-8")  # sandbox run's flags are plain argparse ones
    ns = _parse(["sandbox", "run", "p.py", "--config", str(path)])
    assert (ns.timeout, ns.memory_mb) == (3.0, 256)


def test_run_hash_and_config_are_the_same_as_with_flags(tmp_path: Path, data_dir: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = ["--out", str(tmp_path / "results"), "--data-dir", str(data_dir)]
    assert main(["run", "--config", str(EXAMPLE), "--limit", "2", "--dry-run", *out]) == 0
    from_file = capsys.readouterr().out
    flags = shlex.split("--task math500 --metric pass@1,4,16 --metric bon@16 --metric maj@16 --n 16 --temperature 0.7 "
                        "--max-tokens 1024 --verifier logprob --limit 2 --dry-run")
    assert main(["run", *flags, *out]) == 0
    assert capsys.readouterr().out == from_file
    doc = json.loads(from_file[: from_file.rindex("}") + 1])
    assert doc["config"]["temperature"] == 0.7 and doc["config"]["n"] == 16 and doc["problems"] == 2
    assert not (tmp_path / "results").exists()  # --dry-run writes nothing


def test_the_docs_example_is_the_one_the_docs_show() -> None:
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert EXAMPLE.read_text(encoding="utf-8").strip() in page
    assert f"bonbench run --config {EXAMPLE.relative_to(REPO)}" in page


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.splitlines()) == 1, out.err
    return out.err.rstrip("\n")


@pytest.mark.parametrize("content, line", [
    ("temprature = 0.5\n", "unknown key 'temprature' for `bonbench run`; did you mean temperature?"),
    ("zzz = 1\n", "unknown key 'zzz' for `bonbench run`; the keys are the flags of `bonbench run --help`"),
    ('n = "many"\n', "argument --n: invalid int value: 'many'"),
    ("n = 2.5\n", "argument --n: invalid int value: '2.5'"),
    ("n = 0\n", "--n must be >= 1 (got 0)"),
    ("top-p = [0.5, 0]\n", "--top-p must be in (0, 1] (got 0)"),
    ('temperature = "hot"\n', "--temperature takes a value or a comma list such as 0.1,0.7,1.0 (got 'hot')"),
    ('prompt-style = "fancy"\n', "argument --prompt-style: invalid choice: 'fancy' (choose from 'auto', 'base', 'chat')"),
    ('shard = "4/3"\n', "--shard 4/3: shards are numbered from 1, so i must be in 1..3"),
    ("n = [1, 2]\n", "n takes one value, not a list"),
    ("n = {a = 1}\n", "n takes one value, not a table"),
    ('unsafe-no-sandbox = "yes"\n', "unsafe-no-sandbox takes true or false (got 'yes')"),
    ('task_args = ["no-equals"]\n', "-T takes KEY=VALUE (got 'no-equals')"),
    ("n_boot = 5\nn-boot = 6\n", "n_boot and n-boot are the same setting; keep one"),
    ("unsafe_no_sandbox = false\nunsafe-no-sandbox = true\n",
     "unsafe_no_sandbox and unsafe-no-sandbox are the same setting; keep one"),
    ("n = \n", "not valid TOML: Invalid value (at line 1, column 5); fix it there (https://toml.io)"),
])
def test_a_bad_file_is_one_line_naming_it(content: str, line: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(content, encoding="utf-8")
    assert _error(["run", "--config", str(path), "--out", str(tmp_path / "out")], capsys) == f"error: {path}: {line}"
    assert [p.name for p in tmp_path.iterdir()] == ["bad.toml"]  # refused before anything is written


def test_files_that_cannot_be_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "none.toml"
    assert _error(["plot", "x", "--config", str(missing)], capsys) == \
        f"error: {missing}: no such file; --config takes a TOML file of the command's settings"
    assert _error(["plot", "x", "--config", str(tmp_path)], capsys) == \
        f"error: {tmp_path}: is a folder; --config takes a TOML file of the command's settings"
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'title = "caf\xe9"\n')
    assert _error(["eval-verifier", "r", "--config", str(latin)], capsys) == \
        f"error: {latin}: byte 12 is not UTF-8; save the file as UTF-8"
    locked = tmp_path / "locked.toml"
    locked.write_text("n = 1\n", encoding="utf-8")

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)  # root reads any file: the refusal is simulated
    assert _error(["run", "--config", str(locked)], capsys) == \
        f"error: {locked}: cannot be read (Permission denied); make it readable"


def test_a_bad_config_never_reads_as_a_gate_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gate.toml"
    path.write_text("alpha = 0.7\n", encoding="utf-8")
    line = _error(["gate", "--run", "r", "--config", str(path)], capsys)  # exit 2, never 1 ("regression")
    assert line == f"error: {path}: --alpha must be in (0, 0.5) (got 0.7)"
    from bonbench.apps.analysis.analysis_flags import main as analysis_main

    assert analysis_main(["gate", "--run", "r", "--config", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {path}: --alpha must be in (0, 0.5) (got 0.7)\n"


def test_old_spellings_in_a_file_work_and_warn_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "train.toml"
    path.write_text('task = "t"\nobjective = "mean"\nname = "n"\nmax-new-tokens = 12\nmicro_batch = 3\n', encoding="utf-8")
    ns = _parse(["train", "--config", str(path)])
    assert (ns.max_new_tokens, ns.micro_batch) == (12, 3)
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {path}: max-new-tokens is deprecated; use max-tokens (the old spelling goes in the next release)",
        f"warning: {path}: micro_batch is deprecated; use batch-size (the old spelling goes in the next release)"]
    path.write_text('task = "t"\nobjective = "mean"\nname = "n"\nmax-tokens = 12\nbatch_size = 3\n', encoding="utf-8")
    assert (_parse(["train", "--config", str(path)]).micro_batch, capsys.readouterr().err) == (3, "")


def test_config_given_twice_or_abbreviated_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.toml"
    path.write_text("n = 2\n", encoding="utf-8")
    assert _error(["run", "--config", str(path), "--config", str(path)], capsys) == \
        f"error: --config was given 2 times ({path}, {path}); give one file"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--conf", str(path)])
    assert exc.value.code == 2
    assert capsys.readouterr().err == f"error: --config {path} was not read; write it as --config {path} " \
                                      "(see `bonbench run --help`)\n"


def test_every_command_takes_config() -> None:
    leaves = list(settings_file.leaf_parsers(build_parser()))
    assert {p.prog for p in leaves} >= {f"bonbench {c}" for c in COMMANDS} | {"bonbench sandbox run"}
    for leaf in leaves:
        help_text = " ".join(leaf.format_help().split())
        assert "--config FILE.toml" in help_text and "flags given here override the file" in help_text, leaf.prog


def test_load_refuses_what_is_not_a_table_of_settings(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text("[run]\nn = 1\n", encoding="utf-8")  # no sections: one file holds one command's settings
    with pytest.raises(BonbenchError, match=r"run takes one value, not a table"):
        settings_file.read(subparser("gate"), path)
