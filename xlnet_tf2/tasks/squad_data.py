"""SQuAD 1.1/2.0 data: JSON -> examples -> token-aligned document windows -> model inputs.

Where each character goes. The model sees `preprocess_text(context)` (whitespace collapsed,
two backquotes / two single quotes -> '"', NFKD with the combining marks dropped) cut into
SentencePiece pieces, but answers are character spans of the RAW context. Two maps connect
them, both at character level:

  raw context --(normalize_with_offsets: every normalized char knows its raw char)-->
  normalized text --(align pieces: the pieces' text, "▁" read as a space, against the
  normalized text; equal almost always, otherwise a difflib alignment)--> pieces

so every token has a raw character span [token_start_char, token_end_char). An answer's
tokens are those whose raw span overlaps [answer_start, answer_start + len(text)); a predicted
token span becomes the raw substring context[start_char(first):end_char(last)].

Window layout (docs/SEMANTICS.md#fine-tuning-formats), right padded, L = seq_len:
  doc tokens (segment A) <sep> (A) question (B) <sep> (B) <cls> (CLS) <pad>... (PAD)
  p_mask = 1 on <sep>, the question and padding; 0 on the document tokens and on <cls>,
  because <cls> is the target of windows without the answer (its start/end label), as in the
  original. Post-processing only ever picks document tokens.
The question keeps its first max_query_length tokens; the document is cut into windows of
seq_len - 3 - len(question) tokens, each starting doc_stride tokens after the previous one.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from xlnet_tf2 import special_ids as sid
from xlnet_tf2.tasks.errors import TaskDataError
from xlnet_tf2.tasks.text_readers import read_json_file
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import (SPIECE_UNDERLINE, SentencePieceTokenizer,
                                                          normalize_with_offsets)
from xlnet_tf2.progress import Progress

MODEL_INPUTS = ("input_ids", "segment_ids", "attention_mask", "p_mask", "cls_index")
LABELS = ("start_positions", "end_positions", "is_impossible")


# ---------------------------------------------------------------------------- reading
@dataclasses.dataclass(frozen=True)
class SquadExample:
    qid: str
    question: str
    context: str
    answers: Tuple[Tuple[str, int], ...]   # (text, answer_start char) in the raw context
    is_impossible: bool

    @property
    def answer_texts(self) -> List[str]:
        return [text for text, _ in self.answers]


def read_squad(path: str, version_2_with_negative: bool) -> List[SquadExample]:
    """Reads a SQuAD JSON file ({"data": [{"paragraphs": [{"context", "qas"}]}]}).

    Every question needs an "id" and, unless it is unanswerable (SQuAD 2.0 "is_impossible":
    true, which then must have no "answers"), answers whose answer_start points at their text
    in the context. Errors name the file and the question id (or its position).
    """
    if not tf.io.gfile.exists(path):
        raise TaskDataError(path, None, "does not exist.")
    dataset = read_json_file(path)
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise TaskDataError(path, None, 'expected a JSON object with a "data" list (SQuAD '
                            "layout).")
    examples, seen = [], set()
    for a, article in enumerate(dataset["data"]):
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            raise TaskDataError(path, f"data[{a}]", 'needs a "paragraphs" list.')
        for p, paragraph in enumerate(article["paragraphs"]):
            where = f"data[{a}].paragraphs[{p}]"
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("context"), str):
                raise TaskDataError(path, where, 'needs a "context" string.')
            context = paragraph["context"]
            if not isinstance(paragraph.get("qas"), list):
                raise TaskDataError(path, where, f'needs a "qas" list, got '
                                    f"{paragraph.get('qas')!r}.")
            for q, qa in enumerate(paragraph["qas"]):
                if not isinstance(qa, dict) or not qa.get("id"):
                    raise TaskDataError(path, f"{where}.qas[{q}]", 'question without an "id".')
                qid = str(qa["id"])
                if qid in seen:
                    raise TaskDataError(path, qid, "duplicate question id.")
                seen.add(qid)
                if not isinstance(qa.get("question"), str):
                    raise TaskDataError(path, qid, 'needs a "question" string.')
                examples.append(_example(path, qid, qa, context, version_2_with_negative))
    if not examples:
        raise TaskDataError(path, None, "holds no questions.")
    return examples


def _example(path, qid, qa, context, version_2) -> SquadExample:
    impossible = bool(qa.get("is_impossible", False))
    if impossible and not version_2:
        raise TaskDataError(path, qid, "is_impossible is true but --version_2_with_negative is "
                            "not set (SQuAD 1.1 has only answerable questions).")
    raw_answers = qa.get("answers", [])
    if raw_answers is None or not isinstance(raw_answers, list):
        raise TaskDataError(path, qid, '"answers" must be a list.')
    if impossible and any(isinstance(x, dict) and x.get("text") for x in raw_answers):
        raise TaskDataError(path, qid, "an unanswerable question (is_impossible) has answers "
                            "with text.")
    answers = []
    for x in raw_answers:
        if not isinstance(x, dict) or not isinstance(x.get("text"), str) or \
                not isinstance(x.get("answer_start"), int):
            raise TaskDataError(path, qid, f"answer {x!r} needs \"text\" (string) and "
                                "\"answer_start\" (integer).")
        text, start = x["text"], x["answer_start"]
        if not text or context[start:start + len(text)] != text:
            raise TaskDataError(path, qid, f"answer_start {start} does not point at the answer "
                                f"text {text!r} in the context (found "
                                f"{context[start:start + len(text)]!r}).")
        answers.append((text, start))
    if not impossible and not answers:
        raise TaskDataError(path, qid, "has no answers and is not marked is_impossible.")
    return SquadExample(qid, qa["question"], context, tuple(answers), impossible)


# ---------------------------------------------------------------------------- alignment
def piece_char_spans(pieces: Sequence[str], normalized: str) -> List[Tuple[int, int]]:
    """[start, end) in `normalized` of each piece's visible characters ("▁" = a space, which
    is not counted as part of the piece). Pieces whose characters are not found verbatim
    (SentencePiece's own NFKC changed them) are aligned with difflib; a piece of only "▁"
    gets an empty span at its position."""
    piece_text = "".join(pieces).replace(SPIECE_UNDERLINE, " ")
    target = " " + normalized  # SentencePiece's dummy prefix
    if piece_text == target or piece_text == normalized:
        shift = 1 if piece_text == target else 0
        to_target = list(range(len(piece_text)))
    else:
        shift = 1
        to_target = [-1] * len(piece_text)
        matcher = difflib.SequenceMatcher(None, piece_text, target, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            for k in range(i1, i2):
                if tag == "equal":
                    to_target[k] = j1 + (k - i1)
                elif j2 > j1:  # replaced: spread proportionally over the target range
                    to_target[k] = j1 + (k - i1) * (j2 - j1) // (i2 - i1)
    spans, position = [], 0
    for piece in pieces:
        begin, end = position, position + len(piece)
        position = end
        visible = [to_target[k] - shift for k in range(begin, end)
                   if piece_text[k] != " " and to_target[k] >= shift]
        if visible:
            spans.append((min(visible), max(visible) + 1))
        else:
            anchor = next((to_target[k] - shift for k in range(begin, len(to_target))
                           if to_target[k] >= shift), len(normalized))
            spans.append((anchor, anchor))
    return spans


@dataclasses.dataclass(frozen=True)
class TokenizedContext:
    """A context's pieces, ids and each token's raw character span [start, end)."""
    pieces: List[str]
    ids: List[int]
    char_start: List[int]
    char_end: List[int]


def tokenize_context(context: str, tokenizer: SentencePieceTokenizer) -> TokenizedContext:
    normalized, raw_starts, raw_ends = normalize_with_offsets(context, lower=tokenizer.lower,
                                                 keep_accents=tokenizer.keep_accents)
    pieces = tokenizer.encode_pieces(normalized)
    ids = [tokenizer.piece_to_id(p) for p in pieces]
    starts, ends = [], []
    for begin, end in piece_char_spans(pieces, normalized):
        if end > begin:
            starts.append(raw_starts[begin])
            ends.append(max(raw_ends[begin:end]))
        else:  # a bare "▁": empty span at the next character
            at = raw_starts[begin] if begin < len(raw_starts) else len(context)
            starts.append(at)
            ends.append(at)
    return TokenizedContext(pieces, ids, starts, ends)


def answer_token_span(tokens: TokenizedContext, char_start: int,
                      char_end: int) -> Optional[Tuple[int, int]]:
    """First and last token (inclusive) overlapping raw chars [char_start, char_end)."""
    hits = [t for t in range(len(tokens.ids))
            if tokens.char_start[t] < char_end and tokens.char_end[t] > char_start
            and tokens.char_end[t] > tokens.char_start[t]]
    return (hits[0], hits[-1]) if hits else None


# ---------------------------------------------------------------------------- windows
@dataclasses.dataclass
class SquadWindow:
    """One document window of one question: model inputs, labels and the way back."""
    example_index: int
    qid: str
    doc_offset: int          # document token index of the window's first token
    doc_length: int          # document tokens in the window (positions 0..doc_length-1)
    max_context: List[bool]  # per window position: this window gives the token most context
    inputs: Dict[str, np.ndarray]
    start_position: int
    end_position: int
    is_impossible: bool


def _max_context(spans: List[Tuple[int, int]], span_index: int, position: int) -> bool:
    """Whether window span_index (offset, length) is the one where doc token `position` has
    the most context: min(left, right) + 0.01 * length, the first window on ties."""
    best, best_score = None, None
    for i, (offset, length) in enumerate(spans):
        if not offset <= position < offset + length:
            continue
        score = min(position - offset, offset + length - 1 - position) + 0.01 * length
        if best_score is None or score > best_score:
            best, best_score = i, score
    return best == span_index


def window_spans(doc_len: int, max_doc_tokens: int, doc_stride: int) -> List[Tuple[int, int]]:
    spans, offset = [], 0
    while True:
        length = min(doc_len - offset, max_doc_tokens)
        spans.append((offset, length))
        if offset + length >= doc_len:
            return spans
        offset += min(length, doc_stride)


def build_windows(example: SquadExample, example_index: int, context: TokenizedContext,
                  question_ids: Sequence[int], seq_len: int, doc_stride: int,
                  max_query_length: int) -> List[SquadWindow]:
    question_ids = list(question_ids[:max_query_length])
    max_doc_tokens = seq_len - 3 - len(question_ids)
    if max_doc_tokens < 1:
        raise ValueError(f"--seq_len={seq_len} leaves no room for the document after a "
                         f"{len(question_ids)}-token question; raise --seq_len or lower "
                         "--max_query_length.")
    answer = None
    if not example.is_impossible:
        text, start = example.answers[0]
        answer = answer_token_span(context, start, start + len(text))
    spans = window_spans(len(context.ids), max_doc_tokens, doc_stride)
    windows = []
    for w, (offset, length) in enumerate(spans):
        tokens = list(context.ids[offset:offset + length]) + [sid.SEP_ID] + question_ids + \
            [sid.SEP_ID, sid.CLS_ID]
        segments = [sid.SEG_ID_A] * (length + 1) + [sid.SEG_ID_B] * (len(question_ids) + 1) + \
            [sid.SEG_ID_CLS]
        cls_index = len(tokens) - 1
        p_mask = [0] * length + [1] * (len(question_ids) + 2) + [0]
        pad = seq_len - len(tokens)
        inputs = {
            "input_ids": np.asarray(tokens + [sid.PAD_ID] * pad, np.int32),
            "segment_ids": np.asarray(segments + [sid.SEG_ID_PAD] * pad, np.int32),
            "attention_mask": np.asarray([1] * len(tokens) + [0] * pad, np.int32),
            "p_mask": np.asarray(p_mask + [1] * pad, np.int32),
            "cls_index": np.int32(cls_index),
        }
        inside = answer is not None and offset <= answer[0] and answer[1] < offset + length
        start, end = ((answer[0] - offset, answer[1] - offset) if inside
                      else (cls_index, cls_index))
        windows.append(SquadWindow(
            example_index, example.qid, offset, length,
            [_max_context(spans, w, offset + i) for i in range(length)], inputs,
            start, end, not inside))
    return windows


def build_all_windows(examples: Sequence[SquadExample], tokenizer: SentencePieceTokenizer,
                      seq_len: int, doc_stride: int, max_query_length: int,
                      source: str = "<examples>"):
    """(windows, tokenized contexts per example). Contexts are tokenized once per paragraph.
    Long files print progress lines with an ETA."""
    cache: Dict[str, TokenizedContext] = {}
    windows, contexts = [], []
    progress = Progress(len(examples), f"tokenizing {source}", "questions")
    for index, example in enumerate(examples):
        progress.update(index)
        if example.context not in cache:
            cache[example.context] = tokenize_context(example.context, tokenizer)
        context = cache[example.context]
        contexts.append(context)
        if not example.is_impossible:
            text, start = example.answers[0]
            if answer_token_span(context, start, start + len(text)) is None:
                raise TaskDataError(source, example.qid, f"answer {text!r} covers no token of "
                                    "the context (whitespace only?).")
        windows.extend(build_windows(example, index, context, tokenizer.encode_ids(
            example.question), seq_len, doc_stride, max_query_length))
    progress.done()
    return windows, contexts


def stack_windows(windows: Sequence[SquadWindow], with_labels: bool) -> Dict[str, np.ndarray]:
    """Model inputs [E, L] / cls_index [E] (and the labels [E]) as int32 arrays."""
    features = {k: np.stack([w.inputs[k] for w in windows]) for k in MODEL_INPUTS}
    if with_labels:
        features["start_positions"] = np.asarray([w.start_position for w in windows], np.int32)
        features["end_positions"] = np.asarray([w.end_position for w in windows], np.int32)
        features["is_impossible"] = np.asarray([w.is_impossible for w in windows], np.int32)
    return features
