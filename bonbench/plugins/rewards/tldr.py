"""Offline *proxy* rewards for Reddit TL;DR summaries: no learned preference model, no human data.

The paper trains on one learned reward model and evaluates with a larger, different one. There
are no preference comparisons offline, so bonbench ships two hand-built lexical proxies with
different formulas, one for each role. Neither measures fluency, factual correctness beyond word
overlap, or what a human would prefer; both read words, not meaning.

``tldr-proxy-train`` (``CoverageProxy``), the reward to optimise:
    coverage x brevity x (1 - copying), in [0, 1].
    coverage: the post's content words (title + post, English stop words removed) weighted by
    1 + log(count in the post); the summary's distinct content words collect their weights, divided
    by the weight of the post's ``top_k`` heaviest words (capped at 1). brevity: (max_words / n)^2
    above ``max_words`` words, else 1. copying: the share of summary words inside a run of
    >= ``copy_span`` words that also occurs verbatim in the title or post.
    Known hole: a bag of the post's most frequent content words scores near 1 (no grammar is
    asked for). That is what the evaluation proxy checks.

``tldr-proxy-eval`` (``TfidfProxy``), the reward to report:
    similarity x length x (1 - redundancy) x copying x function words, in [0, 1].
    similarity: cosine of sublinear TF-IDF vectors of summary and title + post (unigrams, English
    stop words removed; IDF fitted on the posts of the data dir's TL;DR file, no summaries),
    so rare, specific words (names, objects) count more than common ones. length: 1 inside
    [``min_words``, ``max_words``] words, a log-normal tail outside (Stiennon et al. kept
    references of 24-48 tokens). redundancy: the share of repeated word bigrams. copying: 1 up to
    ``copy_threshold`` of the summary's word trigrams found in the post, falling linearly to 0 at
    all of them. function words: 1 when at least ``min_function_share`` of the words are stop
    words, less below (a keyword list is not a summary).

How the two differ: different salience (in-post frequency vs corpus IDF), different overlap
(recall of top words vs cosine), different copy tests (5-word spans vs trigram share), and the
eval proxy's extra checks (redundancy, function words, a lower length bound). They still share the
lexical view of a summary: a policy trained on the train proxy is scored by a correlated, not an
independent, judge; docs/rewards.md gives the measured agreement.

Prompts: both parse the TL;DR prompt format (``SUBREDDIT: ...\\n\\nTITLE: ...\\n\\nPOST: ...
\\n\\nTL;DR:``) into title and post; any other prompt is taken whole as the post, with no title.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bonbench.api.reward import RewardModel
from bonbench.core.cache import build_once, read_marker, rewards_cache_root
from bonbench.core.data import file_fingerprint, local_file, read_jsonl, resolve_data_dir
from bonbench.core.errors import BonbenchError
from bonbench.plugins.rewards.base import check_scores

TRAIN_NAME = "tldr-proxy-train"
EVAL_NAME = "tldr-proxy-eval"
VERSION = 1
DATA_FILE = "tldr/oai_ppo1.3b_samples.jsonl"
_PROMPT = re.compile(r"^\s*SUBREDDIT:.*?\n\s*\nTITLE:(?P<title>.*?)\n\s*\nPOST:(?P<post>.*?)\n\s*\nTL;DR:\s*$", re.DOTALL)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def parse_prompt(prompt: str) -> tuple[str, str]:
    """(title, post) of a TL;DR prompt; ("", prompt) for any other text."""
    m = _PROMPT.match(prompt)
    if m is None:
        return "", prompt
    return m.group("title").strip(), m.group("post").strip()


def words(text: str) -> list[str]:
    """Lowercased word tokens (letters, digits, an apostrophe suffix such as 've)."""
    return _WORD.findall(text.lower())


def content_words(tokens: Sequence[str], stop: frozenset[str]) -> list[str]:
    """``tokens`` without stop words and one-letter words, possessive 's removed."""
    return [t[:-2] if t.endswith("'s") else t for t in tokens if t not in stop and len(t) > 1]


def copied_share(summary: Sequence[str], source: Sequence[str], span: int) -> float:
    """Share of ``summary`` tokens inside some run of >= ``span`` tokens found verbatim in ``source``."""
    if len(summary) < span:
        return 0.0
    grams = {tuple(source[i:i + span]) for i in range(len(source) - span + 1)}
    covered = np.zeros(len(summary), dtype=bool)
    for i in range(len(summary) - span + 1):
        if tuple(summary[i:i + span]) in grams:
            covered[i:i + span] = True  # overlapping windows: any run >= span is the union of them
    return float(covered.mean())


class CoverageProxy:
    """``tldr-proxy-train``: salient-word coverage x brevity x non-copying (module docstring)."""

    name = TRAIN_NAME
    version = VERSION

    def __init__(self, top_k: int = 12, max_words: int = 48, copy_span: int = 5) -> None:
        assert top_k >= 1 and max_words >= 1 and copy_span >= 2, "top_k, max_words >= 1 and copy_span >= 2"
        self.top_k, self.max_words, self.copy_span = top_k, max_words, copy_span
        self.stop = _stop_words()
        params = {"name": self.name, "version": VERSION, "top_k": top_k, "max_words": max_words, "copy_span": copy_span}
        self.fingerprint = "sha256:" + hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]

    def score(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
        return check_scores(self, [self.score_one(p, c) for p, c in zip(prompts, completions, strict=True)], len(completions))

    def score_counted(self, prompts: Sequence[str], completions: Sequence[str]) -> list[tuple[float, int | None, int | None]]:
        """Rewards with their cost: 0 tokens and 0 forwards (word counting runs no network)."""
        return [(v, 0, 0) for v in self.score(prompts, completions)]

    def score_one(self, prompt: str, completion: str) -> float:
        summary = words(completion)
        if not summary:
            return 0.0
        title, post = parse_prompt(prompt)
        source = words(f"{title}\n{post}")
        weight = {w: 1.0 + math.log(c) for w, c in Counter(content_words(source, self.stop)).items()}
        budget = sum(sorted(weight.values(), reverse=True)[:self.top_k])
        if budget == 0:
            return 0.0
        coverage = min(1.0, sum(weight.get(w, 0.0) for w in set(content_words(summary, self.stop))) / budget)
        brevity = min(1.0, self.max_words / len(summary)) ** 2
        return coverage * brevity * (1.0 - copied_share(summary, source, self.copy_span))


class TfidfProxy:
    """``tldr-proxy-eval``: TF-IDF similarity with length, redundancy, copy and function-word checks."""

    name = EVAL_NAME
    version = VERSION

    def __init__(self, vectorizer: Any, idf_data: str, min_words: int = 8, max_words: int = 48,
                 copy_threshold: float = 0.5, min_function_share: float = 0.2) -> None:
        assert 1 <= min_words <= max_words and 0 <= copy_threshold < 1 and 0 < min_function_share <= 1, "bad proxy options"
        self.vectorizer = vectorizer
        self.min_words, self.max_words = min_words, max_words
        self.copy_threshold, self.min_function_share = copy_threshold, min_function_share
        self.stop = _stop_words()
        import sklearn

        params = {"name": self.name, "version": VERSION, "idf_data": idf_data, "sklearn": sklearn.__version__,
                  "min_words": min_words, "max_words": max_words, "copy_threshold": copy_threshold,
                  "min_function_share": min_function_share}
        self.fingerprint = "sha256:" + hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]

    def score(self, prompts: Sequence[str], completions: Sequence[str]) -> list[float]:
        if not completions:
            return []
        # bon@k scores n completions per prompt: vectorise each distinct prompt once
        distinct = sorted(set(prompts))
        parsed = {p: parse_prompt(p) for p in distinct}
        sources = {p: f"{t}\n{b}" for p, (t, b) in parsed.items()}
        post_vec = self.vectorizer.transform([sources[p] for p in distinct])
        row = {p: i for i, p in enumerate(distinct)}
        summ_vec = self.vectorizer.transform(list(completions))
        # rows are L2-normalised, so the row-wise dot product is the cosine
        cos = np.asarray(summ_vec.multiply(post_vec[[row[p] for p in prompts]]).sum(axis=1)).ravel()
        source_tokens = {p: words(s) for p, s in sources.items()}
        out = [self._checks(words(c), source_tokens[p]) * float(s) for p, c, s in zip(prompts, completions, cos, strict=True)]
        return check_scores(self, out, len(completions))

    def score_counted(self, prompts: Sequence[str], completions: Sequence[str]) -> list[tuple[float, int | None, int | None]]:
        """Rewards with their cost: 0 tokens and 0 forwards (word counting runs no network)."""
        return [(v, 0, 0) for v in self.score(prompts, completions)]

    def _checks(self, summary: list[str], source: list[str]) -> float:
        """The product of the length, redundancy, copy and function-word factors (0 for no words)."""
        n = len(summary)
        if n == 0:
            return 0.0
        length = 1.0
        if n < self.min_words or n > self.max_words:
            bound = self.min_words if n < self.min_words else self.max_words
            length = math.exp(-0.5 * (math.log(n / bound) / 0.35) ** 2)
        bigrams = list(zip(summary, summary[1:], strict=False))
        redundancy = 1.0 - len(set(bigrams)) / len(bigrams) if bigrams else 0.0
        trigrams = list(zip(summary, summary[1:], summary[2:], strict=False))
        copied = 0.0
        if trigrams:
            seen = set(zip(source, source[1:], source[2:], strict=False))
            copied = sum(t in seen for t in trigrams) / len(trigrams)
        copying = 1.0 - max(0.0, copied - self.copy_threshold) / (1.0 - self.copy_threshold)
        function = min(1.0, sum(t in self.stop for t in summary) / n / self.min_function_share)
        return length * (1.0 - redundancy) * copying * function


