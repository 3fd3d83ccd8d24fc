"""The transformers backend on a tiny randomly initialised Gemma 3 (built here, nothing downloaded):
sampling frequencies vs softmax (chi-square), KV-cache copying vs separate runs, stop strings,
seeding; plus one slow test on the real embedded Gemma 3 270M."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from scipy.stats import chisquare

from bonbench.api.sampler import SampleRequest, SamplingParams
from bonbench.core.models import ResolvedModel, resolve_model
from bonbench.core.records import Prompt
from bonbench.plugins.samplers.hf import HFSampler, find_stop, policy_logits, sample_tokens

CHARS = list("abcde \n:P")
SPECIALS = ["<pad>", "<bos>", "<eos>"]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIALS + CHARS)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))  # no merges: one char per token
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>")


def build_tiny_model(folder: Path, init_std: float = 0.15, seed: int = 0) -> ResolvedModel:
    """A 2-layer Gemma 3 (one sliding-window layer of width 4, one global layer), 12-token vocab."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    cfg = Gemma3TextConfig(
        vocab_size=len(SPECIALS) + len(CHARS),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=256,
        initializer_range=init_std,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    Gemma3ForCausalLM(cfg).save_pretrained(folder)
    _tokenizer().save_pretrained(folder)
    return resolve_model(str(folder))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> ResolvedModel:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


def _sampler(model: ResolvedModel, seed: int = 0, batch_size: int = 64) -> HFSampler:
    return HFSampler(model, seed=seed, dtype="float32", batch_size=batch_size, device="cpu")


def _req(pid: str, text: str, n: int, stop: tuple[str, ...] = ()) -> SampleRequest:
    return SampleRequest(Prompt(pid, text=text, stop=stop), tuple(range(n)))


def _collect(sampler: HFSampler, requests: list[SampleRequest], params: SamplingParams) -> dict:
    return {s.key: s for group in sampler.generate(requests, params) for s in group}


def _expected_probs(sampler: HFSampler, text: str, temperature: float, top_p: float) -> torch.Tensor:
    ids = torch.tensor([sampler.tokenizer(text)["input_ids"]])
    with torch.no_grad():
        logits = sampler.lm(input_ids=ids).logits[:, -1, :]
    return policy_logits(logits, temperature, top_p).softmax(-1)[0]


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.6, 1.0), (1.3, 0.8)])
def test_next_token_frequencies_match_policy(tiny: ResolvedModel, temperature: float, top_p: float) -> None:
    sampler = _sampler(tiny, batch_size=4000)
    text = "ab cd"
    probs = _expected_probs(sampler, text, temperature, top_p)
    assert probs.max() < 0.9, "the tiny model must give a spread-out distribution for this test to mean anything"
    n = 4000
    out = _collect(sampler, [_req("p", text, n)], SamplingParams(temperature=temperature, top_p=top_p, max_tokens=1))
    assert len(out) == n
    # one char per token; empty text is a special token: EOS ends with "stop", pad/bos with "length"
    tok = sampler.tokenizer
    counts = Counter()
    for s in out.values():
        if s.completion:
            counts[tok.convert_tokens_to_ids(s.completion)] += 1
        else:
            counts["eos" if s.finish_reason == "stop" else "other"] += 1
    bins = {i: probs[i].item() for i in range(len(probs)) if i not in (0, 1, 2)}
    bins["eos"] = probs[2].item()
    bins["other"] = probs[0].item() + probs[1].item()
    kept = {k: p for k, p in bins.items() if p * n >= 5}
    rest = 1.0 - sum(kept.values())
    observed = [counts[k] for k in kept] + [n - sum(counts[k] for k in kept)]
    expected = [p * n for p in kept.values()] + [rest * n]
    if rest * n < 1e-9:  # top-p removed the tail: nothing may be observed there
        assert observed[-1] == 0, f"{observed[-1]} samples outside the top-p nucleus"
        observed, expected = observed[:-1], expected[:-1]
    assert len(observed) >= 3
    scale = sum(observed) / sum(expected)  # chisquare wants equal totals; they differ only by rounding
    result = chisquare(observed, [e * scale for e in expected])
    assert result.pvalue > 1e-3, (observed, expected)


def test_logprob_is_policy_logprob(tiny: ResolvedModel) -> None:
    sampler = _sampler(tiny)
    text = "ab cd"
    params = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=1)
    probs = _expected_probs(sampler, text, 0.7, 0.9)
    for s in _collect(sampler, [_req("p", text, 50)], params).values():
        if s.completion:
            tid = sampler.tokenizer.convert_tokens_to_ids(s.completion)
            assert s.logprob == pytest.approx(math.log(probs[tid].item()), abs=1e-4)
            assert s.n_tokens == 1
        assert s.prompt_tokens == len(sampler.tokenizer(text)["input_ids"])  # the prompt the policy read, BOS included


