"""Outcome reward models read through their chat template (``hf:...?input=chat``): tiny Llama-3 (pad = EOS,
BOS written by the template and added by the tokenizer), Qwen2 (no BOS) and template-less classifiers built
here; each score equals the model card's recipe computed by hand, batch sizes agree, and the input mode and
the template are part of the fingerprint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from orm_models import build_llama3_rm, build_qwen_rm
from prm_models import QWEN_TEMPLATE

from bonbench.api.reward import get_reward_model
from bonbench.api.verifier import get_verifier
from bonbench.core.errors import BonbenchError
from bonbench.plugins.rewards.chat import chat_ids

QUESTIONS = ["What is 3 + 4 minus 2?", "Find x if 2x + 3 = 11.", "What is 3 + 4 minus 2?", "Find x."]
ANSWERS = ["We compute 3 + 4 = 7, then 7 - 2 = 5. The answer is \\boxed{5}.", "x = 4",
           "Step 1: we add 3 + 4 = 7\nStep 2: then 7 - 2 = 5\nTherefore the final answer is 12.", ""]


@pytest.fixture(scope="module")
def rms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("orm")
    return {"llama3": build_llama3_rm(root / "llama3-rm"), "qwen": build_qwen_rm(root / "qwen-rm"),
            "plain": build_qwen_rm(root / "plain-rm", template=None)}


def card_ids(tok: Any, question: str, answer: str) -> list[int]:
    """Skywork-Reward-V2's card: render with tokenize=False, cut a leading BOS string, tokenize (adds BOS)."""
    text = tok.apply_chat_template([{"role": "user", "content": question}, {"role": "assistant", "content": answer}],
                                   tokenize=False)
    if tok.bos_token is not None and text.startswith(tok.bos_token):
        text = text[len(tok.bos_token):]
    return list(tok(text)["input_ids"])