def read_posts(path: Path) -> list[dict[str, Any]]:
    """The TL;DR file's rows (prompt, title, post, summary, policy_sample, ...)."""
    return list(read_jsonl(path))


def build_train_proxy(data_dir: str | Path | None = None, top_k: int = 12, max_words: int = 48,
                      copy_span: int = 5) -> CoverageProxy:
    """TL;DR proxy to train on: salient-word coverage x brevity x non-copying (lexical, no preference data)

    Builds nothing and needs no data."""
    return CoverageProxy(top_k=top_k, max_words=max_words, copy_span=copy_span)


def build_eval_proxy(data_dir: str | Path | None = None, min_words: int = 8, max_words: int = 48,
                     copy_threshold: float = 0.5, min_function_share: float = 0.2) -> TfidfProxy:
    """TL;DR proxy to evaluate with: TF-IDF similarity x length x non-redundancy x non-copying x function words

    Lexical; the IDF comes from the TL;DR posts under the data dir."""
    import joblib
    import sklearn

    folder = rewards_cache_root() / f"{EVAL_NAME}-v{VERSION}"
    root = resolve_data_dir(data_dir)
    if root is None:
        marker = read_marker(folder)
        if marker is None or marker.get("version") != VERSION or marker.get("sklearn") != sklearn.__version__:
            raise BonbenchError(f"reward model {EVAL_NAME!r} needs its IDF table, fitted once from the TL;DR posts: "
                                f"pass --data-dir (or set BONBENCH_DATA_DIR) to a mirror with {DATA_FILE}")
    else:
        path = local_file(root, DATA_FILE, EVAL_NAME)
        expected = {"version": VERSION, "sklearn": sklearn.__version__, "idf_data": file_fingerprint(path)}

        def _build(tmp: Path) -> dict[str, Any]:
            from sklearn.feature_extraction.text import TfidfVectorizer

            posts = [f"{r['title']}\n{r['post']}" for r in read_posts(path)]
            vec = TfidfVectorizer(sublinear_tf=True, stop_words="english", dtype=np.float64).fit(posts)
            joblib.dump(vec, tmp / "vectorizer.joblib")
            return {"n_posts": len(posts)}

        marker = build_once(folder, expected, _build)
    vectorizer = joblib.load(folder / "vectorizer.joblib")
    return TfidfProxy(vectorizer, str(marker["idf_data"]), min_words=min_words, max_words=max_words,
                      copy_threshold=copy_threshold, min_function_share=min_function_share)


def degenerate_summaries(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Summaries no reward should prefer to the human reference, one per row each.

    ``empty``; ``post`` (the post copied); ``title`` (the title as the summary); ``title x3`` (the
    title repeated three times); ``other reference`` (the next row's reference, cyclically).
    """
    n = len(rows)
    return {
        "empty": ["" for _ in rows],
        "post": [r["post"] for r in rows],
        "title": [r["title"] for r in rows],
        "title x3": [" ".join([r["title"]] * 3) for r in rows],
        "other reference": [rows[(i + 1) % n]["summary"] for i in range(n)],
    }


def reference_wins(model: RewardModel, rows: Sequence[Mapping[str, Any]],
                   others: Mapping[str, Sequence[str]] | None = None) -> dict[str, float]:
    """Per alternative summary set: the share of rows where the reference scores strictly higher."""
    prompts = [r["prompt"] for r in rows]
    ref = np.asarray(model.score(prompts, [r["summary"] for r in rows]))
    out: dict[str, float] = {}
    for label, summaries in (others or degenerate_summaries(rows)).items():
        alt = np.asarray(model.score(prompts, list(summaries)))
        out[label] = float((ref > alt).mean())
    return out