def test_inverse_cdf_never_picks_zero_probability_tokens() -> None:
    logits = torch.tensor([[0.0, float("-inf"), 0.0, float("-inf")]]).repeat(1000, 1)
    u = torch.rand(1000, generator=torch.Generator().manual_seed(0))
    u[0], u[1] = 0.0, 1.0 - 1e-7  # the edges of [0, 1)
    tokens, logp = sample_tokens(logits, 1.0, 1.0, u)
    assert set(tokens.tolist()) == {0, 2}
    assert torch.allclose(logp, torch.full_like(logp, math.log(0.5)))


def test_top_p_keeps_smallest_nucleus() -> None:
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    pol = policy_logits(probs.log(), 1.0, 0.8).softmax(-1)[0]
    # 0.5 + 0.3 reaches 0.8: the 0.15 and 0.05 tokens go; the kept two are renormalised
    assert torch.allclose(pol, torch.tensor([0.625, 0.375, 0.0, 0.0]), atol=1e-6)


def test_kv_cache_copies_give_same_logits_as_separate_runs(tiny: ResolvedModel) -> None:
    sampler = _sampler(tiny)
    prompts = [sampler.tokenizer(t)["input_ids"] for t in ("abcde abcd", "ea", "dd:P\nc")]  # unequal: padding
    gather = [0, 0, 1, 2, 2, 2]
    cont = torch.tensor([3, 4, 5, 6, 7, 8])  # a different next token per row: the copies diverge
    cont2 = torch.tensor([9, 10, 11, 3, 4, 5])
    with torch.no_grad():
        cache, logits0, mask, pos = sampler._prefill(prompts, gather)
        logits1, mask = sampler._step(cache, cont, mask, pos)
        logits2, _ = sampler._step(cache, cont2, mask, pos + 1)
        for r, p in enumerate(gather):
            full = torch.tensor([prompts[p] + [int(cont[r]), int(cont2[r])]])
            ref = sampler.lm(input_ids=full).logits[0]
            assert torch.allclose(logits0[r], ref[-3], atol=1e-4)
            assert torch.allclose(logits1[r], ref[-2], atol=1e-4)
            assert torch.allclose(logits2[r], ref[-1], atol=1e-4)


def test_find_stop_earliest() -> None:
    assert find_stop("x\n\nProblem: y", ["Problem", "\n\n"]) == 1
    assert find_stop("abc", ["zz", ""]) is None


def test_stop_strings_trim_completion(tiny: ResolvedModel) -> None:
    sampler = _sampler(tiny)
    stop = ("ab", "e\n")
    n, max_tokens = 64, 40
    out = _collect(sampler, [_req("p", "cd", n, stop=stop)], SamplingParams(temperature=1.5, max_tokens=max_tokens))
    assert len(out) == n
    by_stop = 0
    for s in out.values():
        assert not any(x in s.completion for x in stop), s.completion
        assert s.finish_reason in ("stop", "length")
        if s.finish_reason == "length":
            assert s.n_tokens == max_tokens
        elif s.n_tokens == len(s.completion) + 2:  # one char per token: the 2-char stop string was cut off
            by_stop += 1
        assert s.n_tokens <= max_tokens and s.logprob < 0
    assert by_stop >= 5, "the stop strings should have ended several samples"


def test_request_stop_and_params_stop_both_apply(tiny: ResolvedModel) -> None:
    sampler = _sampler(tiny)
    out = _collect(sampler, [_req("p", "cd", 16, stop=("a",))], SamplingParams(stop=("b",), max_tokens=30, temperature=1.5))
    assert all("a" not in s.completion and "b" not in s.completion for s in out.values())


def test_seed_reproducible_and_batch_independent(tiny: ResolvedModel) -> None:
    reqs = [_req("p1", "ab", 5), _req("p2", "cde c", 3)]
    params = SamplingParams(temperature=1.0, max_tokens=12, seed=7)
    a = _collect(_sampler(tiny, seed=7, batch_size=8), reqs, params)
    b = _collect(_sampler(tiny, seed=7, batch_size=3), reqs, params)  # other chunking, other batch mates
    c = _collect(_sampler(tiny, seed=8), reqs, SamplingParams(temperature=1.0, max_tokens=12, seed=8))
    assert set(a) == {("p1", i) for i in range(5)} | {("p2", i) for i in range(3)}
    assert [a[k].completion for k in sorted(a)] == [b[k].completion for k in sorted(a)]
    for k in a:
        assert a[k].logprob == pytest.approx(b[k].logprob, abs=1e-4)
    assert [a[k].completion for k in sorted(a)] != [c[k].completion for k in sorted(a)]
    # samples of one prompt differ from each other (each index has its own random stream)
    assert len({a[("p1", i)].completion for i in range(5)}) > 1


