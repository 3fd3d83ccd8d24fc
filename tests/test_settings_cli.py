"""The settings are the command line (issue 25, point 4; issue 29, point 5).

The flags of every command but ``sandbox run`` (run, score, merge, report, list, train,
train-verifier, eval-verifier, leaderboard, gate, plot) are the fields of their settings
dataclasses (``bonbench.core.settings``). Here: every field has a flag and a value
given on the command line comes back as that field's value (the expected values are built from the
field's type, not from the flag list, so a field without a flag, or one read into the wrong field,
fails); old spellings still work and warn once; a field added to a dataclass is in ``--help`` with
no other edit; bad values are one ``error:`` line.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from bonbench.api.sampler import sampler_names, sampler_options
from bonbench.apps import cli
from bonbench.apps.analysis.analysis_flags import GateRequest, LeaderboardRequest, PlotRequest
from bonbench.apps.cli import evaluation, verifiers
from bonbench.apps.cli.evaluation import EngineFlags, ListFlags, MergeFlags, ReportFlags, ScoreFlags
from bonbench.apps.cli.verifiers import EvalVerifierRequest
from bonbench.apps.trainer import train_flags as trainer_cli
from bonbench.apps.trainer.config import TrainConfig
from bonbench.apps.trainer.train_flags import ObjectiveFlags
from bonbench.apps.verifier_training.request import TrainVerifierRequest
from bonbench.core import flags, settings
from bonbench.core.errors import BonbenchError
from bonbench.core.settings import setting
from bonbench.pipeline.adaptive_spec import AdaptiveSpec
from bonbench.pipeline.shard import ShardSpec
from bonbench.run.request import RunRequest

# settings that are deliberately not flags, and why (the test below fails on any other)
NOT_FLAGS = {
    (RunRequest, "engine_args"): "the run command's EngineFlags, one flag per backend setting",
    (TrainConfig, "progress"): "library callers turn progress off; the command always shows it",
    (TrainConfig, "log_every"): "a library setting the command never exposed",
}
COMMANDS = {"run": (RunRequest, EngineFlags), "score": (ScoreFlags, RunRequest), "train": (TrainConfig, ObjectiveFlags),
            "train-verifier": (TrainVerifierRequest,), "eval-verifier": (EvalVerifierRequest,),
            "merge": (MergeFlags,), "report": (ReportFlags,), "list": (ListFlags,),
            "leaderboard": (LeaderboardRequest,), "gate": (GateRequest,), "plot": (PlotRequest,)}
# the flags of a command that are no setting: how the command runs, not what it computes
NOT_SETTINGS = {"--help", "--debug", "--config", "--dry-run"}


def subparser(command: str) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def sample_value(flag: settings.Flag, hint: Any) -> tuple[Any, list[str]]:
    """A value of the field other than its default (inside its range), and how it is written."""
    hint = settings._unwrap_optional(hint)
    origin = typing.get_origin(hint)
    if flag.choices is not None:
        value = next(c for c in reversed(flag.choices) if c != flag.default)
        return value, [str(value)]
    if flag.meta.get("parse"):  # --shard, and plot's --kind (a curve of the metric registry)
        return {"shard": (ShardSpec(2, 3), ["2/3"]), "kind": ("maj", ["maj"]),
                "adaptive": (AdaptiveSpec(4, 8), ["pilot=4,budget=8"])}[flag.name]
    if hint is bool:
        return not flag.default, []
    if origin in (dict, typing.Mapping) or str(origin) == "<class 'collections.abc.Mapping'>":
        return {"alpha": "1", "beta_gamma": "x y"}, ["alpha=1", "beta-gamma=x y"]
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if item is float:
            return (0.25, 0.75), ["0.25,0.75"]
        if flag.kind == "comma":
            return ("a", "b"), ["a,b"]
        if item is Path:
            return (Path("runs/a"), Path("runs/b")), ["runs/a", "runs/b"]
        return ("a", "b"), ["a", "b"]
    if hint is int:
        return 7, ["7"]
    if hint is float:
        return 0.375, ["0.375"]
    if hint is Path:
        return Path(f"some/{flag.name}"), [f"some/{flag.name}"]
    return f"v-{flag.name}", [f"v-{flag.name}"]


def flag_argv(cls: type, skip: tuple[str, ...] = ()) -> tuple[list[str], dict[str, Any]]:
    """argv setting every flag of ``cls`` to a non-default value, and the values expected back."""
    hints = typing.get_type_hints(cls)
    argv: list[str] = []
    expected: dict[str, Any] = {}
    for flag in settings.flags_of(cls):
        if flag.name in skip:
            continue
        value, words = sample_value(flag, hints[flag.name])
        expected[flag.name] = value
        if flag.meta.get("positional"):
            argv += words
        elif flag.kind in ("many", "pairs"):
            for word in words:
                argv += [flag.spelling, word]
        else:
            argv += [flag.spelling, *words]
    return argv, expected


def test_every_setting_is_a_flag_of_its_command() -> None:
    for command, classes in COMMANDS.items():
        options = {s for a in subparser(command)._actions for s in a.option_strings}
        positionals = {a.dest for a in subparser(command)._actions if not a.option_strings}
        for cls in classes:
            skipped = evaluation.SAMPLING_ONLY if command == "score" else ()
            for f in dataclasses.fields(cls):
                if (cls, f.name) in NOT_FLAGS or f.name in skipped:
                    assert not f.metadata.get("cli", True) or f.name in skipped, (cls, f.name)
                    continue
                spelling = settings.flag_spelling(f)
                assert spelling in options or f.name in positionals, f"{command}: {cls.__name__}.{f.name} has no flag"
                assert f.metadata["help"], f"{cls.__name__}.{f.name} has no help"


def test_run_flags_round_trip_into_a_run_request() -> None:
    argv, expected = flag_argv(RunRequest)
    engine_argv, engine = flag_argv(EngineFlags)
    args = cli.build_parser().parse_args(["run", *argv, *engine_argv])
    req = settings.from_args(RunRequest, args, engine_args=evaluation.engine_args(args))
    assert req == RunRequest(**expected, engine_args=engine)
    assert expected["shard"] == ShardSpec(2, 3) and expected["temperatures"] == (0.25, 0.75)
    assert expected["task_args"] == {"alpha": "1", "beta_gamma": "x y"}  # keys read with - as _


def test_score_takes_the_run_request_without_the_sampling_settings() -> None:
    argv, expected = flag_argv(RunRequest, skip=evaluation.SAMPLING_ONLY)
    args = cli.build_parser().parse_args(["score", "RUN", *argv])
    assert settings.from_args(RunRequest, args) == RunRequest(**expected)
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["score", "RUN", "--temperature", "0.5"])


def test_train_flags_round_trip_into_a_train_config() -> None:
    argv, expected = flag_argv(TrainConfig, skip=("objective", "objective_options", "full_finetune"))
    # vllm / openai rollouts serve LoRA adapters: full fine-tuning is read in a second parse below
    args = cli.build_parser().parse_args(["train", *argv, "--objective", "passk", "-O", "k=3", "--baseline", "none"])
    cfg = trainer_cli.train_config(args)
    want = TrainConfig(**expected, objective="passk", objective_options={"k": 3, "baseline": "none"})
    assert cfg == want and cfg.max_new_tokens == 7 and cfg.micro_batch == 7
    full = cli.build_parser().parse_args(["train", "--task", "t", "--objective", "mean", "--name", "n", "--full-finetune"])
    assert trainer_cli.train_config(full).full_finetune is True


def test_train_verifier_and_eval_verifier_flags_round_trip() -> None:
    argv, expected = flag_argv(TrainVerifierRequest)
    args = cli.build_parser().parse_args(["train-verifier", *argv])
    assert settings.from_args(TrainVerifierRequest, args) == TrainVerifierRequest(**expected)
    argv, expected = flag_argv(EvalVerifierRequest)
    args = cli.build_parser().parse_args(["eval-verifier", *argv])
    assert settings.from_args(EvalVerifierRequest, args) == EvalVerifierRequest(**expected)


def test_defaults_are_the_fields_defaults() -> None:
    args = cli.build_parser().parse_args(["train", "--task", "t", "--objective", "mean", "--name", "n"])
    assert trainer_cli.train_config(args) == TrainConfig(task="t", objective="mean", name="n", out=args.out,
                                                         model=args.model)
    args = cli.build_parser().parse_args(["run"])
    assert settings.from_args(RunRequest, args) == RunRequest(out=args.out, model=args.model, backend=args.backend)


def test_the_environment_gives_the_defaults_it_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BONBENCH_OUT", str(tmp_path))
    monkeypatch.setenv("BONBENCH_MODEL", "some/model")
    req = settings.from_args(RunRequest, cli.build_parser().parse_args(["run"]))
    assert (req.out, req.model) == (tmp_path, "some/model")
    # score --model names imported samples: the environment's model is not theirs
    assert settings.from_args(RunRequest, cli.build_parser().parse_args(["score", "RUN"])).model is None


def test_merge_report_and_list_flags_round_trip() -> None:
    argv, expected = flag_argv(MergeFlags)
    args = cli.build_parser().parse_args(["merge", *argv, "--n-boot", "9"])
    assert settings.from_args(MergeFlags, args) == MergeFlags(**expected) and args.n_boot == 9
    for command, cls in (("report", ReportFlags), ("list", ListFlags)):
        argv, expected = flag_argv(cls)
        assert settings.from_args(cls, cli.build_parser().parse_args([command, *argv])) == cls(**expected)


@pytest.mark.parametrize("command, cls", [("leaderboard", LeaderboardRequest), ("gate", GateRequest),
                                          ("plot", PlotRequest)])
def test_analysis_flags_round_trip(command: str, cls: type) -> None:
    argv, expected = flag_argv(cls)
    args = cli.build_parser().parse_args([command, *argv])
    assert settings.from_args(cls, args) == cls(**expected)
    assert expected.get("fit_families", ("a", "b")) == ("a", "b")  # plot's comma list read as a tuple


def test_every_flag_of_every_command_is_a_setting() -> None:
    """No command writes a flag by hand: each argument is a settings field's (or one of NOT_SETTINGS)."""
    for command in COMMANDS:
        for action in subparser(command)._actions:
            if not set(action.option_strings) & NOT_SETTINGS:
                assert isinstance(getattr(action, "setting", None), settings.Flag), (command, action.option_strings,
                                                                                    action.dest)


