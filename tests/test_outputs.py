"""``bonbench.core.outputs`` in-process: atomic writers keep the old file on a full disk or a read-only folder
(errors raised by monkeypatched os calls, so these run as any user, root included), staged output
folders, and the JSON/JSONL readers' one-line errors."""

from __future__ import annotations

import errno
import gzip
import json
import os
from pathlib import Path

import pytest

from bonbench.core import outputs
from bonbench.core.data import read_jsonl
from bonbench.core.errors import BonbenchError


def _fail(code: int):
    def raiser(*args, **kwargs):
        raise OSError(code, os.strerror(code))
    return raiser


@pytest.mark.parametrize("where", ["fsync", "replace"])
@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "no space left writing"), (errno.EROFS, "cannot write"),
                                         (errno.EACCES, "cannot write")])
def test_failed_write_keeps_the_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str,
                                                     code: int, words: str) -> None:
    target = tmp_path / "out.json"
    target.write_bytes(b'{"old": true}\n')
    monkeypatch.setattr(outputs.os, where, _fail(code))
    with pytest.raises(BonbenchError, match=f"^{words} {target}") as exc:
        outputs.write_json(target, {"new": True})
    assert "\n" not in str(exc.value)
    monkeypatch.undo()
    assert target.read_bytes() == b'{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_write_gives_a_new_files_usual_mode_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    outputs.write_text(target, "one")
    outputs.write_text(target, "two")
    umask = os.umask(0)
    os.umask(umask)
    assert target.read_text() == "two" and (target.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_folder_and_file_mix_ups(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    with pytest.raises(BonbenchError, match="is a folder, not a file"):
        outputs.write_text(tmp_path / "d", "y")
    with pytest.raises(BonbenchError, match="is a file, but a folder is needed"):
        outputs.ensure_dir(tmp_path / "f")
    with pytest.raises(BonbenchError, match="is a file, but a folder is needed"):
        outputs.write_text(tmp_path / "f" / "inner.txt", "y")
    assert (tmp_path / "f").read_text() == "x"


def test_staged_dir_moves_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "a.png").write_bytes(b"old a")
    (out / "keep.txt").write_bytes(b"keep")
    with pytest.raises(RuntimeError):
        with outputs.staged_dir(out) as stage:
            (stage / "a.png").write_bytes(b"new a")
            raise RuntimeError("a figure failed")
    assert sorted(p.name for p in out.iterdir()) == ["a.png", "keep.txt"] and (out / "a.png").read_bytes() == b"old a"
    with pytest.raises(BonbenchError, match="no space left writing"):
        with outputs.staged_dir(out) as stage:
            outputs.write_bytes(stage / "b.png", b"b")
            monkeypatch.setattr(outputs.os, "fsync", _fail(errno.ENOSPC))
            outputs.write_bytes(stage / "a.png", b"new a")
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == ["a.png", "keep.txt"] and (out / "a.png").read_bytes() == b"old a"
    with outputs.staged_dir(out) as stage:
        (stage / "a.png").write_bytes(b"new a")
        (stage / "sub").mkdir()
        (stage / "sub" / "c.txt").write_bytes(b"c")
    assert (out / "a.png").read_bytes() == b"new a" and (out / "keep.txt").read_bytes() == b"keep"
    assert (out / "sub" / "c.txt").read_bytes() == b"c"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_read_json_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "b.json"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(BonbenchError, match=r"b.json is not UTF-8 text \(byte 7"):
        outputs.read_json(bad)
    bad.write_text('{"a": ')
    with pytest.raises(BonbenchError, match=r"b.json is not valid JSON \(Expecting value at line 1, column 7\)"):
        outputs.read_json(bad)
    with pytest.raises(BonbenchError, match="not found"):
        outputs.read_json(tmp_path / "none.json")


def test_read_jsonl_log_torn_tail_dropped_torn_middle_refused(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(b'{"step": 1}\n\n{"step": 2}\n{"st')
    assert outputs.read_jsonl_log(log) == [{"step": 1}, {"step": 2}]
    log.write_bytes(b'{"step": 1}\n{"st\n{"step": 3}\n')
    with pytest.raises(BonbenchError, match=r"log.jsonl:2: the line is not valid JSON"):
        outputs.read_jsonl_log(log)
    assert outputs.read_jsonl_log(log, skip_torn=True) == [{"step": 1}, {"step": 3}]
    log.write_bytes(b'{"step": 1}\n{"s\xfftep": 2}\n')
    with pytest.raises(BonbenchError, match=r"log.jsonl:2: the line is not UTF-8"):
        outputs.read_jsonl_log(log, skip_torn=True)
    log.write_bytes(b'{"step": 1}\n{"s\xc3')  # a multi-byte character cut by a killed writer
    assert outputs.read_jsonl_log(log) == [{"step": 1}]
    assert json.loads(json.dumps(outputs.read_jsonl_log(log))) == [{"step": 1}]


def test_a_data_file_of_the_mirror_must_be_whole(tmp_path: Path) -> None:
    """Unlike a log, a data file cut short or damaged is an error, never a row dropped."""
    data = tmp_path / "train.jsonl"
    data.write_bytes(b'{"id": 1}\n\n{"id": 2}\n')
    assert list(read_jsonl(data)) == [{"id": 1}, {"id": 2}]
    data.write_bytes(b'{"id": 1}\n{"id"')
    with pytest.raises(BonbenchError, match=r"train.jsonl:2: malformed JSON row \(.*, the file ends inside it\); "):
        list(read_jsonl(data))
    data.write_bytes(b'{"id": 1}\n{"i\xffd": 2}\n')
    with pytest.raises(BonbenchError, match=r"train.jsonl:2: the line is not UTF-8 text; "):
        list(read_jsonl(data))
    packed = tmp_path / "train.jsonl.gz"
    whole = gzip.compress("".join(json.dumps({"id": i, "text": os.urandom(8).hex()}) + "\n" for i in range(500)).encode())
    packed.write_bytes(whole[: len(whole) // 2])  # a download cut short
    with pytest.raises(BonbenchError, match=r"train.jsonl.gz: cannot read it \(.*\); copy the file from the mirror again"):
        list(read_jsonl(packed))


def test_os_error_message_only_for_what_a_user_can_fix() -> None:
    assert outputs.os_error_message("x", OSError(errno.EROFS, "ro")).startswith("cannot write x (Read-only file system)")
    assert outputs.os_error_message("x", OSError(errno.EIO, "io")) is None
