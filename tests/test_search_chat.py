"""Chat prompts in the step samplers (issue 34): an instruct policy's chat template opens the
assistant turn and the steps continue it as raw text, alike on transformers, vLLM and
OpenAI-compatible servers (``bonbench.plugins.samplers.step_prompts``).

Two tiny policies built here: a Qwen2 with Qwen2.5-Instruct's ChatML template (no BOS) and a Gemma 3
whose template writes ``<bos>`` and whose tokenizer adds it too (the case where the template's BOS
text is dropped so the engine writes it once). The tests check the exact text each backend is sent
at each step, that the tokens read are the ordinary chat run's prompt followed by the steps, that
an hf chat continuation equals the ordinary sampler's chat sample under the same seed, the
OpenAI step sampler's refusals, and a chat search run end to end with its run id.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prm_models import build_math_shepherd
from search_models import build_policy
from test_sampler_hf import build_tiny_model
from test_search_openai import StepServer
from test_search_openai import step_sampler as openai_step_sampler
from test_search_run import one_error, run_args, run_dir

from bonbench.api.sampler import SampleRequest, SamplingParams, sample_seed
from bonbench.api.search.records import Prefix
from bonbench.apps.cli import main
from bonbench.core.errors import BonbenchError
from bonbench.core.models import ResolvedModel, resolve_model
from bonbench.core.records import Prompt
from bonbench.plugins.samplers import vllm_steps
from bonbench.plugins.samplers.hf import HFSampler
from bonbench.plugins.samplers.hf_steps import HFStepSampler
from bonbench.plugins.samplers.step_prompts import adds_bos, chat_prefix_text
from bonbench.plugins.samplers.vllm import VLLMSampler
from bonbench.plugins.samplers.vllm_steps import VLLMStepSampler

QUESTION = "What is 2+3?"
CHATML_PROMPT = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n"
                 "<|im_start|>assistant\n")
# the tiny Gemma's vocabulary is "abcde \n:P": its template is made of those characters and <bos>
GEMMA_TEMPLATE = ("{{ bos_token }}{% for m in messages %}P:{{ m['content'] | trim }}\n{% endfor %}"
                  "{% if add_generation_prompt %}a:{% endif %}")


def chat(content: str) -> Prompt:
    return Prompt("p", messages=({"role": "user", "content": content},))


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # newlines weigh more than in the base policy: ChatML's extra tokens made its steps run to max tokens
    return build_policy(tmp_path_factory.mktemp("chat") / "qwen-chat", chat=True, newline=1.2)


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> ResolvedModel:
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("chat-gemma")
    build_tiny_model(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = GEMMA_TEMPLATE
    tok.save_pretrained(folder)
    return resolve_model(str(folder))


def tokenizer(folder: str | Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def ordinary_ids(tok: Any, prompt: Prompt) -> list[int]:
    """The token ids an ordinary chat run's prompt is (``HFSampler`` / ``VLLMSampler``: template, no special tokens)."""
    text = tok.apply_chat_template(list(prompt.messages or ()), add_generation_prompt=True, tokenize=False)
    return list(tok(text, add_special_tokens=False)["input_ids"])


def test_the_chat_prefix_is_the_templated_turn_with_a_bos_written_once(qwen: Path, gemma: ResolvedModel) -> None:
    qtok, gtok = tokenizer(qwen), tokenizer(gemma.path)
    assert not adds_bos(qtok) and adds_bos(gtok)
    # ChatML: no BOS anywhere; the text is the template's, system message and opened assistant turn included
    assert chat_prefix_text(qtok, chat(QUESTION).messages, "q") == CHATML_PROMPT
    # Gemma: the template writes <bos> and the tokenizer adds it: the text leaves it to the tokenizer
    assert gtok.apply_chat_template([{"role": "user", "content": "ab cd"}], add_generation_prompt=True,
                                    tokenize=False) == "<bos>P:ab cd\na:"
    assert chat_prefix_text(gtok, chat("ab cd").messages, "g") == "P:ab cd\na:"
    # either way, the tokens an engine reads (special tokens added) are the ordinary chat run's
    for tok, content in ((qtok, QUESTION), (gtok, "ab cd")):
        text = chat_prefix_text(tok, chat(content).messages, "m")
        assert list(tok(text, add_special_tokens=True)["input_ids"]) == ordinary_ids(tok, chat(content))
    base = tokenizer(gemma.path)
    base.chat_template = None
    with pytest.raises(BonbenchError, match="has no chat template.*--prompt-style base"):
        chat_prefix_text(base, chat("ab").messages, "g")


