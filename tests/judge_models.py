"""Judges for the tests, the GPU check and the benchmarks.

``build_tiny_judge``: a tiny local LLM judge, a 2-layer Llama whose word-level tokenizer has Yes / No
variants; ``reference_p_yes``: the judge's score written from its definition (one text at a time, no
bonbench code). ``JudgeServer``: a fault-injecting OpenAI-compatible judge on 127.0.0.1 (see its
docstring).
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

WORDS = ("Yes", "yes", "YES", "No", "no", "Maybe", "What", "is", "2", "+", "4", "5", "=", "Answer:", "GOOD:", "Problem:",
         "solution", "correct?", "the", "a", "of", "and", "step", "by")


def build_tiny_judge(folder: Path) -> Path:
    """A 2-layer Llama with a word-level tokenizer that has Yes/No variants (28-word vocab)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<bos>", "<eos>", "<unk>"]
    vocab = {w: i for i, w in enumerate([*specials, *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512, initializer_range=0.5,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                            unk_token="<unk>").save_pretrained(folder)
    return folder


def reference_p_yes(folder: Path, text: str, top: int, floor: float) -> float:
    """The definition, one text at a time: softmax of the next-token logits, the ``top`` most likely
    tokens, P(Yes variants) / P(Yes or No variants) among them."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        probs = torch.softmax(model(**tok(text, return_tensors="pt")).logits[0, -1].double(), dim=-1)
    best = torch.argsort(probs, descending=True)[:top].tolist()
    words = {i: str(tok.decode([i])).strip().lower() for i in best}
    yes = math.fsum(float(probs[i]) for i in best if words[i] == "yes")
    no = math.fsum(float(probs[i]) for i in best if words[i] == "no")
    return yes / (yes + no) if yes else floor


GOOD_TOP = {" Yes": math.log(0.5), "yes": math.log(0.1), " No": math.log(0.2), " Maybe": math.log(0.15)}
BAD_TOP = {" No": math.log(0.9), " Maybe": math.log(0.05)}
RATIONALE = "The steps check out."


class JudgeServer:
    def __init__(self, slow_s: float = 3.0) -> None:
        self.faults: deque[str] = deque()
        self.nologprobs = False
        self.rationale = RATIONALE  # the text every rationale request gets
        self.slow_s = slow_s
        self.bodies: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:  # a client that gave up on a slow answer
                    pass

            def do_GET(self) -> None:
                self._send(200, json.dumps({"object": "list", "data": [{"id": "judge-model", "root": "/models/j"}]}))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                fault = server.faults.popleft() if server.faults else "ok"
                server.bodies.append({"fault": fault, **body})
                if fault == "429":
                    return self._send(429, '{"error": {"message": "slow down"}}', {"Retry-After": "0.1"})
                if fault == "500":
                    return self._send(500, '{"error": {"message": "injected"}}')
                if fault == "malformed":
                    return self._send(200, '{"choices": [{"text": "Ye')
                if fault == "slow":
                    server.stopping.wait(server.slow_s)
                prompt = str(body.get("prompt", ""))
                if body.get("logprobs") is None:
                    choice = {"index": 0, "text": server.rationale + "\nIs the proposed solution correct? Answer",
                              "logprobs": None}
                else:
                    top = GOOD_TOP if "GOOD" in prompt else BAD_TOP
                    choice = {"index": 0, "text": " No", "logprobs": None if server.nologprobs else {
                        "tokens": [" No"], "token_logprobs": [top[" No"]], "top_logprobs": [top]}}
                usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": int(body.get("max_tokens", 1))}
                self._send(200, json.dumps({"id": "x", "object": "text_completion", "choices": [choice], "usage": usage}))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> JudgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
