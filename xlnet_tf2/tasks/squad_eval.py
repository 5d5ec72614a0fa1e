"""The SQuAD v1.1/v2.0 evaluation: exact match and token F1 after the official answer
normalization, the no-answer threshold, and the best-threshold search (same definitions as
the official evaluate-v2.0.py; written here from its specification).

Answer normalization: lowercase, drop ASCII punctuation (string.punctuation), drop the
articles a/an/the as whole words, collapse whitespace.
Per question the score is the maximum over its gold answers; an unanswerable question has the
single gold answer "" (a prediction scores 1 only if it is empty too).
With no-answer probabilities/scores (`null_odds`, larger = more likely unanswerable) and a
threshold t, a question whose null_odds > t counts as predicted unanswerable.
`best_exact` / `best_f1`: the best total over all thresholds t, scanning the questions in
increasing null_odds and switching each from "no answer" to its predicted answer.
All scores are percentages.
"""

from __future__ import annotations

import collections
import re
import string
from typing import Dict, List, Mapping, Optional, Sequence

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(c for c in text if c not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    predicted = normalize_answer(prediction).split()
    truth = normalize_answer(gold).split()
    if not predicted or not truth:
        return float(predicted == truth)
    overlap = sum((collections.Counter(predicted) & collections.Counter(truth)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(truth)
    return 2 * precision * recall / (precision + recall)


def gold_answers(answer_texts: Sequence[str]) -> List[str]:
    """The gold answers scored against: those non-empty after normalization, else [""]."""
    kept = [a for a in answer_texts if normalize_answer(a)]
    return kept or [""]


def raw_scores(golds: Mapping[str, Sequence[str]],
               predictions: Mapping[str, str]) -> (Dict[str, float], Dict[str, float]):
    """Per question id: best exact match and best F1 over its gold answers (0/1 floats)."""
    exact, f1 = {}, {}
    for qid, answers in golds.items():
        if qid not in predictions:
            raise KeyError(f"no prediction for question {qid!r}.")
        candidates = gold_answers(answers)
        exact[qid] = max(exact_match(predictions[qid], a) for a in candidates)
        f1[qid] = max(f1_score(predictions[qid], a) for a in candidates)
    return exact, f1


def apply_threshold(scores: Mapping[str, float], null_odds: Mapping[str, float],
                    has_answer: Mapping[str, bool], threshold: float) -> Dict[str, float]:
    """Questions with null_odds > threshold count as answered "no answer"."""
    return {qid: (float(not has_answer[qid]) if null_odds[qid] > threshold else s)
            for qid, s in scores.items()}


def best_threshold(predictions: Mapping[str, str], scores: Mapping[str, float],
                   null_odds: Mapping[str, float], has_answer: Mapping[str, bool]):
    """(best total score in %, the threshold reaching it).

    Start from "every question predicted unanswerable" (score = number of unanswerable
    questions), then lower the threshold past one question at a time, in increasing
    null_odds: an answerable question then gains its score, an unanswerable one loses 1 if
    its prediction is non-empty. The threshold is the null_odds of the last question
    switched at the best total (0.0 when switching none is best)."""
    total = sum(1 for qid in scores if not has_answer[qid])
    best, best_at = total, 0.0
    for qid in sorted(scores, key=lambda q: null_odds[q]):
        if has_answer[qid]:
            total += scores[qid]
        elif predictions[qid]:
            total -= 1
        if total > best:
            best, best_at = total, null_odds[qid]
    return 100.0 * best / max(len(scores), 1), best_at


def evaluate(golds: Mapping[str, Sequence[str]], predictions: Mapping[str, str],
             null_odds: Optional[Mapping[str, float]] = None,
             null_threshold: float = 1.0) -> Dict[str, float]:
    """The official metrics.

    Args:
      golds: question id -> gold answer texts ([] for unanswerable questions).
      predictions: question id -> predicted text ("" = no answer).
      null_odds: question id -> no-answer score; enables the threshold and the search.
      null_threshold: null_odds above it count as "no answer" (the official na_prob_thresh).

    Returns:
      exact, f1, total; HasAns_/NoAns_ exact, f1, total when both kinds exist;
      with null_odds also best_exact, best_exact_thresh, best_f1, best_f1_thresh.
    """
    has_answer = {qid: bool(gold_answers(a)[0]) for qid, a in golds.items()}
    exact, f1 = raw_scores(golds, predictions)
    if null_odds is not None:
        exact_t = apply_threshold(exact, null_odds, has_answer, null_threshold)
        f1_t = apply_threshold(f1, null_odds, has_answer, null_threshold)
    else:
        exact_t, f1_t = exact, f1

    def summary(ids, prefix=""):
        n = len(ids)
        return {f"{prefix}exact": 100.0 * sum(exact_t[q] for q in ids) / max(n, 1),
                f"{prefix}f1": 100.0 * sum(f1_t[q] for q in ids) / max(n, 1),
                f"{prefix}total": float(n)}

    results = summary(list(golds))
    answerable = [q for q in golds if has_answer[q]]
    unanswerable = [q for q in golds if not has_answer[q]]
    if answerable and unanswerable:
        results.update(summary(answerable, "HasAns_"))
        results.update(summary(unanswerable, "NoAns_"))
    if null_odds is not None:
        results["best_exact"], results["best_exact_thresh"] = best_threshold(
            predictions, exact, null_odds, has_answer)
        results["best_f1"], results["best_f1_thresh"] = best_threshold(
            predictions, f1, null_odds, has_answer)
    return results