def card_scores(folder: Path, texts: Sequence[list[int]]) -> list[float]:
    """The head read at each sequence's last token, one unpadded forward each: the backbone's last hidden
    state through ``score`` by hand, so no pad-token rule of the library is involved."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    out = []
    with torch.inference_mode():
        for ids in texts:
            hidden = model.model(input_ids=torch.tensor([ids])).last_hidden_state
            out.append(float(model.score(hidden[0, -1])[0]))
    return out


@pytest.mark.parametrize("family", ["llama3", "qwen"])
def test_chat_scores_equal_the_model_card_recipe(rms: dict[str, Path], family: str) -> None:
    from transformers import AutoTokenizer

    folder = rms[family]
    tok = AutoTokenizer.from_pretrained(folder)
    want = card_scores(folder, [card_ids(tok, q, a) for q, a in zip(QUESTIONS, ANSWERS, strict=True)])
    model = get_reward_model(f"hf:{folder}?batch_size=3")
    assert model.input == "chat"  # type: ignore[attr-defined]  # the default when the tokenizer has a template
    assert model.score(QUESTIONS, ANSWERS) == pytest.approx(want, abs=1e-5)


def test_llama3_template_and_tokenizer_give_one_bos(rms: dict[str, Path]) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(rms["llama3"])
    bos = tok.bos_token_id
    text = tok.apply_chat_template([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], tokenize=False)
    assert list(tok(text)["input_ids"][:2]) == [bos, bos]  # the pitfall exists in this tokenizer
    ids = chat_ids(tok, "What is 3 + 4?", "7")
    assert ids[0] == bos and ids.count(bos) == 1
    rendered = tok.apply_chat_template([{"role": "user", "content": "What is 3 + 4?"}, {"role": "assistant", "content": "7"}])
    assert ids == list(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)  # ArmoRM's card: tokenize=True
    qwen = AutoTokenizer.from_pretrained(rms["qwen"])  # no BOS anywhere: nothing to strip
    assert chat_ids(qwen, "q", "a") == list(qwen(qwen.apply_chat_template(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], tokenize=False))["input_ids"])


def test_pad_equal_to_eos_reads_the_last_token_whatever_the_batch(rms: dict[str, Path]) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = rms["llama3"]
    tok = AutoTokenizer.from_pretrained(folder)
    ids = [card_ids(tok, q, a) for q, a in zip(QUESTIONS, ANSWERS, strict=True)]
    assert all(x[-1] == tok.pad_token_id for x in ids)  # the template ends the answer with the pad token
    want = card_scores(folder, ids)
    # the library's own pooling with pad = EOS reads another position, even unpadded: what goes wrong
    naive = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.inference_mode():
        wrong = [float(naive(input_ids=torch.tensor([x])).logits[0, 0]) for x in ids]
    assert max(abs(a - b) for a, b in zip(wrong, want, strict=True)) > 1e-3
    one = get_reward_model(f"hf:{folder}?batch_size=1").score(QUESTIONS, ANSWERS)
    many = get_reward_model(f"hf:{folder}?batch_size=4").score(QUESTIONS, ANSWERS)
    assert one == pytest.approx(want, abs=1e-5)
    assert many == pytest.approx(one, abs=1e-4)


def test_no_template_means_concat_with_the_fingerprint_rows_were_stored_under(rms: dict[str, Path]) -> None:
    from bonbench.plugins.rewards.hf import resolve_source

    folder = rms["plain"]
    model = get_reward_model(f"hf:{folder}")
    assert model.input == "concat"  # type: ignore[attr-defined]  # an HFClassifierReward, not the protocol
    weights = resolve_source(str(folder))[1]
    before = {"weights": weights, "label": 0, "read": "logit", "input": "concat", "max_length": 2048, "dtype": "float32"}
    assert model.fingerprint == "sha256:" + hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:16]
    with pytest.raises(BonbenchError, match="has no chat template.*input=concat"):
        get_verifier(f"rm:hf:{folder}?input=chat")  # checked when the run is planned


def test_the_input_mode_and_the_template_are_in_the_fingerprint(rms: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    folder = rms["qwen"]
    prints = {mode: get_reward_model(f"hf:{folder}?input={mode}").fingerprint for mode in ("chat", "concat", "completion")}
    assert len(set(prints.values())) == 3
    assert get_reward_model(f"hf:{folder}").fingerprint == prints["chat"]
    other = shutil.copytree(folder, tmp_path / "qwen-rm")
    config = json.loads((other / "tokenizer_config.json").read_text())
    config["chat_template"] = QWEN_TEMPLATE.replace("\n", "\n\n", 1)
    (other / "tokenizer_config.json").write_text(json.dumps(config))
    (other / "chat_template.jinja").unlink(missing_ok=True)
    # same weights, another template: other scores, so another fingerprint (the folder hash sees the tokenizer files
    # too, so compare the template hash the fingerprint carries)
    from transformers import AutoTokenizer

    from bonbench.plugins.rewards.chat import template_hash

    assert template_hash(AutoTokenizer.from_pretrained(other)) != template_hash(AutoTokenizer.from_pretrained(folder))
    assert get_reward_model(f"hf:{other}").fingerprint != prints["chat"]


def test_a_reward_token_model_is_one_line_before_any_weights(tmp_path: Path) -> None:
    folder = tmp_path / "internlm2-7b-reward"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["InternLM2ForRewardModel"], "model_type": "internlm2", "reward_token_id": 92527,
        "auto_map": {"AutoConfig": "configuration_internlm2.InternLM2Config",
                     "AutoModel": "modeling_internlm2.InternLM2ForRewardModel"}}))
    with pytest.raises(BonbenchError, match="reward token and its own get_score") as err:
        get_verifier(f"rm:hf:{folder}?trust_remote_code=true")
    assert "\n" not in str(err.value)


ARMO_CODE = '''
from dataclasses import dataclass

import torch
from transformers import LlamaModel, LlamaPreTrainedModel
from transformers.utils import ModelOutput


@dataclass
class GatedOutput(ModelOutput):
    rewards: torch.FloatTensor = None
    score: torch.FloatTensor = None
    logits: torch.FloatTensor = None


class TinyGatedRM(LlamaPreTrainedModel):
    """ArmoRM's shape: objectives read at the token before the first pad, mixed into one score per text."""

    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaModel(config)
        self.regression_layer = torch.nn.Linear(config.hidden_size, 3, bias=False)
        self.gate = torch.nn.Linear(config.hidden_size, 3)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.model(input_ids, attention_mask=attention_mask).last_hidden_state
        ends = torch.eq(input_ids, self.config.pad_token_id).int().argmax(-1) - 1
        ends = ends % input_ids.shape[-1]
        last = hidden[torch.arange(input_ids.shape[0]), ends]
        rewards = self.regression_layer(last)
        score = (torch.softmax(self.gate(hidden[:, 0]), dim=-1) * rewards).sum(dim=1)
        return GatedOutput(rewards=rewards, score=score, logits=score)
