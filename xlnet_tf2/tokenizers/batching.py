"""HuggingFace's truncation strategies, overflow windows and padding, on lists of token ids.

The tokenizer (xlnet_tokenizer.py) encodes texts to ids; this module decides which ids of each
text go into which row and pads the rows to one length. Pure Python and numpy: no TensorFlow.

Truncation (`max_length` counts the special tokens):
  "longest_first" (True)  pairs: drop the last token of the longer text until the pair fits
                          (B on ties: the original `_truncate_seq_pair`, HF's slow tokenizers);
                          a single text keeps its first tokens
  "only_first"            cut the first text only (the second stays whole)
  "only_second"           cut the second text only (question first, long context second)
  "do_not_truncate" (False)
With `return_overflowing_tokens`, the cut text becomes several rows (windows): each window has
the full width, starts `width - stride` tokens after the previous one, and the last one ends
at the text's end (HF's fast tokenizers: `overflow_to_sample_mapping` names each row's text).
Pairs under "longest_first" have no windows (HF raises too).

Padding: "longest" (True) pads to the longest row, "max_length" to max_length (longer rows,
kept whole without truncation, set the length), "do_not_pad" (False); `pad_to_multiple_of`
rounds the padded length up.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from xlnet_tf2 import special_ids as sid
from xlnet_tf2.tokenizers.packing import longest_first_lengths

TRUNCATION_STRATEGIES = ("longest_first", "only_first", "only_second", "do_not_truncate")
PADDING_STRATEGIES = ("longest", "max_length", "do_not_pad")

# What each per-token key is padded with. Segment ids pad with the original's SEG_ID_PAD (4),
# as fine-tuning and the in-graph preprocessor do; padded positions are masked out, so the
# value never reaches a real position's output.
PAD_VALUES = {"input_ids": sid.PAD_ID, "token_type_ids": sid.SEG_ID_PAD,
              "segment_ids": sid.SEG_ID_PAD, "attention_mask": 0, "special_tokens_mask": 1,
              "offset_mapping": (0, 0)}

Span = Tuple[int, int]


def truncation_strategy(truncation, max_length: Optional[int]) -> str:
    """HF's `truncation` argument as one of TRUNCATION_STRATEGIES (None: truncate when
    max_length is given, as HF does after its warning)."""
    if truncation is None:
        return "longest_first" if max_length is not None else "do_not_truncate"
    if truncation is True:
        return "longest_first"
    if truncation is False:
        return "do_not_truncate"
    if truncation not in TRUNCATION_STRATEGIES:
        raise ValueError(f"truncation must be True, False or one of {TRUNCATION_STRATEGIES}, "
                         f"got {truncation!r}.")
    return truncation


def padding_strategy(padding) -> str:
    if padding is True:
        return "longest"
    if padding is False or padding is None:
        return "do_not_pad"
    if padding not in PADDING_STRATEGIES:
        raise ValueError(f"padding must be True, False or one of {PADDING_STRATEGIES}, got "
                         f"{padding!r}.")
    return padding


def windows(length: int, width: int, stride: int, overflow: bool) -> List[Span]:
    """[start, stop) of each row's part of a text of `length` tokens cut to `width`."""
    if length <= width:
        return [(0, length)]
    if not overflow:
        return [(0, width)]
    if stride >= width:
        raise ValueError(f"stride ({stride}) must be smaller than the tokens a row has for the "
                         f"cut text ({width}): lower stride or raise max_length.")
    spans, start = [], 0
    while True:
        stop = min(start + width, length)
        spans.append((start, stop))
        if stop == length:
            return spans
        start += width - stride


def cut(len_a: int, len_b: Optional[int], budget: Optional[int], strategy: str, stride: int,
        overflow: bool) -> List[Tuple[Span, Optional[Span]]]:
    """The parts of A and B (None without B) in each row; `budget` = max_length minus the
    special tokens (None: no limit)."""
    whole_b = None if len_b is None else (0, len_b)
    if strategy == "do_not_truncate" or budget is None:
        return [((0, len_a), whole_b)]
    if budget < 0:
        raise ValueError(f"max_length leaves no room for the special tokens ({-budget} too "
                         "few); raise max_length.")
    if len_b is None:
        if strategy == "only_second":
            raise ValueError("truncation='only_second' needs text pairs; use True or "
                             "'only_first' for single texts.")
        return [(span, None) for span in windows(len_a, budget, stride, overflow)]
    if len_a + len_b <= budget:
        return [((0, len_a), whole_b)]
    if strategy == "longest_first":
        if overflow:
            raise ValueError("Overflowing tokens of text pairs need truncation='only_first' or "
                             "'only_second' (with 'longest_first' both texts are cut).")
        keep_a, keep_b = longest_first_lengths(len_a, len_b, budget)
        return [((0, keep_a), (0, keep_b))]
    if strategy == "only_first":
        room = budget - len_b
        if room < 1:
            raise ValueError(f"truncation='only_first' cannot fit the pair: the second text "
                             f"({len_b} tokens) fills max_length; use truncation=True.")
        return [(span, whole_b) for span in windows(len_a, room, stride, overflow)]
    room = budget - len_a  # only_second
    if room < 1:
        raise ValueError(f"truncation='only_second' cannot fit the pair: the first text "
                         f"({len_a} tokens) fills max_length; use truncation=True.")
    return [((0, len_a), span) for span in windows(len_b, room, stride, overflow)]


def padded_length(lengths: Sequence[int], strategy: str, max_length: Optional[int],
                  pad_to_multiple_of: Optional[int]) -> Optional[int]:
    """The length rows are padded to (None: no padding)."""
    if strategy == "do_not_pad":
        return None
    target = max(lengths, default=0)
    if strategy == "max_length":
        if max_length is None:
            raise ValueError("padding='max_length' needs max_length.")
        target = max(target, max_length)
    if pad_to_multiple_of:
        target = -(-target // pad_to_multiple_of) * pad_to_multiple_of
    return target


def pad_row(row: Dict[str, list], target: Optional[int], side: str) -> Dict[str, list]:
    """The row's per-token keys padded to `target` on `side` (other keys kept as they are)."""
    length = len(row["input_ids"])
    if target is None or target <= length:
        return row
    out = dict(row)
    for key, values in row.items():
        if key in PAD_VALUES:
            fill = [PAD_VALUES[key]] * (target - length)
            out[key] = fill + list(values) if side == "left" else list(values) + fill
    return out
