"""Model resolution: errors that name the fix, chat/base detection, fingerprints, and the atomic,
locked conversion of the embedded model (the real GGUF conversion is replaced by a fake here; the
slow sampler tests exercise the real one)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import bonbench.core.models as models
from bonbench.core.cache import MARKER
from bonbench.core.errors import BonbenchError
from bonbench.core.models import EMBEDDED_FOLDER, embedded_model_dir, is_known_base, resolve_model


def _folder(path: Path, template: bool = False, weights: bytes = b"x" * 10) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    (path / "model.safetensors").write_bytes(weights)
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast"}
    if template:
        cfg["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (path / "tokenizer_config.json").write_text(json.dumps(cfg))
    return path


def test_missing_local_path_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(BonbenchError, match=r"model '.*nope' not found: pass a local folder or a hub id; .*--model gemma-3-270m"):
        resolve_model(str(tmp_path / "nope"))


def test_folder_without_config_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    with pytest.raises(BonbenchError, match="no config.json"):
        resolve_model(str(tmp_path / "m"))


def test_folder_without_weights_is_rejected(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "m")
    (folder / "model.safetensors").unlink()
    with pytest.raises(BonbenchError, match="no weight files"):
        resolve_model(str(folder))


def test_unknown_hub_id_offline_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))

    def offline(*args: object, **kwargs: object) -> None:
        raise ConnectionError("no network")

    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda *a, **k: None)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", offline)
    with pytest.raises(BonbenchError, match=r"model 'someorg/somemodel' not found: .*embedded default"):
        resolve_model("someorg/somemodel")


def test_hub_id_found_in_local_cache_is_pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    snap = _folder(tmp_path / "models--org--chatty" / "snapshots" / "abc123", template=True)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo, fname, **k: str(snap / fname))
    m = resolve_model("org/chatty-1b-instruct")
    assert (m.path, m.revision, m.is_chat) == ("org/chatty-1b-instruct", "abc123", True)
    assert m.fingerprint == "hub:org/chatty-1b-instruct@abc123"


def test_chat_detection(tmp_path: Path) -> None:
    assert resolve_model(str(_folder(tmp_path / "instr", template=True))).is_chat
    assert not resolve_model(str(_folder(tmp_path / "plain"))).is_chat
    # a base checkpoint that ships its instruct sibling's template stays a base model
    assert not resolve_model(str(_folder(tmp_path / "gemma-3-270m", template=True))).is_chat
    assert is_known_base("google/gemma-3-270m") and is_known_base("Qwen/Qwen2.5-0.5B")
    assert not is_known_base("google/gemma-3-270m-it") and not is_known_base("Qwen/Qwen2.5-0.5B-Instruct")


def test_fingerprint_tracks_config_and_weights(tmp_path: Path) -> None:
    a = resolve_model(str(_folder(tmp_path / "a")))
    b = resolve_model(str(_folder(tmp_path / "b")))
    c = resolve_model(str(_folder(tmp_path / "c", weights=b"y" * 11)))
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert a.name == str(tmp_path / "a") and a.revision is None


# ---------------------------------------------------------------- atomic conversion


class FakeConversion:
    """Stands in for the GGUF package and the transformers conversion; counts conversions."""

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.calls = 0
        self.delay = delay
        self.fail = fail
        self.pkg = SimpleNamespace(EXPECTED_SHA256="f" * 64, assemble=self.assemble)

    def assemble(self, target: str) -> str:
        Path(target).write_bytes(b"GGUF")
        return target

    def convert(self, gguf_path: Path, out_dir: Path, dtype: str = "bfloat16") -> None:
        self.calls += 1
        assert gguf_path.read_bytes() == b"GGUF"
        (out_dir / "config.json").write_text("{}")
        time.sleep(self.delay)
        if self.fail:
            raise KeyboardInterrupt  # an interrupted conversion
        (out_dir / "model.safetensors").write_bytes(b"w")

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeConversion:
        monkeypatch.setattr(models, "_embedded_source", lambda: (self.pkg, self.pkg.EXPECTED_SHA256))
        monkeypatch.setattr(models, "convert_gguf", self.convert)
        return self


def test_conversion_runs_once_and_leaves_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeConversion().install(monkeypatch)
    folder = embedded_model_dir(tmp_path)
    assert folder == tmp_path / EMBEDDED_FOLDER
    assert (folder / MARKER).is_file() and (folder / "model.safetensors").is_file()
    assert not (folder / "source.gguf").exists(), "the assembled GGUF is deleted after conversion"
    assert embedded_model_dir(tmp_path) == folder
    assert fake.calls == 1
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


def test_folder_without_marker_is_redone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeConversion().install(monkeypatch)
    half = tmp_path / EMBEDDED_FOLDER  # what an interrupted conversion of an older design would leave
    half.mkdir()
    (half / "config.json").write_text("{}")
    (half / "junk.bin").write_bytes(b"partial")
    stale_tmp = tmp_path / f".{EMBEDDED_FOLDER}.tmp-dead"
    stale_tmp.mkdir()
    folder = embedded_model_dir(tmp_path)
    assert fake.calls == 1
    assert not (folder / "junk.bin").exists() and (folder / MARKER).is_file()
    assert not stale_tmp.exists()


def test_marker_from_another_source_is_redone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeConversion().install(monkeypatch)
    embedded_model_dir(tmp_path)
    marker = tmp_path / EMBEDDED_FOLDER / MARKER
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "source_sha256": "0" * 64}))
    embedded_model_dir(tmp_path)
    assert fake.calls == 2


def test_interrupted_conversion_leaves_nothing_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeConversion(fail=True).install(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        embedded_model_dir(tmp_path)
    assert not (tmp_path / EMBEDDED_FOLDER).exists()
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    fake = FakeConversion().install(monkeypatch)
    assert (embedded_model_dir(tmp_path) / MARKER).is_file() and fake.calls == 1


def test_concurrent_callers_convert_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeConversion(delay=0.3).install(monkeypatch)
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(embedded_model_dir(tmp_path))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake.calls == 1 and len(results) == 3 and len(set(results)) == 1


def test_cache_root_follows_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path))
    assert models.cache_root() == tmp_path / "models"
    monkeypatch.delenv("BONBENCH_CACHE")
    assert models.cache_root() == Path.home() / ".cache" / "bonbench" / "models"


def test_embedded_default_resolves_to_converted_base_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeConversion().install(monkeypatch)
    monkeypatch.setenv("BONBENCH_CACHE", str(tmp_path))
    m = resolve_model(None)
    assert m.name == "gemma-3-270m" and not m.is_chat and m.revision is None
    assert Path(m.path) == tmp_path / "models" / EMBEDDED_FOLDER
    assert resolve_model("gemma-3-270m") == m
