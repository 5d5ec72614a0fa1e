"""Token ids -> fixed-length model inputs for sequence-level tasks (classification, regression,
multiple choice). One place defines the layouts; the exported SavedModel builds the same
layouts in-graph (xlnet_tf2/tokenizers/in_graph_packing.py) and a test checks that they agree.

Layouts (docs/SEMANTICS.md#fine-tuning-formats):
  "cls_last"  (the original):  A <sep> B <sep> <cls>, LEFT-padded, so position L-1 is always
              <cls>; segment ids A=0 ... B=1 ... <cls>=2, padding 4. Used by the `last`, `mean`
              and `attn` summaries.
  "cls_first": <cls> A <sep> B <sep>, right-padded; used by the `first` summary.
Without B, the `B <sep>` part is absent. Over-long inputs are cut from the END of the longer
text, one token at a time (the original `_truncate_seq_pair`); a single text keeps its first
L-2 tokens.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from xlnet_tf2 import special_ids as sid

LAYOUTS = ("cls_last", "cls_first")


def layout_for_summary(summary_type: str) -> str:
    return "cls_first" if summary_type == "first" else "cls_last"


def truncated_lengths(len_a: int, len_b: Optional[int], seq_len: int) -> Tuple[int, int]:
    """Lengths kept of A and B so that the text plus special tokens fit in seq_len."""
    if len_b is None:
        return min(len_a, seq_len - 2), 0
    return longest_first_lengths(len_a, len_b, seq_len - 3)


def longest_first_lengths(len_a: int, len_b: int, budget: int) -> Tuple[int, int]:
    """Lengths kept of A and B so that together they fit in `budget` tokens.

    While too long, drop the last token of the longer text (B on ties): the original
    `_truncate_seq_pair`, and HuggingFace's slow tokenizers' "longest_first". Closed form: the
    shorter keeps min(its length, ...) and the longer the rest; with both long, A keeps
    ceil(budget/2) and B floor(budget/2).
    """
    if len_a + len_b <= budget:
        return len_a, len_b
    keep_a = min(len_a, max((budget + 1) // 2, budget - len_b))
    return keep_a, budget - keep_a


def with_special_tokens(ids_a: Sequence[int], ids_b: Optional[Sequence[int]],
                        layout: str = "cls_last") -> Tuple[List[int], List[int]]:
    """Token ids and segment ids of `A <sep> [B <sep>] <cls>` ("cls_last") or
    `<cls> A <sep> [B <sep>]` ("cls_first"), unpadded and uncut."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
    tokens = list(ids_a) + [sid.SEP_ID]
    segments = [sid.SEG_ID_A] * len(tokens)
    if ids_b is not None:
        tokens += list(ids_b) + [sid.SEP_ID]
        segments += [sid.SEG_ID_B] * (len(ids_b) + 1)
    if layout == "cls_last":
        return tokens + [sid.CLS_ID], segments + [sid.SEG_ID_CLS]
    return [sid.CLS_ID] + tokens, [sid.SEG_ID_CLS] + segments


def encode_sequence_pair(ids_a: Sequence[int], ids_b: Optional[Sequence[int]], seq_len: int,
                         layout: str = "cls_last") -> Dict[str, np.ndarray]:
    """input_ids, segment_ids, attention_mask (1 = real token): int32 [seq_len] each."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
    if seq_len < 3:
        raise ValueError(f"seq_len must be at least 3, got {seq_len}.")
    keep_a, keep_b = truncated_lengths(len(ids_a), None if ids_b is None else len(ids_b), seq_len)
    tokens, segments = with_special_tokens(ids_a[:keep_a],
                                           None if ids_b is None else ids_b[:keep_b], layout)
    pad = seq_len - len(tokens)
    mask = [1] * len(tokens)
    if layout == "cls_last":
        tokens = [sid.PAD_ID] * pad + tokens
        segments = [sid.SEG_ID_PAD] * pad + segments
        mask = [0] * pad + mask
    else:
        tokens = tokens + [sid.PAD_ID] * pad
        segments = segments + [sid.SEG_ID_PAD] * pad
        mask = mask + [0] * pad
    return {"input_ids": np.asarray(tokens, np.int32),
            "segment_ids": np.asarray(segments, np.int32),
            "attention_mask": np.asarray(mask, np.int32)}
