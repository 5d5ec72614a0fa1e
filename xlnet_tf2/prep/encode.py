"""Fast batch encoding of many lines into one flat id array (`BatchEncoder`), exact: the ids
equal `SentencePieceTokenizer.encode_ids(line)` line by line. The two modes and when a word
may be cached: `BatchEncoder`; where it sits in data preparation: docs/DATA.md.

Counts: n tokens of a batch (docs/GLOSSARY.md keeps the capital letters for dimensions).
"""

from __future__ import annotations

import collections
import itertools
from typing import Dict, List, Sequence, Tuple

import numpy as np
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

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
_LINE_END = -3   # the mark after each line's words
# Lines of a batch are joined around this mark and split into words at once; a printable
# line never holds it.
_LINE_END_MARK = "\x01"
_LINE_END_SEPARATOR = f" {_LINE_END_MARK} "
# Words checked together by one n-best call (`BatchEncoder._add_words`).
NBEST_GROUP = 16


def passes_printable_ascii(model: sentencepiece_model_pb2.ModelProto,
                           sp: spm.SentencePieceProcessor) -> bool:
    """Whether the model's own normalizer does to a printable ASCII line exactly what
    `normalize` does, apart from `` and '': a standard rule set (NFKC leaves printable ASCII
    as it is) that strips and collapses spaces. Such lines then go to SentencePiece as they
    are, without a Python call per line (checked on the rules' name and on their output).
    `model` is the parsed model of `sp`."""
    spec = model.normalizer_spec
    printable = "".join(map(chr, range(33, 127)))
    return (spec.name in ("nmt_nfkc", "nfkc", "identity") and spec.remove_extra_whitespaces
            and sp.Normalize(printable) in (printable, "\u2581" + printable)
            and sp.Normalize(f"  a  {printable}   b ") == sp.Normalize(f"a {printable} b"))


def normalize(text: str, *, lower: bool, keep_accents: bool) -> str:
    """`preprocess_text(text)` (remove_space=True), faster for ASCII text."""
    if text.isascii():
        text = " ".join(text.split()).replace("``", '"').replace("''", '"')
        return text.lower() if lower else text
    return preprocess_text(text, lower=lower, keep_accents=keep_accents)


class CachePolicy:
    """Decides batch by batch whether a worker uses its word cache: only while it pays.

    Costs and savings are estimated from counts, never from timings, so the decision is
    reproducible (and the output is the same either way: both modes are exact). Unit: the
    line-mode work of one token. A batch encoded with the cache saves SAVED_PER_TOKEN per
    token that came from the cache instead of SentencePiece and costs WORD_COST per word
    looked up; learning costs NEW_WORD_COST more per word not yet cached and NBEST_COST per
    word checked with SentencePiece's n-best before it is cached.

    The cache stays on after a batch whose savings exceed all its costs. A batch that saves
    more than its lookups cost but not enough to pay for what it learned gets one more batch
    (learning costs fall once the words are known: repetitive text pays from its second
    batch). Otherwise the cache goes off, and is tried again once the balance of every batch
    encoded with it (savings minus costs) is at least -ALLOWANCE times the tokens encoded so
    far: on new text it costs at most about ALLOWANCE of the tokenizing work, and learns the
    frequent words on the batches where it is tried. Until the cache has paid on a batch, a
    batch is a trial (`on_trial`): the encoder uses the cache on its first 1/TRIAL_FRACTION
    of the lines only, so the trials on new text cost a fraction of a batch (the whole first
    batch's learning had cost a measurable share of a worker's tokenizing; BENCHMARKS.md's
    "Figures behind choices in the code").
    """

    # Fitted to per-batch timings of both modes on documentation prose (16k model), new and
    # repeated (docs/DATA.md), in units of one line-mode token's time there.
    SAVED_PER_TOKEN = 0.6
    WORD_COST = 0.3
    NEW_WORD_COST = 0.6
    NBEST_COST = 13.0
    ALLOWANCE = 0.0025
    TRIAL_FRACTION = 4

    def __init__(self):
        self.balance = 0.0   # savings - costs of the batches encoded with the cache
        self.tokens = 0      # tokens of every batch so far
        self._on = True      # the last batch encoded with the cache paid (or gets a chance)
        self._chance = True  # a second chance is left
        self._paid = False   # the last batch encoded with the cache paid all its costs

    def on_trial(self) -> bool:
        """Whether the next batch encoded with the cache is a trial (see the class)."""
        return not self._paid

    def use_cache(self) -> bool:
        """Whether the next batch should be encoded with the cache."""
        return self._on or self.balance >= -self.ALLOWANCE * self.tokens

    def record(self, tokens: int, words: int = 0, new_words: int = 0, checked_words: int = 0,
               cached_tokens: int = 0, with_cache: bool = False) -> None:
        """Books one batch of `tokens` tokens (and, with_cache, what the cache did)."""
        self.tokens += tokens
        if not with_cache:
            return
        recurring = self.SAVED_PER_TOKEN * cached_tokens - self.WORD_COST * words
        net = recurring - self.NEW_WORD_COST * new_words - self.NBEST_COST * checked_words
        self.balance += net
        self._paid = net >= 0
        if net >= 0:
            self._on = self._chance = True
        elif recurring > 0 and self._chance:
            self._on, self._chance = True, False
        else:
            self._on = False