def test_hf_chat_steps_continue_the_ordinary_chat_prompt(gemma: ResolvedModel) -> None:
    hf = HFSampler(gemma, seed=0, dtype="float32", batch_size=16, device="cpu")
    params = SamplingParams(temperature=1.0, max_tokens=10)
    steps = HFStepSampler(hf, params, "\n")
    prompt = chat("ab cd")
    text = steps.prompt_text(prompt)
    assert text == "P:ab cd\na:" and steps.prompt_text(Prompt("p", text="ab:")) == "ab:"
    # run to the end with an ordinary sample's seed, a chat prefix is that ordinary chat sample
    ordinary = [s for group in hf.generate([SampleRequest(prompt, tuple(range(6)))], params) for s in group]
    ends = steps.continue_prefixes([Prefix(text, (), seed=sample_seed(0, "p", i), to_end=True) for i in range(6)])
    assert [(c.text, c.tokens, c.prompt_tokens) for c in ends] == [(s.completion, s.n_tokens, s.prompt_tokens)
                                                                   for s in ordinary]
    assert len({c.text for c in ends}) > 1
    # with steps: the ordinary prompt's tokens, then the steps each ended by the delimiter (one token per character)
    got = steps.continue_prefixes([Prefix(text, ("ab", "c"), seed=s) for s in range(4)])
    assert all(c.prompt_tokens == len(ordinary_ids(hf.tokenizer, prompt)) + len("ab\nc\n") for c in got)


class _Engine:
    """Stands in for a vLLM ``LLM`` with prefix caching: records the prompts and answers one step each."""

    def __init__(self) -> None:
        config = SimpleNamespace(cache_config=SimpleNamespace(enable_prefix_caching=True),
                                 scheduler_config=SimpleNamespace(enable_chunked_prefill=False))
        self.llm_engine = SimpleNamespace(vllm_config=config)
        self.prompts: list[Any] = []

    def generate(self, prompts: list[Any], params: list[Any], **kw: Any) -> list[Any]:
        self.prompts += prompts
        comp = SimpleNamespace(text="x", finish_reason="stop", stop_reason="\n\n", token_ids=[7])
        return [SimpleNamespace(outputs=[comp], prompt_token_ids=[0, 1], num_cached_tokens=0) for _ in prompts]


def test_vllm_chat_steps_send_the_templated_text(qwen: Path, gemma: ResolvedModel,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_steps, "import_vllm", lambda: SimpleNamespace(SamplingParams=dict))  # no engine here
    for folder, content, want in ((str(qwen), QUESTION, CHATML_PROMPT), (gemma.path, "ab cd", "P:ab cd\na:")):
        tok, engine = tokenizer(folder), _Engine()
        fake = SimpleNamespace(llm=engine, tokenizer=tok, model="m", lora_request=None)
        steps = VLLMStepSampler(cast(VLLMSampler, fake), SamplingParams(temperature=1.0, max_tokens=8), "\n\n")
        text = steps.prompt_text(chat(content))
        steps.continue_prefixes([Prefix(text, (), seed=1), Prefix(text, ("s1", "s2"), seed=2)])
        assert engine.prompts == [want, want + "s1\n\ns2\n\n"]
        # vLLM tokenizes a text prompt with special tokens: the ordinary vllm chat run's prompt ids
        ordinary = VLLMSampler.vllm_prompt(cast(VLLMSampler, fake), chat(content))["prompt_token_ids"]
        assert list(tok(want, add_special_tokens=True)["input_ids"]) == ordinary


@pytest.mark.parametrize("which", ["qwen", "gemma"])
def test_openai_chat_steps_send_the_locally_templated_text(which: str, qwen: Path, gemma: ResolvedModel) -> None:
    root, content, want = ((str(qwen), QUESTION, CHATML_PROMPT) if which == "qwen"
                           else (gemma.path, "ab cd", "P:ab cd\na:"))  # the server's tokenizer adds the <bos>
    with StepServer(root=root) as server:
        steps = openai_step_sampler(server.url)
        text = steps.prompt_text(chat(content))
        got = steps.continue_prefixes([Prefix(text, (), seed=1), Prefix(text, ("s0.1",), seed=2)])
        sent = sorted([b for b in server.bodies if b.get("seed") in (1, 2)], key=lambda b: b["seed"])  # sent at once
    assert text == want and [b["prompt"] for b in sent] == [want, want + "s0.1\n\n"]
    assert all(b["stop"] == ["\n\n"] for b in sent) and [c.finish for c in got] == ["step", "step"]
    assert got[1].text == "s1.2"  # the scripted model read the step before it


def test_openai_chat_steps_without_the_tokenizer_or_its_template_are_one_line(qwen: Path, tmp_path: Path) -> None:
    with StepServer(root=str(tmp_path / "not-here")) as server:  # a folder on the server's machine only
        steps = openai_step_sampler(server.url)
        assert steps.prompt_text(Prompt("p", text="Q:")) == "Q:"  # a base prompt needs no tokenizer
        with pytest.raises(BonbenchError) as info:
            steps.prompt_text(chat(QUESTION))
    assert "\n" not in str(info.value) and "not on this machine" in str(info.value)
    assert "--prompt-style base" in str(info.value)
    base = tmp_path / "base"
    shutil.copytree(qwen, base)
    for name in ("chat_template.jinja", "tokenizer_config.json"):
        path = base / name
        if name.endswith(".jinja"):
            path.unlink(missing_ok=True)
        else:
            path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "chat_template"}))
    with StepServer(root=str(base)) as server, pytest.raises(BonbenchError, match="has no chat template"):
        openai_step_sampler(server.url).prompt_text(chat(QUESTION))


