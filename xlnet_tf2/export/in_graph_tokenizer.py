"""XLNet text normalization and SentencePiece encoding as TensorFlow ops, for serving.

`InGraphTokenizer` reproduces `xlnet_tf2.tokenization` inside a graph, so an exported
SavedModel takes raw UTF-8 strings and gives exactly the ids the offline pipeline gives:

1. `preprocess_text`: Python's `" ".join(text.strip().split())` (Unicode whitespace, the set
   `str.isspace` accepts), two backquotes / two single quotes -> '"', NFKD, then dropping every
   character with a non-zero canonical combining class (`unicodedata.combining`), optional
   lowercasing.
2. SentencePiece (tensorflow-text's `SentencepieceTokenizer`, same library as offline).
3. The digit-comma rule: a piece ending in "," right after a digit is encoded again without
   the comma (underline removed) and the comma becomes its own piece.

The character classes of step 1 and 3 are computed from this interpreter's `unicodedata`
when the tokenizer is built (RE2's `\\s` and `\\d` are ASCII-only, Python's are not), so the
graph agrees with the Python side character for character.

The SentencePiece model is tracked as a `tf.saved_model.Asset`, so the exported directory
ships it under `assets/` (clients can tokenize offline with the very same file). The
tensorflow-text op takes the model as an attribute, not an input, so the graph also carries
the same bytes; `export` checks that the asset and the embedded model are byte-identical.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from typing import Callable, List, Tuple

import tensorflow as tf
import tensorflow_text as tf_text

_UNDERLINE = "\u2581"


def _codepoint_ranges(predicate: Callable[[str], bool]) -> List[Tuple[int, int]]:
    ranges: List[Tuple[int, int]] = []
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:  # surrogates are not valid UTF-8 scalar values
            continue
        if predicate(chr(cp)):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return ranges


@functools.lru_cache(maxsize=None)
def char_class(kind: str) -> str:
    """An RE2 character class matching exactly the characters Python calls `kind`:
    "space" (str.isspace), "combining" (unicodedata.combining != 0), "digit" (str.isdigit)."""
    predicate = {
        "space": str.isspace,
        "combining": lambda c: unicodedata.combining(c) != 0,
        "digit": str.isdigit,
    }[kind]
    parts = []
    for lo, hi in _codepoint_ranges(predicate):
        parts.append(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
    return "[" + "".join(parts) + "]"


class InGraphTokenizer(tf.Module):
    """Raw strings [B] -> XLNet ids (ragged [B, (T)] int32), as `SentencePieceTokenizer.encode_ids`.

    Args:
      spm_model_path: the SentencePiece `.model` file (becomes a SavedModel asset).
      lower: lowercase after normalization (uncased models only; the released ones are cased).
        `tf.strings.lower` follows ICU case mapping; it agrees with `str.lower` on common text.
      keep_accents: keep combining marks (skips the NFKD + drop step).
    """

    def __init__(self, spm_model_path: str, lower: bool = False, keep_accents: bool = False,
                 name: str = "xlnet_tokenizer"):
        super().__init__(name=name)
        self.spm_model = tf.saved_model.Asset(spm_model_path)
        self.lower = lower
        self.keep_accents = keep_accents
        with open(spm_model_path, "rb") as f:
            self.model_bytes = f.read()
        self._pieces = tf_text.SentencepieceTokenizer(model=self.model_bytes, out_type=tf.string)
        self._space = char_class("space")
        self._combining = char_class("combining")
        self._digit = char_class("digit")

    def preprocess(self, texts: tf.Tensor) -> tf.Tensor:
        """`xlnet_tf2.tokenization.preprocess_text` on a string tensor of any shape."""
        texts = tf.strings.regex_replace(texts, self._space + "+", " ")
        texts = tf.strings.regex_replace(texts, "^ | $", "")
        texts = tf.strings.regex_replace(texts, "``", '"', replace_global=True)
        texts = tf.strings.regex_replace(texts, "''", '"', replace_global=True)
        if not self.keep_accents:
            texts = tf_text.normalize_utf8(texts, "NFKD")
            texts = tf.strings.regex_replace(texts, self._combining, "")
        if self.lower:
            texts = tf.strings.lower(texts, encoding="utf-8")
        return texts

    def encode_pieces(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Pieces [B, (T)] of normalized texts [B], with the digit-comma re-split."""
        pieces = self._pieces.tokenize(texts)                       # [B, (T)]
        flat = pieces.flat_values                                   # [T_all]
        split = tf.strings.regex_full_match(flat, "(?s).*" + self._digit + ",")
        # Re-encode piece[:-1] without underlines (only for split pieces; "" gives no pieces).
        body = tf.strings.regex_replace(tf.strings.regex_replace(flat, ",$", ""), _UNDERLINE, "")
        body = tf.where(split, body, "")
        sub = self._pieces.tokenize(body)                           # [T_all, (S)]
        sub_values = sub.flat_values
        sub_rows = sub.value_rowids()
        first_in_row = tf.equal(tf.range(tf.size(sub_values, out_type=tf.int64)),
                                tf.gather(sub.row_starts(), sub_rows))
        parent_has_underline = tf.strings.regex_full_match(tf.gather(flat, sub_rows),
                                                           "(?s)" + _UNDERLINE + ".*")
        fix = (first_in_row & ~parent_has_underline
               & tf.strings.regex_full_match(sub_values, "(?s)" + _UNDERLINE + ".*"))
        # A lone underline is dropped; otherwise the leading underline is cut.
        keep = ~(fix & tf.equal(sub_values, _UNDERLINE))
        fixed = tf.where(fix, tf.strings.regex_replace(sub_values, "^" + _UNDERLINE, ""),
                         sub_values)
        sub = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(fixed, keep), tf.boolean_mask(sub_rows, keep),
            nrows=tf.size(flat, out_type=tf.int64))
        last = tf.where(split, ",", flat)[:, None]                  # [T_all, 1]
        per_piece = tf.concat([sub, tf.RaggedTensor.from_tensor(last)], axis=1)  # [T_all, (S+1)]
        return pieces.with_flat_values(per_piece).merge_dims(1, 2)  # [B, (T')]

    def encode_ids(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Ids [B, (T)] int32 of raw texts [B], exactly as the offline tokenizer."""
        texts = tf.convert_to_tensor(texts, tf.string)
        pieces = self.encode_pieces(self.preprocess(texts))
        return tf.cast(self._pieces.string_to_id(pieces), tf.int32)

    def id_to_piece(self, ids: tf.Tensor) -> tf.Tensor:
        """Piece strings of int32 ids (any shape); control ids give their piece, e.g. <cls>."""
        return self._pieces.id_to_string(ids)