def test_resume_indices_reproduce_the_same_samples(tiny: ResolvedModel) -> None:
    sampler = _sampler(tiny, seed=3)
    params = SamplingParams(max_tokens=10, seed=3)
    full = _collect(sampler, [SampleRequest(Prompt("p", text="ab"), (0, 1, 2, 3))], params)
    part = _collect(sampler, [SampleRequest(Prompt("p", text="ab"), (2, 3))], params)
    assert set(part) == {("p", 2), ("p", 3)}
    assert all(part[k].completion == full[k].completion for k in part)


def test_chunks_stream_in_batch_size_groups(tiny: ResolvedModel) -> None:
    sampler = _sampler(tiny, batch_size=4)
    groups = list(sampler.generate([_req("a", "ab", 6), _req("b", "c", 3)], SamplingParams(max_tokens=3)))
    assert [len(g) for g in groups] == [4, 4, 1]
    assert sorted(s.key for g in groups for s in g) == sorted([("a", i) for i in range(6)] + [("b", i) for i in range(3)])


def test_greedy_is_deterministic_and_reports_raw_logprob(tiny: ResolvedModel) -> None:
    sampler = _sampler(tiny)
    out = _collect(sampler, [_req("p", "ab", 3)], SamplingParams(temperature=0.0, max_tokens=1))
    assert len({s.completion for s in out.values()}) == 1
    probs = _expected_probs(sampler, "ab", 1.0, 1.0)
    assert out[("p", 0)].logprob == pytest.approx(math.log(probs.max().item()), abs=1e-4)


def test_chat_prompt_without_template_is_a_user_error(tiny: ResolvedModel) -> None:
    from bonbench.core.errors import BonbenchError

    sampler = _sampler(tiny)
    req = SampleRequest(Prompt("p", messages=({"role": "user", "content": "hi"},)), (0,))
    with pytest.raises(BonbenchError, match="no chat template"):
        _collect(sampler, [req], SamplingParams(max_tokens=2))


# ---------------------------------------------------------------- the real model (CI only)

FEW_SHOT = (
    "Problem: What is 2+3?\nSolution: 2+3=5. The answer is $\\boxed{5}$.\n\n"
    "Problem: What is 7*6?\nSolution: 7*6=42. The answer is $\\boxed{42}$.\n\n"
    "Problem: What is 12*13?\nSolution:"
)


@pytest.fixture(scope="module")
def embedded_model() -> ResolvedModel:
    # converted once per machine into the user cache; the vllm tests reuse the same folder
    return resolve_model(None)


@pytest.mark.slow
def test_real_gemma_tokenizer_adds_bos(embedded_model: ResolvedModel) -> None:
    """Without <bos> Gemma degenerates (repeats its prompt); the converted tokenizer must add it."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(embedded_model.path)
    assert tok("def f():").input_ids[0] == tok.bos_token_id


@pytest.mark.slow
def test_real_gemma_few_shot(embedded_model: ResolvedModel) -> None:
    sampler = HFSampler(embedded_model, seed=0, batch_size=8)
    params = SamplingParams(temperature=0.7, max_tokens=40, stop=("\n\nProblem:",), seed=0)
    out = _collect(sampler, [_req("q", FEW_SHOT, 4)], params)
    assert len(out) == 4
    for s in out.values():
        assert "Problem:" not in s.completion
        assert s.finish_reason in ("stop", "length") and 0 < s.n_tokens <= 40
        assert s.logprob is not None and -200 < s.logprob < 0
    # a base model continuing this format closes the solution with the boxed answer most of the time
    assert sum("boxed" in s.completion for s in out.values()) >= 2, [s.completion for s in out.values()]
    assert any(s.finish_reason == "stop" for s in out.values())


def test_dry_run_picks_the_default_backend_without_importing_vllm(tmp_path: Path, data_dir: Path) -> None:
    """Choosing the backend looks vllm up but does not import it (15-45 s): a dry run stays quick."""
    import importlib.util
    import json
    import subprocess
    import sys

    folder = tmp_path / "tiny"
    build_tiny_model(folder)
    code = ("import sys; from bonbench.apps.cli import main; "
            f"rc = main(['run', '--task', 'math500', '--limit', '1', '--model', {str(folder)!r}, "
            f"'--data-dir', {str(data_dir)!r}, "
            f"'--out', {str(tmp_path / 'results')!r}, '--dry-run']); "
            "print('VLLM_IMPORTED', 'vllm' in sys.modules); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "VLLM_IMPORTED False"
    backend = json.loads(proc.stdout[:proc.stdout.index("\n}\n") + 2])["config"]["backend"]
    assert backend == ("vllm" if importlib.util.find_spec("vllm") is not None else "hf")