@pytest.fixture(scope="module")
def chat_models(qwen: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {"policy": qwen, "prm": build_math_shepherd(tmp_path_factory.mktemp("chat-prm") / "math-shepherd-mistral-7b-prm")}


def test_a_chat_search_run(chat_models: dict[str, Path], data_dir: Path, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    texts: list[str] = []
    real = HFSampler.continue_texts

    def recorded(self: HFSampler, batch: list[str], *args: Any) -> Any:
        texts.extend(batch)
        return real(self, batch, *args)

    monkeypatch.setattr(HFSampler, "continue_texts", recorded)
    out = tmp_path / "out"
    assert main(run_args(chat_models, data_dir, out, "-S", "width=2", "-S", "max_iterations=2",
                         "--prompt-style", "chat")) == 0
    root = run_dir(out)
    assert json.loads((root / "config.json").read_text())["hashed"]["prompt_style"] == "chat"
    head = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    assert texts and all(t.startswith(head) and t.count("<|im_start|>assistant\n") == 1 for t in texts)
    continued = [t.split("<|im_start|>assistant\n")[1] for t in texts]
    assert "" in continued and any(c.endswith("\n\n") and c.strip() for c in continued)  # steps continue the turn
    assert all(c == "" or c.endswith("\n\n") for c in continued)
    # the PRM read the question and the steps in its own format, not the chat template
    assert len(list((root / "scores").glob("prm-*.jsonl"))) == 1
    capsys.readouterr()
    # auto picks chat for an instruct model, as for an ordinary run: the same run
    assert main(run_args(chat_models, data_dir, out, "-S", "width=2", "-S", "max_iterations=2")) == 0
    assert run_dir(out) == root


def test_the_chat_template_names_a_search_run_as_it_names_an_ordinary_one(chat_models: dict[str, Path], data_dir: Path,
                                                                         tmp_path: Path) -> None:
    from bonbench.run.plan import plan
    from bonbench.run.request import RunRequest

    other = tmp_path / "qwen-chat-2"
    shutil.copytree(chat_models["policy"], other)
    jinja = other / "chat_template.jinja"
    if jinja.exists():
        jinja.write_text(jinja.read_text().replace("You are a helpful assistant.", "You are a careful assistant."))
    else:
        cfg = json.loads((other / "tokenizer_config.json").read_text())
        cfg["chat_template"] = cfg["chat_template"].replace("helpful", "careful")
        (other / "tokenizer_config.json").write_text(json.dumps(cfg))

    def run_id(model: Path, **kw: object) -> str:
        base = dict(task="math", task_args={"fewshot": "0"}, limit=2, n=4, verifier=f"prm:{chat_models['prm']}",
                    backend="hf", model=str(model), dtype="float32", data_dir=str(data_dir), out=tmp_path)
        return plan(RunRequest(**{**base, **kw})).runs[0].run_hash  # type: ignore[arg-type]  # test values

    for kind in ({}, {"strategy": "beam"}):
        chat_id = run_id(chat_models["policy"], **kind)
        assert run_id(chat_models["policy"], prompt_style="chat", **kind) == chat_id  # auto: chat
        assert run_id(chat_models["policy"], prompt_style="base", **kind) != chat_id
        assert run_id(other, **kind) != chat_id  # another template: another run, ordinary or search alike
    # the search hashes exactly the ordinary run's fields, and its search entry besides
    ordinary = plan(RunRequest(task="math", task_args={"fewshot": "0"}, limit=2, n=4, backend="hf",  # type: ignore[arg-type]  # test values
                               model=str(chat_models["policy"]), dtype="float32", data_dir=str(data_dir), out=tmp_path,
                               verifier=f"prm:{chat_models['prm']}")).runs[0].cfg.hashed()
    searched = plan(RunRequest(task="math", task_args={"fewshot": "0"}, limit=2, n=4, backend="hf", strategy="beam",  # type: ignore[arg-type]  # test values
                               model=str(chat_models["policy"]), dtype="float32", data_dir=str(data_dir), out=tmp_path,
                               verifier=f"prm:{chat_models['prm']}")).runs[0].cfg.hashed()
    assert {k: v for k, v in searched.items() if k != "search"} == ordinary


def test_a_chat_search_of_a_model_without_a_template_is_one_line(chat_models: dict[str, Path], data_dir: Path,
                                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = {"policy": build_policy(tmp_path / "base-policy"), "prm": chat_models["prm"]}
    code = main(run_args(models, data_dir, tmp_path / "out", "--prompt-style", "chat"))
    assert "chat template" in one_error(code, capsys.readouterr().err)