class BatchEncoder:
    """Encodes lists of lines into one flat id array.

    Two modes, both exact (the ids equal `SentencePieceTokenizer.encode_ids(line)` line by
    line) and both linear in the text size whatever the line lengths:

    * line mode (`word_cache=False`, `--noword_cache`): one SentencePiece call encodes the
      whole batch of normalized lines. Normalization is `preprocess_text`, with a shortcut for
      ASCII lines (NFKD and the accent filter leave ASCII unchanged).
    * word cache (`word_cache=True`, the default of data preparation): XLNet SentencePiece
      models split at whitespace (no piece has "▁" inside; checked when the encoder is built,
      else line mode is used), so every segmentation of a line passes through every word
      boundary, and the best one is the concatenation of each word's best segmentation *if*
      each word's best is unique. A word met a second time (in an earlier batch or the same
      one) is cached if its best segmentation beats its second best (SentencePiece's two best
      segmentations, NBEST_GROUP words per call) by more than the float32 rounding of a
      line's path scores could move either (`score_margin`). The words of all
      printable-ASCII lines of at most MAX_CACHED_LINE characters are looked up at once; such
      a line is encoded by SentencePiece only up to its last word that is not cached (the
      best path up to a word boundary does not depend on the text after it), and the rest
      comes from the cache. Other lines (other scripts, control characters, very long lines)
      are encoded whole. Words with ties like "]]]" = "]]" + "]" or "]" + "]]" are never
      cached. Learning the words costs more than the cache saves on new text, so by default
      `CachePolicy` turns the cache on and off batch by batch from counts of what it saved
      and cost.

    In both modes lines whose ids contain a piece ending in digit + "," (the original
    re-split rule) or `<unk>` get `encode_ids`' ids: the digit-comma piece is re-split, a
    line with <unk> is encoded again (tests/prep/test_encode.py checks both modes against
    `encode_ids`, hard cases and tied segmentations included).

    Args:
      tokenizer: the SentencePieceTokenizer (its lower / keep_accents settings apply).
      word_cache: use the word cache (above) instead of exact line encoding.
      num_threads: threads of each SentencePiece batch call. 1 (the default) in Beam
        workers, which already run one per core: SentencePiece's own default (-1) starts a
        thread per core in every worker. -1 for one process alone on the machine.
      adaptive: with word_cache, let `CachePolicy` turn the cache off on batches where it
        does not pay (the default); False uses it on every batch.

    `counts` holds what the encoder did (batches, batches with the cache, tokens, tokens
    from the cache, words checked with n-best), for benchmarks.
    """

    def __init__(self, tokenizer: SentencePieceTokenizer, word_cache: bool = False,
                 num_threads: int = 1, adaptive: bool = True):
        self._tok = tokenizer
        self.word_cache = word_cache
        self._threads = num_threads
        self._policy = CachePolicy() if adaptive else None
        self.counts = dict(batches=0, cache_batches=0, tokens=0, cached_tokens=0,
                           new_words=0, checked_words=0)
        self._sp = spm.SentencePieceProcessor()
        self._sp.LoadFromSerializedProto(tokenizer.model_proto)
        # Pieces, scores and types from the parsed model: one SentencePiece call per piece
        # and property is slow, and runs in every Beam worker before its first batch.
        model = sentencepiece_model_pb2.ModelProto()
        model.ParseFromString(tokenizer.model_proto)
        pieces = [p.piece for p in model.pieces]
        # Ids whose lines need the slow path: digit-comma pieces and <unk>.
        self._recheck = np.array([len(p) > 1 and p[-1] == "," and p[-2].isdigit()
                                  for p in pieces], dtype=bool)
        self._recheck[self._sp.unk_id()] = True
        # The word cache is exact only if no piece spans a word boundary (module docstring).
        self._splits_at_spaces = not any("\u2581" in p[1:] for p in pieces)
        self._starts_word = [p.startswith("\u2581") for p in pieces]
        self._scores = [p.score for p in model.pieces]
        # Pieces whose path score is not their stored score (<unk>, control and user-defined
        # pieces such as <eop> are stored with 0): words with them are never cached.
        kinds = (model.SentencePiece.UNKNOWN, model.SentencePiece.CONTROL)
        self._special = [p.type in kinds or p.score == 0 for p in model.pieces]
        self._margin = score_margin(max(abs(x) for x in self._scores))
        self._ascii_as_is = passes_printable_ascii(model, self._sp)
        self._resplit: Dict[int, List[int]] = {}
        self._reset_cache()

    def _reset_cache(self) -> None:
        # word -> its row in _offset, or _UNSAFE; the line-end mark -> _LINE_END.
        self._index: Dict[str, int] = {_LINE_END_MARK: _LINE_END}
        self._seen_once: set = set()
        self._rows = 0                              # cached words
        self._flat = np.zeros(1 << 16, np.int32)    # ids of all cached words, concatenated
        self._offset = np.zeros(1 << 12, np.int64)  # [rows + 1] start of each word in _flat

    def _normalized(self, lines: Sequence[str]) -> List[str]:
        """`normalize` of every line, or the line itself (lowercased for uncased models)
        where SentencePiece normalizes it the same way (`passes_printable_ascii`)."""
        lower, keep = self._tok.lower, self._tok.keep_accents
        if not self._ascii_as_is:
            return [normalize(line, lower=lower, keep_accents=keep) for line in lines]
        return [(line.lower() if lower else line)
                if line.isascii() and line.isprintable() and "``" not in line
                and "''" not in line else normalize(line, lower=lower, keep_accents=keep)
                for line in lines]

    def _encode_normalized(self, texts: Sequence[str]) -> List[List[int]]:
        """SentencePiece ids of each normalized text (one batch call)."""
        return self._sp.Encode(list(texts), num_threads=self._threads) if texts else []

    def _encode_lines_whole(self, lines: Sequence[str]):
        """Line mode: (int32 [n] ids, int64 [lines] ids per line, normalized texts)."""
        texts = self._normalized(lines)
        ids, per_line = _flatten(self._encode_normalized(texts))
        if self._policy is not None:
            self._policy.record(int(ids.shape[0]))
        return ids, per_line, texts

    def encode_lines(self, lines: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """Ids of every line.

        Args:
          lines: raw lines (normalized here with `preprocess_text` semantics).

        Returns:
          (int32 [n] the ids of all lines concatenated, int64 [len(lines)] ids per line).
        """
        self.counts["batches"] += 1
        if (self.word_cache and self._splits_at_spaces
                and (self._policy is None or self._policy.use_cache())):
            # A trial (the cache has not paid on a whole batch yet) uses it on the batch's
            # first lines only: on new text a trial costs a fraction of a batch's learning.
            cut = len(lines)
            if self._policy is not None and self._policy.on_trial():
                cut = -(-len(lines) // CachePolicy.TRIAL_FRACTION)
            ids, per_line, normalized = self._encode_with_cache(lines[:cut])
            if cut < len(lines):
                rest_ids, rest_per_line, rest_texts = self._encode_lines_whole(lines[cut:])
                ids = np.concatenate([ids, rest_ids])
                per_line = np.concatenate([per_line, rest_per_line])
                normalized.update((cut + i, text) for i, text in enumerate(rest_texts))
        else:
            ids, per_line, texts = self._encode_lines_whole(lines)
            normalized = dict(enumerate(texts))
        self.counts["tokens"] += int(ids.shape[0])
        flagged = self._recheck[ids]
        if not flagged.any():
            return ids, per_line
        # The (rare) lines with a digit-comma piece or <unk>, exactly as encode_ids: a
        # digit-comma piece is replaced by its re-split, a line with <unk> is encoded again
        # (its normalization is `normalize`, already done for most of those lines).
        line_of = np.repeat(np.arange(len(lines)), per_line)
        again = np.unique(line_of[flagged]).tolist()
        with_unknown = set(line_of[ids == self._sp.unk_id()].tolist())
        ends = np.cumsum(per_line)
        lower, keep = self._tok.lower, self._tok.keep_accents
        replaced = []
        for i in again:
            if i in with_unknown:
                text = normalized.get(i)
                if text is None:
                    text = normalize(lines[i], lower=lower, keep_accents=keep)
                replaced.append(self._sp.PieceToId(self._tok.encode_pieces(text)))
            else:
                line_ids: List[int] = []
                for t in ids[ends[i] - per_line[i]:ends[i]].tolist():
                    if self._recheck[t]:
                        line_ids.extend(self._digit_comma_ids(t))
                    else:
                        line_ids.append(t)
                replaced.append(line_ids)
        return _replace_lines(ids, per_line, again, replaced)

    def _digit_comma_ids(self, piece_id: int) -> List[int]:
        """What `SentencePieceTokenizer.encode_pieces` puts in place of a piece such as
        "\u25812000," (the original's digit-comma re-split, a function of the piece alone)."""
        found = self._resplit.get(piece_id)
        if found is None:
            split = self._tok.digit_comma_split(self._sp.IdToPiece(piece_id))
            found = self._resplit[piece_id] = self._sp.PieceToId(split)
        return found

    def _add_words(self, words: List[str]) -> int:
        """Checks words seen for the second time and caches those with a clearly unique best
        segmentation. Returns how many words were checked with SentencePiece's n-best.

        Words are checked NBEST_GROUP at a time, joined by spaces: every segmentation of the
        group passes through the word boundaries, so its best is the words' bests side by
        side and its second best differs from it in the one word whose own best wins by the
        least. If the group's best wins by the margin of its longest word, every word's does;
        the words of the other (rare) groups are checked one by one.
        """
        index = self._index
        short = [w for w in words if len(w) <= MAX_CACHED_WORD]
        for w in words:
            index[w] = _UNSAFE
        if not short:
            return 0
        found: List[Tuple[str, List[int]]] = []
        groups = [short[k:k + NBEST_GROUP] for k in range(0, len(short), NBEST_GROUP)]
        single = []
        for group, paths in zip(groups, self._sp.NBestEncodeAsIds(
                [" ".join(g) for g in groups], 2)):
            by_word = self._ids_by_word(paths[0], len(group))
            if by_word is not None and self._clear_winner(paths, max(map(len, group))):
                found.extend(zip(group, by_word))
            elif len(group) > 1:
                single.extend(group)
        for w, paths in zip(single, self._sp.NBestEncodeAsIds(single, 2) if single else []):
            by_word = self._ids_by_word(paths[0], 1)
            if by_word is not None and self._clear_winner(paths, len(w)):
                found.append((w, by_word[0]))
        if found:
            start = used = int(self._offset[self._rows])
            ends = []
            new: List[int] = []
            for k, (w, ids) in enumerate(found):
                index[w] = self._rows + k
                new.extend(ids)
                used += len(ids)
                ends.append(used)
            self._flat = _grown(self._flat, used)
            self._flat[start:used] = new
            self._offset = _grown(self._offset, self._rows + len(ends) + 1)
            self._offset[self._rows + 1:self._rows + len(ends) + 1] = ends
            self._rows += len(ends)
        return len(short) + len(single)

    def _ids_by_word(self, ids: List[int], num_words: int):
        """The best path of `num_words` words split into each word's ids, or None if it does
        not split into that many words or holds a piece that must not be cached."""
        starts = [k for k, i in enumerate(ids) if self._starts_word[i]]
        if len(starts) != num_words or starts[0] != 0 or any(self._special[i] for i in ids):
            return None
        return [ids[a:b] for a, b in zip(starts, starts[1:] + [len(ids)])]

    def _clear_winner(self, paths: List[List[int]], longest: int) -> bool:
        """Whether the first (Viterbi) path beats the second by more than rounding can move
        them in a word of `longest` characters (`score_margin`)."""
        if len(paths) == 1:
            return True
        scores = self._scores
        return (sum(scores[i] for i in paths[0]) - sum(scores[i] for i in paths[1])
                > self._margin * longest)

    def _encode_with_cache(self, lines: Sequence[str]):
        """(int32 [n] ids, int64 [lines] ids per line, {line: normalized text} of the lines
        encoded whole) with the word cache (module docstring).

        A simple line (printable ASCII, at most MAX_CACHED_LINE characters) is cut into
        words; the words after its last uncached word come from the cache and the line up to
        that word is encoded by SentencePiece (all of it if its last word is uncached, none
        if every word is cached). Other lines are encoded whole.
        """
        if len(self._index) > MAX_CACHED_WORDS:
            self._reset_cache()
        num_lines = len(lines)
        # Printable ASCII (no tab or other control character inside; whitespace at the ends
        # is dropped by `normalize` anyway): `normalize` only joins the words with single
        # spaces, maps `` and '' to " (never across a space) and lowercases, so the words
        # can be taken from the raw lines, all lines of the batch at once.
        simple = [i for i, line in enumerate(lines)
                  if len(line) <= MAX_CACHED_LINE and line.isascii()
                  and (line.isprintable() or line.strip().isprintable())]
        num_simple = len(simple)
        block = (_LINE_END_SEPARATOR.join(lines if num_simple == num_lines
                                          else [lines[i] for i in simple])
                 + _LINE_END_SEPARATOR) if simple else ""
        if "``" in block or "''" in block:
            block = block.replace("``", '"').replace("''", '"')
        if self._tok.lower:
            block = block.lower()
        tokens = block.split()                      # words, and _LINE_END_MARK after each line
        index = self._index
        rows = np.fromiter(map(index.get, tokens, itertools.repeat(_NEW, len(tokens))),
                           np.int64, count=len(tokens))
        checked = 0
        pending = np.flatnonzero(rows == _NEW)
        if pending.size:
            # Words met a second time (in an earlier batch or in this one) are checked and
            # cached now; the others are remembered.
            fresh = collections.Counter(map(tokens.__getitem__, pending.tolist()))
            seen = self._seen_once
            again = sorted(w for w, n in fresh.items() if n > 1 or w in seen)
            if len(seen) > MAX_SEEN_ONCE:
                seen.clear()
            seen.difference_update(again)
            seen.update(fresh.keys() - set(again))
            if again:
                checked = self._add_words(again)
                rows[pending] = list(map(index.get, map(tokens.__getitem__, pending.tolist()),
                                         itertools.repeat(_NEW, pending.size)))
        is_end = rows == _LINE_END
        ends = np.flatnonzero(is_end)                                    # [simple lines]
        line_of = np.cumsum(is_end) - is_end                             # [tokens]
        # Position of the last uncached word of each simple line (-1: none).
        missing = np.flatnonzero((rows < 0) & ~is_end)
        last = np.full(num_simple, -1, np.int64)
        if missing.size:
            miss_line = line_of[missing]
            final = np.append(miss_line[1:] != miss_line[:-1], True)
            last[miss_line[final]] = missing[final]
        from_cache = (np.arange(len(tokens)) > last[line_of]) & ~is_end
        # Texts for SentencePiece: each simple line up to its last uncached word, then the
        # other lines whole (normalized).
        begins = np.concatenate([[0], ends[:-1] + 1])
        partial = np.flatnonzero(last >= 0)
        texts = [" ".join(tokens[b:e]) for b, e in zip(begins[partial].tolist(),
                                                        (last[partial] + 1).tolist())]
        simple_arr = np.asarray(simple, np.int64)
        others = np.setdiff1d(np.arange(num_lines), simple_arr)
        normalized = dict(zip(others.tolist(), self._normalized([lines[i]
                                                                 for i in others.tolist()])))
        texts += normalized.values()
        encoded_ids, encoded_len = _flatten(self._encode_normalized(texts))
        encoded_line = np.concatenate([simple_arr[partial], others])
        # Cached pieces of each word that comes from the cache.
        cached_rows = rows[from_cache]
        offsets = self._offset
        starts = offsets[cached_rows]
        lengths = offsets[cached_rows + 1] - starts
        shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        cached_ids = self._flat[shift + np.arange(int(lengths.sum()))]
        cached_line = simple_arr[np.repeat(line_of[from_cache], lengths)]  # [cached tokens]
        # Each line: its encoded part, then its cached part.
        enc_per_line = np.zeros(num_lines, np.int64)
        enc_per_line[encoded_line] = encoded_len
        per_line = enc_per_line + np.bincount(cached_line, minlength=num_lines)
        line_start = np.cumsum(per_line) - per_line
        ids = np.empty(int(per_line.sum()), np.int32)
        first = np.cumsum(encoded_len) - encoded_len
        ids[np.repeat(line_start[encoded_line] - first, encoded_len)
            + np.arange(encoded_ids.shape[0])] = encoded_ids
        rank = np.arange(cached_ids.shape[0])
        if rank.size:
            line_begin = np.flatnonzero(np.append(True, cached_line[1:] != cached_line[:-1]))
            rank = rank - np.repeat(line_begin, np.diff(np.append(line_begin, rank.size)))
        ids[line_start[cached_line] + enc_per_line[cached_line] + rank] = cached_ids
        self.counts["cache_batches"] += 1
        self.counts["cached_tokens"] += int(cached_ids.shape[0])
        self.counts["checked_words"] += checked
        self.counts["new_words"] += int(pending.size)
        if self._policy is not None:
            self._policy.record(ids.shape[0], words=len(tokens) - num_simple,
                                new_words=pending.size, checked_words=checked,
                                cached_tokens=cached_ids.shape[0], with_cache=True)
        return ids, per_line, normalized


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