@pytest.mark.parametrize("command, old, new, field, value", [
    (["train", "--task", "t", "--objective", "mean", "--name", "n"], "--max-new-tokens", "--max-tokens", "max_new_tokens", 12),
    (["train", "--task", "t", "--objective", "mean", "--name", "n"], "--micro-batch", "--batch-size", "micro_batch", 3),
    (["train-verifier", "--samples-from", "RUN"], "--micro-batch", "--samples-per-step", "micro_batch", 4),
])
def test_old_spellings_work_and_warn_once(command: list[str], old: str, new: str, field: str, value: int,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    args = cli.build_parser().parse_args([*command, old, "99", old, str(value)])
    assert getattr(args, field) == value  # the last one given wins, as for the new spelling
    err = capsys.readouterr().err
    assert err == f"warning: {old} is deprecated; use {new} (the old spelling goes in the next release)\n"
    cli.build_parser().parse_args([*command, new, str(value)])
    assert capsys.readouterr().err == ""
    help_text = " ".join(subparser(command[0]).format_help().split())
    assert new in help_text and f"deprecated old spelling: {old}" in help_text
    assert f" {old} {old.lstrip('-').replace('-', '_').upper()}" not in help_text  # a note, never a flag of its own


@dataclass(frozen=True)
class _Throwaway:
    size: int = setting(3, range=flags.AT_LEAST_1, help="how many")
    mode: Literal["fast", "slow"] = setting("fast", help="which way")
    tags: tuple[str, ...] = setting((), flag="--tag", help="a tag, repeatable")


@dataclass(frozen=True)
class _ThrowawayPlusOne(_Throwaway):
    colour_depth: float | None = setting(None, range=flags.POSITIVE, help="bits per channel, the new setting")


def test_a_new_field_is_a_flag_with_no_other_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser(prog="x")
    settings.add_flags(parser, _ThrowawayPlusOne)
    help_text = parser.format_help()
    assert "--colour-depth COLOUR_DEPTH" in help_text and "bits per channel, the new setting" in help_text
    got = settings.from_args(_ThrowawayPlusOne, parser.parse_args(["--colour-depth", "2.5", "--tag", "a", "--mode", "slow"]))
    assert got == _ThrowawayPlusOne(colour_depth=2.5, tags=("a",), mode="slow")
    # the same through a real command: a field added to TrainVerifierRequest is in `train-verifier --help`
    extended = dataclasses.make_dataclass(
        "Extended", [("warm_start", str | None, setting(None, help="a folder to start from (new)"))],
        bases=(TrainVerifierRequest,), frozen=True)
    monkeypatch.setattr(verifiers, "TrainVerifierRequest", extended)
    assert "--warm-start WARM_START" in subparser("train-verifier").format_help()


@pytest.mark.parametrize("argv, code, line", [
    (["run", "--n", "many"], 2, "error: argument --n: invalid int value: 'many' (see `bonbench run --help`)"),
    (["run", "--prompt-style", "fancy"], 2, "error: argument --prompt-style: invalid choice: 'fancy' (choose from "
                                            "'auto', 'base', 'chat') (see `bonbench run --help`)"),
    (["run", "--task", "math500", "--temperature", "hot"], 1,
     "error: --temperature takes a value or a comma list such as 0.1,0.7,1.0 (got 'hot')"),
    (["run", "--task", "math500", "--temperature", "0.5,-1"], 1, "error: --temperature must be >= 0 (got -1)"),
    (["run", "--task", "math500", "--top-p", "0"], 1, "error: --top-p must be in (0, 1] (got 0)"),
    (["run", "--task", "math500", "-T", "no-equals"], 1, "error: -T takes KEY=VALUE (got 'no-equals')"),
    (["run", "--task", "math500", "--shard", "4/3"], 1, "error: --shard 4/3: shards are numbered from 1, so i must be in 1..3"),
    (["score", "RUN", "--seed", "1"], 2, "error: unrecognized arguments: --seed 1 (see `bonbench --help`)"),
    (["train", "--task", "t", "--objective", "passk", "--name", "n", "--steps", "0"], 1,
     "error: --steps must be >= 1 (got 0)"),
    (["train", "--task", "t", "--objective", "passk", "--name", "n", "--batch-size", "0"], 1,
     "error: --batch-size must be >= 1 (got 0)"),
    (["train", "--task", "t", "--objective", "passk", "--name", "n", "-O", "k=x"], 1,
     "error: objective 'passk' option k takes int, got 'x'"),
    (["train", "--task", "t", "--objective", "passk", "--name", "n", "--N", "4"], 1,
     "error: objective 'passk' has no --N; its options are: baseline, k, leave_p_out_form, p"),
    (["train-verifier", "--samples-from", "RUN", "--samples-per-step", "0"], 1,
     "error: --samples-per-step must be >= 1 (got 0)"),
    (["eval-verifier", "RUN", "--verifier", "oracle", "--seed", "-2"], 1, "error: --seed must be >= 0 (got -2)"),
    (["leaderboard", "RUN", "--n-boot", "0"], 1, "error: --n-boot must be >= 1 (got 0)"),
    (["leaderboard", "RUN", "--n-boot", "x"], 2,
     "error: argument --n-boot: invalid int value: 'x' (see `bonbench leaderboard --help`)"),
    (["gate", "--run", "RUN", "--baseline", "B", "--alpha", "0.5"], 2, "error: --alpha must be in (0, 0.5) (got 0.5)"),
    (["gate", "--run", "RUN", "--baseline", "B", "--tolerance", "-1"], 2, "error: --tolerance must be >= 0 (got -1)"),
    (["gate", "--baseline", "B"], 2, "error: the following arguments are required: --run (see `bonbench gate --help`)"),
    (["plot", "RUN", "--kind", "nope"], 1, "error: --kind 'nope' is no metric kind with a curve; use pass, bon, maj, max "
                                          "or another kind of `bonbench list metrics` (with its parameter: gpass:0.5)"),
    (["plot", "RUN", "--fit-families", ","], 1, "error: --fit-families needs at least one value"),
    (["plot", "RUN", "--holdout-fraction", "0"], 1, "error: --holdout-fraction must be in (0, 1) (got 0)"),
    (["list", "models"], 2, "error: argument what: invalid choice: 'models' (choose from 'tasks', 'verifiers', "
                            "'reward-models', 'backends', 'metrics', 'objectives', 'strategies', 'runs') "
                            "(see `bonbench list --help`)"),
])
def test_bad_values_are_one_line(argv: list[str], code: int, line: str, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [str(tmp_path / a) if a == "RUN" else a for a in argv]
    try:
        got = cli.main(argv)
    except SystemExit as exc:  # argparse's usage errors
        got = exc.code
    out = capsys.readouterr()
    assert (got, out.err.splitlines()) == (code, [line.replace("RUN", str(tmp_path / "RUN"))]), out.err
    assert list(tmp_path.iterdir()) == []  # checked before anything is read or written


def test_a_request_built_in_code_is_checked_like_the_flags() -> None:
    with pytest.raises(BonbenchError, match=r"^--folds must be >= 2 \(got 1\)$"):
        settings.check(TrainVerifierRequest(run_dirs=(), folds=1))
    with pytest.raises(BonbenchError, match=r"^--method must be one of head, lora \(got 'fancy'\)$"):
        settings.check(TrainVerifierRequest(run_dirs=(), method="fancy"))
    with pytest.raises(BonbenchError, match=r"^--kl-anchor must be one of ref, ema \(got 'base'\)$"):
        TrainConfig(task="t", objective="mean", name="n", kl_anchor="base")
    with pytest.raises(TypeError, match="has no setting nope"):
        settings.from_args(RunRequest, argparse.Namespace(), nope=1)


def test_a_range_is_written_once() -> None:
    # every command's flags are settings fields: flags keeps no second table of ranges
    assert not hasattr(flags, "RANGES") and not hasattr(flags, "check")
    assert settings.ranges(TrainVerifierRequest)["folds"] == (2, None, True, False)


def test_every_engine_flag_is_a_backend_option() -> None:
    # EngineFlags can not drift from the backends: each is an option of the same name of some backend
    records = [sampler_options(name) for name in sampler_names()]
    options = {f.name for cls in records if cls is not None for f in dataclasses.fields(cls)}
    assert {f.name for f in dataclasses.fields(EngineFlags)} <= options


def test_every_named_handler_resolves() -> None:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in action.choices.items():
        if name == "sandbox":
            continue
        assert callable(cli.handler_of(argparse.Namespace(handler=sub.get_default("handler")))), name
