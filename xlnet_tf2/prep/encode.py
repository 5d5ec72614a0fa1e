"""Fast batch encoding of many lines into one flat id array.

Two modes, both exact (the ids equal `SentencePieceTokenizer.encode_ids(line)` line by line)
and both linear in the text size whatever the line lengths:

* line mode (`word_cache=False`): one SentencePiece call encodes the whole batch of
  normalized lines. Normalization is `preprocess_text`, with a shortcut for ASCII lines
  (NFKD and the accent filter leave ASCII unchanged).
* word cache (`word_cache=True`, the default of data preparation): XLNet SentencePiece
  models split at whitespace (no piece has "▁" inside; checked when the encoder is
  built, else line mode is used), so every segmentation of a line passes through every word
  boundary, and the best one is the concatenation of each word's best segmentation *if*
  each word's best is unique. A word seen a second time is encoded once and cached if its
  best segmentation beats its second best (the scores of SentencePiece's two best
  segmentations) by more than the float32 rounding of a line's path scores could move
  either (`score_margin`). A line is assembled from the cache when it is printable ASCII of
  at most MAX_CACHED_LINE characters and all its words are cached; any other line (new
  words, ties like "]]]" = "]]" + "]" or "]" + "]]", other scripts, very long lines) is
  encoded whole, as in line mode. Repeated vocabulary costs much less than in line mode,
  new text more (every word is checked before it is cached; docs/DATA.md).

In both modes lines whose ids contain a piece ending in digit + "," (the original re-split
rule) or `<unk>` are re-encoded with `encode_ids` itself.

tests/test_data_encode.py checks both modes against `encode_ids` line by line on the corpus
and on hand-picked hard cases (accents, digits with commas, unknown characters, `<eop>`, odd
spaces, tied segmentations).

Glossary: W words of a batch, n tokens of the batch.
"""

from __future__ import annotations

import itertools
from typing import Dict, List, Sequence, Tuple

import numpy as np
import sentencepiece as spm

from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer, preprocess_text