'''


def test_remote_code_model_with_one_score_per_text(tmp_path: Path) -> None:
    """ArmoRM's format: remote code behind AutoModelForSequenceClassification, pad = EOS, the pooled
    position taken before the *first* pad (older transformers' rule), and a 1-D ``score`` output."""
    import importlib.util
    import sys

    import torch
    from transformers import AutoTokenizer

    folder = build_llama3_rm(tmp_path / "armo-rm")
    (folder / "modeling_tiny_armo.py").write_text(ARMO_CODE)
    spec = importlib.util.spec_from_file_location("modeling_tiny_armo", folder / "modeling_tiny_armo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["modeling_tiny_armo"] = module
    spec.loader.exec_module(module)
    config = json.loads((folder / "config.json").read_text())
    from transformers import LlamaConfig

    torch.manual_seed(3)
    model = module.TinyGatedRM(LlamaConfig(**{k: v for k, v in config.items() if k not in ("architectures",)})).eval()
    model.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForSequenceClassification": "modeling_tiny_armo.TinyGatedRM"}
    config["architectures"] = ["TinyGatedRM"]
    (folder / "config.json").write_text(json.dumps(config))
    tok = AutoTokenizer.from_pretrained(folder)
    ids = [card_ids(tok, q, a) for q, a in zip(QUESTIONS, ANSWERS, strict=True)]
    with torch.inference_mode():
        want = []
        for x in ids:  # the card's forward, read at the last token by hand (the pad rule would stop at the first eot)
            last = model.model(input_ids=torch.tensor([x])).last_hidden_state
            gate = torch.softmax(model.gate(last[:, 0]), dim=-1)
            want.append(float((gate * model.regression_layer(last[:, -1])).sum()))
    with pytest.raises(BonbenchError, match="trust_remote_code=true"):
        get_reward_model(f"hf:{folder}")
    one = get_reward_model(f"hf:{folder}?trust_remote_code=true&batch_size=1").score(QUESTIONS, ANSWERS)
    many = get_reward_model(f"hf:{folder}?trust_remote_code=true&batch_size=4").score(QUESTIONS, ANSWERS)
    assert one == pytest.approx(want, abs=1e-5)
    assert many == pytest.approx(one, abs=1e-4)
    # a config that declares two labels (transformers' default when it names none): the label is asked for,
    # and label=0&read=logit, the documented ArmoRM command, reads the one score raw
    config["num_labels"], config["id2label"] = 2, {"0": "LABEL_0", "1": "LABEL_1"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(BonbenchError, match="has 2 labels"):
        get_verifier(f"rm:hf:{folder}?trust_remote_code=true")
    armo = f"hf:{folder}?trust_remote_code=true&label=0&read=logit&batch_size=4"
    assert get_reward_model(armo).score(QUESTIONS, ANSWERS) == pytest.approx(want, abs=1e-5)


def test_a_folder_without_a_trained_head_is_one_line(tmp_path: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = build_llama3_rm(tmp_path / "base-lm")
    config = LlamaConfig.from_pretrained(folder)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)  # a language model where a reward model was expected
    with pytest.raises(BonbenchError, match="no trained weights for score.weight"):
        get_reward_model(f"hf:{folder}")


@pytest.mark.slow
def test_vllm_pooling_reads_the_chat_as_hf_does(tmp_path: Path) -> None:
    """The Llama-3 reward model (chat template, one BOS, pad = EOS) through vLLM's pooling runner; skipped
    where vLLM cannot build the engine."""
    # head size 64: vLLM's CPU attention kernels take 32, 64, 80, ... not the tiny model's 8
    folder = build_llama3_rm(tmp_path / "vllm-llama3-rm", hidden_size=128, num_attention_heads=2, num_key_value_heads=2)
    try:
        model = get_reward_model(f"vllm:{folder}?dtype=float32&gpu_memory_utilization=0.5")
    except BonbenchError:
        raise
    except Exception as exc:  # noqa: BLE001  a vLLM build without this pooling model: say so, do not fail
        pytest.skip(f"vLLM cannot run this pooling model here: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    assert model.input == "chat"  # type: ignore[attr-defined]  # a VllmClassifierReward, not the protocol
    hf = get_reward_model(f"hf:{folder}?batch_size=4")
    assert model.score(QUESTIONS, ANSWERS) == pytest.approx(hf.score(QUESTIONS, ANSWERS), abs=1e-3)
