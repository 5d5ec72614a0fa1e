"""XLNet text normalization and SentencePiece encoding as TensorFlow ops, for serving.

`InGraphTokenizer` reproduces `xlnet_tf2.tokenizers.sentencepiece_tokenizer` inside a graph, so an exported
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


def require_utf8(texts: tf.Tensor, name: str) -> tf.Tensor:
    """`texts` (a string tensor [B] or [B, C]) if every string is valid UTF-8; otherwise an
    InvalidArgumentError naming the input and the first bad request row. (Invalid bytes
    would otherwise be tokenized as <unk> and answered as if the text were fine, while the
    offline tools refuse the same bytes.) Valid UTF-8 round-trips through a transcode
    unchanged, U+FFFD included; anything else does not."""
    texts = tf.convert_to_tensor(texts, tf.string)
    same = tf.equal(tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                                 replacement_char=0xFFFD), texts)
    rows = tf.reshape(same, [tf.shape(same)[0], -1]) if texts.shape.rank > 1 else same
    row_ok = tf.reduce_all(rows, axis=1) if texts.shape.rank > 1 else rows
    # (a 0 appended: an empty batch has a minimum too)
    first_bad = tf.argmin(tf.concat([tf.cast(row_ok, tf.int32), [0]], 0), output_type=tf.int32)
    check = tf.debugging.Assert(tf.reduce_all(row_ok), [
        f"input {name}, request row", first_bad,
        "is not valid UTF-8 text; send the text encoded as UTF-8"], summarize=1)
    with tf.control_dependencies([check]):
        return tf.identity(texts)


class InGraphTokenizer(tf.Module):
    """Raw strings [B] -> XLNet ids (ragged [B, (n)] int32), as `SentencePieceTokenizer.encode_ids`.

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
        """`xlnet_tf2.tokenizers.sentencepiece_tokenizer.preprocess_text` on a string tensor of any shape."""
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

    def normalize_with_offsets(self, texts: tf.Tensor):
        """`preprocess` of raw texts [B] and, per normalized character, the raw characters
        [start, end) it came from, as `squad_data.normalize_with_offsets` (a collapsed
        whitespace run maps to its first character, a '"' made of a quote pair to both
        characters, NFKD pieces to their source character).

        Returns (normalized string [B], raw_start int64 [B, (N)], raw_end int64 [B, (N)]); N
        counts Unicode characters (code points) of the normalized text, indices are code
        points of the raw text. Lowercasing (uncased models) is per character here, so the
        context-dependent final sigma may differ from Python's `str.lower`.
        """
        texts = tf.convert_to_tensor(texts, tf.string)
        chars = tf.strings.unicode_split(texts, "UTF-8")           # [B, (C)]
        index = tf.ragged.range(chars.row_lengths())                # raw char index
        space = chars.with_flat_values(
            tf.strings.regex_full_match(chars.flat_values, self._space))
        space_d = space.to_tensor(True)                             # [B, C]; padding = space
        solid = tf.cast(~space_d, tf.int32)
        before = tf.cumsum(solid, axis=1, exclusive=True) > 0      # a non-space earlier
        after = tf.cumsum(solid, axis=1, exclusive=True, reverse=True) > 0
        previous_space = tf.pad(space_d[:, :-1], [[0, 0], [1, 0]], constant_values=True)
        keep_space = space_d & ~previous_space & before & after
        keep = tf.RaggedTensor.from_tensor(~space_d | keep_space, lengths=chars.row_lengths())
        kept = tf.ragged.boolean_mask(tf.where(space, " ", chars), keep)   # [B, (K)]
        kept_index = tf.ragged.boolean_mask(index, keep)
        # Quote pairs, leftmost first as str.replace: a pair's first character becomes '"'
        # and the second disappears (the replacement keeps the length to find them).
        joined = tf.strings.reduce_join(kept, axis=1)
        marked = tf.strings.regex_replace(tf.strings.regex_replace(joined, "``", '"`'),
                                          "''", "\"'")
        marked = tf.strings.unicode_split(marked, "UTF-8")          # [B, (K)]
        quote = (tf.equal(kept.flat_values, "`") | tf.equal(kept.flat_values, "'"))
        first = quote & tf.equal(marked.flat_values, '"')
        kept_rows = kept.value_rowids()
        previous_first = tf.concat([[False], first[:-1]], 0) & tf.concat(
            [[False], tf.equal(kept_rows[1:], kept_rows[:-1])], 0)
        second = quote & previous_first
        expansion = tf.where(first, '"', tf.where(second, "", kept.flat_values))
        start = kept_index.flat_values
        end = start + tf.where(first, tf.constant(2, start.dtype), tf.constant(1, start.dtype))
        if not self.keep_accents:
            expansion = tf.strings.regex_replace(tf_text.normalize_utf8(expansion, "NFKD"),
                                                 self._combining, "")
        if self.lower:
            expansion = tf.strings.lower(expansion, encoding="utf-8")
        pieces = tf.strings.unicode_split(expansion, "UTF-8")       # [K_all, (E)]
        per_char = pieces.row_lengths()
        rows = kept.with_flat_values(per_char)                      # [B, (K)]
        counts = tf.reduce_sum(rows, axis=1)                        # [B] normalized chars
        normalized = tf.strings.reduce_join(kept.with_flat_values(expansion), axis=1)
        raw_start = tf.RaggedTensor.from_row_lengths(tf.repeat(start, per_char), counts)
        raw_end = tf.RaggedTensor.from_row_lengths(tf.repeat(end, per_char), counts)
        return normalized, raw_start, raw_end

    def encode_pieces(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Pieces [B, (n)] of normalized texts [B], with the digit-comma re-split."""
        return self._encode(texts, with_offsets=False)

    def encode_pieces_with_offsets(self, texts: tf.Tensor):
        """(pieces [B, (n)], start [B, (n)], end [B, (n)]): as `encode_pieces`, and each piece's
        visible characters as byte offsets [start, end) into the normalized text (the space
        a "▁" stands for is not counted; a bare "▁" has an empty span at the next character),
        the in-graph twin of `squad_data.piece_char_spans` (SentencePiece's own alignment
        rather than a text diff; the two agree whenever the pieces spell the normalized
        text)."""
        return self._encode(texts, with_offsets=True)

    def _encode(self, texts: tf.Tensor, with_offsets: bool):
        texts = tf.convert_to_tensor(texts, tf.string)
        if with_offsets:
            pieces, begin, end = self._pieces.tokenize_with_offsets(texts)   # [B, (n)]
            begin, end = begin.flat_values, end.flat_values
            row_text = tf.gather(texts, pieces.value_rowids())
            # "▁x": the spaces before x (SentencePiece may have merged a run of them) are
            # not part of the span; a bare "▁": empty span at its (first) space.
            surface = tf.strings.substr(row_text, begin, end - begin)
            visible = tf.strings.length(tf.strings.regex_replace(surface, "^ +", ""))
            visible = tf.cast(visible, begin.dtype)
            bare = tf.equal(visible, 0)
            # (SentencePiece drops leading spaces: a bare "▁" there points past them.)
            before = tf.strings.substr(row_text, tf.zeros_like(begin), begin)
            run = tf.strings.length(before) - tf.strings.length(
                tf.strings.regex_replace(before, " +$", ""))
            begin = tf.where(bare, begin - tf.cast(run, begin.dtype), end - visible)
            end = tf.where(bare, begin, end)
        else:
            pieces = self._pieces.tokenize(texts)                   # [B, (n)]
        flat = pieces.flat_values                                   # [T_all]
        split = tf.strings.regex_full_match(flat, "(?s).*" + self._digit + ",")
        # Re-encode piece[:-1] without underlines (only for split pieces; "" gives no pieces).
        body = tf.strings.regex_replace(tf.strings.regex_replace(flat, ",$", ""), _UNDERLINE, "")
        body = tf.where(split, body, "")
        if with_offsets:
            sub, sub_begin, sub_end = self._pieces.tokenize_with_offsets(body)  # [T_all, (S)]
        else:
            sub = self._pieces.tokenize(body)                       # [T_all, (S)]
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
        nrows = tf.size(flat, out_type=tf.int64)

        def regroup(values, last):
            """Sub-piece values [S_all] kept and each piece's own last value -> [B, (n')]."""
            sub_part = tf.RaggedTensor.from_value_rowids(
                tf.boolean_mask(values, keep), tf.boolean_mask(sub_rows, keep), nrows=nrows)
            per_piece = tf.concat([sub_part, tf.RaggedTensor.from_tensor(last[:, None])],
                                  axis=1)                           # [T_all, (S+1)]
            return pieces.with_flat_values(per_piece).merge_dims(1, 2)

        out = regroup(fixed, tf.where(split, ",", flat))
        if not with_offsets:
            return out
        # The body is the piece's visible text minus the comma: its byte k is byte
        # begin + k of the normalized text; the comma is the piece's last byte.
        shift = tf.gather(begin, sub_rows)
        starts = regroup(sub_begin.flat_values + shift, tf.where(split, end - 1, begin))
        ends = regroup(sub_end.flat_values + shift, end)
        return out, starts, ends

    def encode_ids(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Ids [B, (n)] int32 of raw texts [B], exactly as the offline tokenizer."""
        texts = tf.convert_to_tensor(texts, tf.string)
        pieces = self.encode_pieces(self.preprocess(texts))
        return tf.cast(self._pieces.string_to_id(pieces), tf.int32)

    def encode_ids_with_char_spans(self, texts: tf.Tensor):
        """Ids int32 [B, (n)] of raw texts [B] and each token's raw character span
        [start, end) int64 [B, (n)] (code points of the raw text), as
        squad_data.tokenize_context computes them: a token's span runs from the raw start of
        its first visible character to the raw end of its last; a bare "▁" has an empty span
        at its space (the raw length past the end)."""
        texts = tf.convert_to_tensor(texts, tf.string)
        normalized, raw_start, raw_end = self.normalize_with_offsets(texts)
        pieces, begin, end = self.encode_pieces_with_offsets(normalized)
        ids = tf.cast(self._pieces.string_to_id(pieces), tf.int32)
        # byte offsets into the normalized text -> its character indices, in [0, N_b]
        char_bytes = tf.strings.unicode_decode_with_offsets(normalized, "UTF-8")[1]  # [B, (N)]
        sentinel = tf.int64.max
        char_bytes = char_bytes.to_tensor(sentinel)
        first = tf.searchsorted(char_bytes, begin.to_tensor(sentinel), side="left",
                                out_type=tf.int64)                               # [B, n]
        last = tf.searchsorted(char_bytes, end.to_tensor(sentinel), side="left",
                               out_type=tf.int64)
        raw_length = tf.cast(tf.strings.length(texts, unit="UTF8_CHAR"), tf.int64)
        tail = tf.RaggedTensor.from_tensor(raw_length[:, None])
        starts = tf.concat([raw_start, tail], axis=1).to_tensor(0)               # [B, N+1]
        ends = tf.concat([raw_end, tail], axis=1).to_tensor(0)
        char_start = tf.gather(starts, first, batch_dims=1)
        char_end = tf.where(last > first,
                            tf.gather(ends, tf.maximum(last - 1, 0), batch_dims=1), char_start)
        lengths = ids.row_lengths()
        return (ids, tf.RaggedTensor.from_tensor(char_start, lengths=lengths),
                tf.RaggedTensor.from_tensor(char_end, lengths=lengths))

    def id_to_piece(self, ids: tf.Tensor) -> tf.Tensor:
        """Piece strings of int32 ids (any shape); control ids give their piece, e.g. <cls>.
        An id outside the vocabulary is an InvalidArgumentError (SentencePiece's op would
        crash the process on it)."""
        ids = tf.convert_to_tensor(ids)
        size = tf.cast(self._pieces.vocab_size(), ids.dtype)
        valid = tf.logical_and(tf.reduce_all(ids >= 0), tf.reduce_all(ids < size))
        check = tf.debugging.Assert(valid, ["ids outside the vocabulary of", size,
                                            "pieces given to id_to_piece"], summarize=1)
        with tf.control_dependencies([check]):
            return self._pieces.id_to_string(tf.identity(ids))
