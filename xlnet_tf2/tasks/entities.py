"""Entity-level precision, recall and F1 of tag sequences (CoNLL's conlleval semantics), and
token accuracy.

Written here rather than taken from `seqeval`: seqeval's last release (1.2.2) is from 2020 and
pulls scikit-learn in for its reports; what the task needs is the span extraction below.

Tags are `B-TYPE`, `I-TYPE`, `O` (BIO, "IOB2"), or IOB ("IOB1": `I-TYPE` starts an entity
unless it continues one of the same type, `B-TYPE` only separates two adjacent entities of one
type). The span rules are conlleval's, which read both schemes alike: an entity starts at a
`B-`, or at an `I-` whose type differs from the previous tag's (or after an `O`); it ends
before the next tag that does not continue it. A predicted entity counts as correct only when
its type, start and end all equal a gold entity's.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Set, Tuple

Span = Tuple[str, int, int]  # (type, first word, last word), words counted across sentences


def _split(tag: str) -> Tuple[str, str]:
    """("B"|"I"|"O", type) of a tag; a tag without a prefix ("PER") reads as "I-PER"."""
    if tag == "O" or not tag:
        return "O", ""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIES":
        prefix = {"E": "I", "S": "B"}.get(tag[0], tag[0])
        return prefix, tag[2:]
    return "I", tag


def entity_spans(tags: Sequence[str], offset: int = 0) -> Set[Span]:
    """The entities of one sentence's tags, as (type, first, last) word positions + offset."""
    spans = set()
    start, kind = None, ""
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, tag_kind = _split(tag)
        starts = prefix == "B" or (prefix == "I" and tag_kind != kind)
        if start is not None and (prefix == "O" or starts):
            spans.add((kind, offset + start, offset + i - 1))
            start, kind = None, ""
        if starts:
            start, kind = i, tag_kind
    return spans


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
                  ) -> Dict[str, float]:
    """precision, recall, f1 (micro over entities, in [0, 1]) and token accuracy of
    sentence-aligned tag lists (each predicted sentence as long as its gold one)."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted.")
    gold_spans: Set[Span] = set()
    predicted_spans: Set[Span] = set()
    correct_tokens = total_tokens = offset = 0
    for g, p in zip(gold, predicted):
        if len(g) != len(p):
            raise ValueError(f"sentence at word {offset}: {len(g)} gold tags but {len(p)} "
                             "predicted.")
        gold_spans |= entity_spans(g, offset)
        predicted_spans |= entity_spans(p, offset)
        correct_tokens += sum(a == b for a, b in zip(g, p))
        total_tokens += len(g)
        offset += len(g) + 1  # a gap, so no entity spans two sentences
    hits = len(gold_spans & predicted_spans)
    precision = hits / len(predicted_spans) if predicted_spans else 0.0
    recall = hits / len(gold_spans) if gold_spans else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1,
            "token_accuracy": correct_tokens / total_tokens if total_tokens else 0.0}


def entity_types(label_list: Sequence[str]) -> List[str]:
    """The entity types a tag set names, sorted."""
    return sorted({_split(t)[1] for t in label_list} - {""})