# Distinct words kept; the cache is emptied when it grows past this (bounded memory).
MAX_CACHED_WORDS = 2_000_000
# Words seen once, remembered so their second occurrence is cached; forgotten (the set is
# emptied) past this many, so rare words cannot crowd out the cache.
MAX_SEEN_ONCE = 2_000_000
# Lines longer than this (characters) and words longer than MAX_CACHED_WORD are encoded whole:
# they bound the float32 rounding that `score_margin` must cover.
MAX_CACHED_LINE = 1000
MAX_CACHED_WORD = 32
_UNSAFE = -1     # a word that must not come from the cache (tie, too long)
_NEW = -2        # (lookup default) a word not in the cache


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
        # The word cache is exact only if no piece spans a word boundary (module docstring).
        self._splits_at_spaces = not any("\u2581" in p[1:] for p in pieces)
        self._scores = [self._sp.GetScore(i) for i in range(self._sp.GetPieceSize())]
        self._margin = score_margin(max(abs(x) for x in self._scores))
        self._reset_cache()

    def _reset_cache(self) -> None:
        # word -> its row in _offset, or _UNSAFE.
        self._index: Dict[str, int] = {}
        self._seen_once: set = set()
        self._rows = 0                              # cached words
        self._flat = np.zeros(1 << 16, np.int32)    # ids of all cached words, concatenated
        self._offset = np.zeros(1 << 12, np.int64)  # [rows + 1] start of each word in _flat

    def _normalized(self, lines: Sequence[str]) -> List[str]:
        lower, keep = self._tok.lower, self._tok.keep_accents
        return [normalize(line, lower=lower, keep_accents=keep) for line in lines]

    def _encode_whole(self, lines: Sequence[str]) -> List[List[int]]:
        """SentencePiece ids of each whole normalized line (one batch call)."""
        return (self._sp.Encode(self._normalized(lines), num_threads=self._threads)
                if lines else [])

    def encode_lines(self, lines: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """Ids of every line.

        Args:
          lines: raw lines (normalized here with `preprocess_text` semantics).

        Returns:
          (int32 [n] the ids of all lines concatenated, int64 [len(lines)] ids per line).
        """
        if self.word_cache and self._splits_at_spaces:
            ids, per_line = self._encode_with_cache(lines)
        else:
            ids, per_line = _flatten(self._encode_whole(lines))
        flagged = self._recheck[ids]
        if not flagged.any():
            return ids, per_line
        # Re-encode the (rare) lines with a digit-comma piece or <unk> exactly as encode_ids.
        line_of = np.repeat(np.arange(len(lines)), per_line)
        again = np.unique(line_of[flagged]).tolist()
        return _replace_lines(ids, per_line, again,
                              [self._tok.encode_ids(lines[i]) for i in again])

    def _add_words(self, words: List[str]) -> None:
        """Encodes words seen for the second time; caches those with a clearly unique best."""
        index = self._index
        short = [w for w in words if len(w) <= MAX_CACHED_WORD]
        for w in words:
            index[w] = _UNSAFE
        if not short:
            return
        start = used = int(self._offset[self._rows])
        new, ends = [], []
        scores = self._scores
        for w, paths in zip(short, self._sp.NBestEncodeAsIds(short, 2)):
            # The first path is the Viterbi path; a clear gap makes it the only best one.
            if len(paths) == 1 or (sum(scores[i] for i in paths[0])
                                   - sum(scores[i] for i in paths[1])
                                   > self._margin * len(w)):
                index[w] = self._rows + len(ends)
                new.extend(paths[0])
                used += len(paths[0])
                ends.append(used)
        if ends:
            self._flat = _grown(self._flat, used)
            self._flat[start:used] = new
            self._offset = _grown(self._offset, self._rows + len(ends) + 1)
            self._offset[self._rows + 1:self._rows + len(ends) + 1] = ends
            self._rows += len(ends)

    def _encode_with_cache(self, lines: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """(int32 [n] ids, int64 [lines] ids per line): cached lines assembled from the cache,
        the others encoded whole (module docstring)."""
        if len(self._index) > MAX_CACHED_WORDS:
            self._reset_cache()
        index, lower = self._index, self._tok.lower
        words_per_line = np.zeros(len(lines), np.int64)
        words: List[str] = []
        whole: List[int] = []
        for i, raw in enumerate(lines):
            # Printable ASCII (no tab or other control character inside; whitespace at the
            # ends is dropped by `normalize` anyway): `normalize` only joins the words with
            # single spaces, maps `` and '' to " (never across a space) and
            # lowercases, so the words can be taken from the raw line directly.
            core = raw.strip() if len(raw) <= MAX_CACHED_LINE and raw.isascii() else "\t"
            if core.isprintable():
                line_words = (core.lower() if lower else core).split()
                if "``" in raw or "''" in raw:
                    line_words = [w.replace("``", '"').replace("''", '"') for w in line_words]
                words_per_line[i] = len(line_words)
                words.extend(line_words)
            else:
                whole.append(i)
        rows = np.fromiter(map(index.get, words, itertools.repeat(_NEW, len(words))),
                           np.int64, count=len(words))
        pending = np.flatnonzero(rows == _NEW)
        if pending.size:
            fresh = {words[k] for k in pending.tolist()}
            seen = self._seen_once
            again = sorted(fresh.intersection(seen))
            if len(seen) > MAX_SEEN_ONCE:
                seen.clear()
            seen.difference_update(again)
            seen.update(fresh.difference(again))
            if again:
                self._add_words(again)
                rows[pending] = [index.get(words[k], _NEW) for k in pending.tolist()]
        line_of_word = np.repeat(np.arange(len(lines)), words_per_line)
        uncached = line_of_word[rows < 0]
        if uncached.size:
            whole = sorted(set(whole).union(uncached.tolist()))
            if 2 * len(whole) > len(lines):  # mostly new text: splicing would cost more
                return _flatten(self._encode_whole(lines))
            words_per_line[whole] = 0  # their words' pieces are dropped below
            rows = rows[words_per_line[line_of_word] > 0]
        offsets = self._offset
        starts = offsets[rows]
        lengths = offsets[rows + 1] - starts
        # Gather the pieces of every word: flat[starts[w] + j] for j < lengths[w].
        shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        ids = self._flat[shift + np.arange(int(lengths.sum()))]
        token_end = np.concatenate([[0], np.cumsum(lengths)])[np.cumsum(words_per_line)]
        per_line = np.diff(np.concatenate([[0], token_end]))
        if not whole:
            return ids, per_line
        return _replace_lines(ids, per_line, whole,
                              self._encode_whole([lines[i] for i in whole]))


def score_margin(max_abs_score: float) -> float:
    """How much two path scores through one character of a word may be moved by rounding.

    SentencePiece adds piece scores in float32 along a line. Every piece covers at least one
    character, so a line of at most MAX_CACHED_LINE characters (plus the "\u2581" in front)
    has at most MAX_CACHED_LINE + 1 pieces and its running score stays below that many times
    (max |piece score| + 10, the unknown-piece penalty), where one addition rounds by at most
    half a unit in the last place (ulp). A path through a word of c characters has at most c
    pieces, so two such paths move apart by at most c * ulp; a word is cached only if its
    best path wins by more than twice that.
    """
    bound = (MAX_CACHED_LINE + 1) * (abs(float(max_abs_score)) + 10.0)
    ulp = 2.0 ** (int(np.floor(np.log2(bound))) - 23)
    return 2.0 * ulp


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """`array`, or a copy twice as long (or `size`) if it holds fewer than `size` entries:
    appending stays linear in the total."""
    if size <= array.shape[0]:
        return array
    grown = np.zeros(max(size, 2 * array.shape[0]), array.dtype)
    grown[:array.shape[0]] = array
    return grown


def _flatten(encoded: List[List[int]]) -> Tuple[np.ndarray, np.ndarray]:
    """(int32 [n] all ids, int64 [lines] ids per line) of SentencePiece's per-line lists."""
    per_line = np.fromiter(map(len, encoded), np.int64, count=len(encoded))
    ids = np.fromiter(itertools.chain.from_iterable(encoded), np.int32,
                      count=int(per_line.sum()))
    return ids, per_line


def _replace_lines(ids: np.ndarray, per_line: np.ndarray, lines: List[int],
                   new_ids: Sequence) -> Tuple[np.ndarray, np.ndarray]:
    """`ids` with the ids of each line in `lines` (ascending) replaced by `new_ids`."""
    ends = np.cumsum(per_line)
    starts = ends - per_line
    parts = []
    done = 0
    for i, replacement in zip(lines, new_ids):
        parts.append(ids[done:starts[i]])
        parts.append(np.asarray(replacement, np.int32))
        done = ends[i]
    parts.append(ids[done:])
    per_line = per_line.copy()
    per_line[lines] = [len(x) for x in new_ids]
    return np.concatenate(parts).astype(np.int32, copy=False), per_line
