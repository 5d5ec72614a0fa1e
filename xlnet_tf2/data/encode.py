"""Fast batch encoding of many lines into one flat id array.

Two modes, both linear in the text size whatever the line lengths:

* exact (default): one SentencePiece call encodes the whole batch of normalized lines; the
  ids equal `SentencePieceTokenizer.encode_ids(line)` line by line. Lines whose ids contain a
  piece ending in digit + "," (the original re-split rule) or `<unk>` are re-encoded with
  `encode_ids` itself. Normalization is `preprocess_text`, with a shortcut for ASCII lines
  (NFKD and the accent filter leave ASCII unchanged).
* word cache (`word_cache=True`): XLNet SentencePiece models split at whitespace (no piece has
  "▁" inside), so a line's segmentation is, up to ties, the concatenation of its words'
  segmentations; every distinct word is encoded once and cached. Where two segmentations of
  a word score exactly the same (e.g. "]]]" = "]]" + "]" or "]" + "]]") the whole-line
  Viterbi may break the tie the other way: measured on 5.3 MB of docstrings, 60 of 62,539
  lines and 130 of 1.22M tokens differ from `encode_ids`, all such reorderings of the same
  characters. Several times faster than the exact mode (docs/DATA.md).

tests/test_data_encode.py checks the exact mode against `encode_ids` line by line on the
corpus and on hand-picked hard cases (accents, digits with commas, unknown characters,
`<eop>`, odd spaces), and the word cache on text without ties.

Glossary: W words of a batch, n tokens of the batch.
"""

from __future__ import annotations

import itertools
from typing import Dict, List, Sequence, Tuple

import numpy as np
import sentencepiece as spm

from xlnet_tf2.tokenization import SentencePieceTokenizer, preprocess_text

# Distinct words kept; the cache is emptied when it grows past this (bounded memory).
MAX_CACHED_WORDS = 2_000_000


def normalize(text: str, *, lower: bool, keep_accents: bool) -> str:
    """`preprocess_text(text)` (remove_space=True), faster for ASCII text."""
    if text.isascii():
        text = " ".join(text.split()).replace("``", '"').replace("''", '"')
        return text.lower() if lower else text
    return preprocess_text(text, lower=lower, keep_accents=keep_accents)


class BatchEncoder:
    """Encodes lists of lines into one flat id array.

    Args:
      tokenizer: the SentencePieceTokenizer (its lower / keep_accents settings apply).
      word_cache: use the word cache (module docstring) instead of exact line encoding.
      num_threads: threads of each SentencePiece batch call. 1 (the default) in Beam
        workers, which already run one per core: SentencePiece's own default (-1) starts a
        thread per core in every worker. -1 for one process alone on the machine.
    """

    def __init__(self, tokenizer: SentencePieceTokenizer, word_cache: bool = False,
                 num_threads: int = 1):
        self._tok = tokenizer
        self.word_cache = word_cache
        self._threads = num_threads
        self._sp = spm.SentencePieceProcessor()
        self._sp.LoadFromSerializedProto(tokenizer.model_proto)
        pieces = [self._sp.IdToPiece(i) for i in range(self._sp.GetPieceSize())]
        # Ids whose lines need the slow path: digit-comma pieces and <unk>.
        self._recheck = np.array([len(p) > 1 and p[-1] == "," and p[-2].isdigit()
                                  for p in pieces], dtype=bool)
        self._recheck[self._sp.unk_id()] = True
        self._reset_cache()

    def _reset_cache(self) -> None:
        self._index: Dict[str, int] = {}
        self._pieces: List[np.ndarray] = []
        self._flat = np.zeros(0, np.int32)      # ids of all cached words, concatenated
        self._offset = np.zeros(1, np.int64)    # [words + 1] start of each word in _flat

    def _normalized(self, lines: Sequence[str]) -> List[str]:
        lower, keep = self._tok.lower, self._tok.keep_accents
        return [normalize(line, lower=lower, keep_accents=keep) for line in lines]

    def encode_lines(self, lines: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """Ids of every line.

        Args:
          lines: raw lines (normalized here with `preprocess_text` semantics).

        Returns:
          (int32 [n] the ids of all lines concatenated, int64 [len(lines)] ids per line).
        """
        if self.word_cache:
            return self._encode_words(self._normalized(lines))
        encoded = (self._sp.Encode(self._normalized(lines), num_threads=self._threads)
                   if lines else [])
        per_line = np.fromiter(map(len, encoded), np.int64, count=len(encoded))
        ids = np.fromiter(itertools.chain.from_iterable(encoded), np.int32,
                          count=int(per_line.sum()))
        flagged = self._recheck[ids]
        if not flagged.any():
            return ids, per_line
        # Re-encode the (rare) lines with a digit-comma piece or <unk> exactly as encode_ids.
        line_of = np.repeat(np.arange(len(encoded)), per_line)
        for i in np.unique(line_of[flagged]):
            encoded[i] = self._tok.encode_ids(lines[i])
        per_line = np.fromiter(map(len, encoded), np.int64, count=len(encoded))
        ids = np.fromiter(itertools.chain.from_iterable(encoded), np.int32,
                          count=int(per_line.sum()))
        return ids, per_line

    def _encode_words(self, normalized: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        if len(self._index) > MAX_CACHED_WORDS:
            self._reset_cache()
        words_per_line = np.empty(len(normalized), np.int64)
        words: List[str] = []
        for i, line in enumerate(normalized):
            line_words = line.split(" ") if line else []
            words_per_line[i] = len(line_words)
            words.extend(line_words)
        index = self._index
        missing = sorted({w for w in words if w not in index})
        if missing:
            new = [np.asarray(self._tok.encode_ids(w, normalize=False), np.int32)
                   for w in missing]
            for w in missing:
                index[w] = len(index)
            lengths = np.array([p.shape[0] for p in new], np.int64)
            self._flat = np.concatenate([self._flat] + new)
            self._offset = np.concatenate([self._offset,
                                           self._offset[-1] + np.cumsum(lengths)])
        word_ids = np.fromiter((index[w] for w in words), np.int64, count=len(words))
        starts = self._offset[word_ids]
        lengths = self._offset[word_ids + 1] - starts
        total = int(lengths.sum())
        # Gather the pieces of every word: flat[starts[w] + j] for j < lengths[w].
        shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        ids = self._flat[shift + np.arange(total)]
        token_end = np.concatenate([[0], np.cumsum(lengths)])[np.cumsum(words_per_line)]
        per_line = np.diff(np.concatenate([[0], token_end]))
        return ids.astype(np.int32), per_line.astype(np.int64)
