"""Text normalization and SentencePiece encoding exactly as the original XLNet.

Every code path that turns text into ids (data preparation, fine-tuning readers, serving)
goes through `preprocess_text` and `SentencePieceTokenizer.encode_ids`, so the same text
always gives the same ids.

Special pieces and their ids are fixed in `xlnet_tf2.special_ids` (docs/SEMANTICS.md#special-ids);
`train_sentencepiece` produces models whose pieces 0..8 are exactly those.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import unicodedata
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import sentencepiece as spm

from xlnet_tf2 import special_ids
from xlnet_tf2 import fileio

SPIECE_UNDERLINE = "\u2581"


class TokenizerError(ValueError):
    """A SentencePiece model is missing or does not have the XLNet special pieces."""


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _drop_combining(match: "re.Match") -> str:
    char = match.group()
    return "" if unicodedata.combining(char) else char


def preprocess_text(text: str, *, lower: bool = False, remove_space: bool = True,
                    keep_accents: bool = False) -> str:
    """Normalizes raw text the way the original XLNet does before SentencePiece.

    Args:
      text: raw text.
      lower: lowercase the result (only for uncased models; the released models are cased).
      remove_space: strip and collapse every run of whitespace into one space.
      keep_accents: keep combining marks; by default the text is NFKD-normalized and the
        combining marks (accents) are dropped.

    Returns:
      The normalized text; two backquotes and two single quotes become a double quote.
    """
    if remove_space:
        text = " ".join(text.strip().split())
    text = text.replace("``", '"').replace("''", '"')
    if not keep_accents:
        text = unicodedata.normalize("NFKD", text)
        if not text.isascii():
            # Only non-ASCII characters can be combining marks: test those alone (one
            # regex callback each) instead of every character in Python.
            text = _NON_ASCII.sub(_drop_combining, text)
    if lower:
        text = text.lower()
    return text


def normalize_with_offsets(text: str, *, lower: bool = False,
                           keep_accents: bool = False) -> Tuple[str, List[int], List[int]]:
    """`preprocess_text(text)` and, for each of its characters, the raw characters
    [start, end) it came from: a collapsed whitespace run maps to its first character, '"'
    from a quote pair to both characters of the pair, NFKD pieces to their source character.
    Returns (normalized, starts, ends)."""
    # 1. strip + collapse whitespace (str.isspace, as str.split()).
    chars: List[Tuple[str, int, int]] = []
    for i, c in enumerate(text):
        if c.isspace():
            if chars and chars[-1][0] != " ":
                chars.append((" ", i, i + 1))
        else:
            chars.append((c, i, i + 1))
    if chars and chars[-1][0] == " ":
        chars.pop()
    # 2. "``" -> '"', then "''" -> '"' (two passes, left to right, as str.replace).
    for pair in ("``", "''"):
        out, k = [], 0
        while k < len(chars):
            if k + 1 < len(chars) and chars[k][0] + chars[k + 1][0] == pair:
                out.append(('"', chars[k][1], chars[k + 1][2]))
                k += 2
            else:
                out.append(chars[k])
                k += 1
        chars = out
    # 3. NFKD, drop combining marks. Per character equals the whole-string result: canonical
    # reordering only moves combining marks, and those are dropped.
    if not keep_accents:
        chars = [(d, i, j) for c, i, j in chars for d in unicodedata.normalize("NFKD", c)
                 if not unicodedata.combining(d)]
    if lower:
        per_char = [(d, i, j) for c, i, j in chars for d in c.lower()]
        whole = "".join(c for c, _, _ in chars).lower()  # context-sensitive (final sigma)
        if len(whole) == len(per_char):
            per_char = [(d, i, j) for d, (_, i, j) in zip(whole, per_char)]
        chars = per_char
    normalized = "".join(c for c, _, _ in chars)
    expected = preprocess_text(text, lower=lower, keep_accents=keep_accents)
    if normalized != expected:  # a bug here would silently misplace every answer
        raise AssertionError(f"normalize_with_offsets disagrees with preprocess_text on "
                             f"{text[:80]!r}.")
    return normalized, [i for _, i, _ in chars], [j for _, _, j in chars]


def model_checksum(model_bytes: bytes) -> str:
    """SHA-256 hex digest of a serialized SentencePiece model (recorded in manifests)."""
    return hashlib.sha256(model_bytes).hexdigest()


class SentencePieceTokenizer:
    """A loaded SentencePiece model with the XLNet encoding rules.

    Construct with `from_file` or from the serialized model bytes (what Beam workers get, so
    they need no access to the original path). The constructor checks that pieces 0..8 are
    the XLNet special pieces and raises `TokenizerError` otherwise.
    """

    def __init__(self, model_proto: bytes, *, lower: bool = False, keep_accents: bool = False,
                 source: str = "<bytes>"):
        self._model_proto = model_proto
        self.lower = lower
        self.keep_accents = keep_accents
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(model_proto)
        except Exception as e:  # sentencepiece raises plain RuntimeError/OSError here
            raise TokenizerError(f"{source} is not a valid SentencePiece model ({e}). Pass a "
                                 "model written by data_prep/train_sentencepiece.py.") from None
        check_special_pieces(self._sp, source)

    @classmethod
    def from_file(cls, path: str, **kwargs) -> "SentencePieceTokenizer":
        """Loads a `.model` file; raises `TokenizerError` naming the path if it is missing."""
        if not path or not fileio.exists(path):
            raise TokenizerError(f"SentencePiece model {path!r} does not exist. Train one with "
                                 "data_prep/train_sentencepiece.py or fix --spm_model.")
        with fileio.open_file(path, "rb") as f:
            return cls(f.read(), source=path, **kwargs)

    @property
    def model_proto(self) -> bytes:
        return self._model_proto

    @property
    def checksum(self) -> str:
        return model_checksum(self._model_proto)

    @property
    def vocab_size(self) -> int:
        return self._sp.GetPieceSize()

    def id_to_piece(self, token_id: int) -> str:
        return self._sp.IdToPiece(int(token_id))

    def piece_to_id(self, piece: str) -> int:
        return self._sp.PieceToId(piece)

    def digit_comma_split(self, piece: str) -> Optional[List[str]]:
        """The original's re-split of a piece ending in a digit and a comma, or None.

        "▁2000," is encoded again without the comma and the comma becomes its own piece:
        "▁2000" ",". A piece that did not start a word loses the "▁" its re-encoding adds.
        """
        if not (len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()):
            return None
        sub = self._sp.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
        if piece[0] != SPIECE_UNDERLINE and sub and sub[0][0] == SPIECE_UNDERLINE:
            if len(sub[0]) == 1:
                sub = sub[1:]
            else:
                sub[0] = sub[0][1:]
        return sub + [piece[-1]]

    def encode_pieces(self, text: str) -> List[str]:
        """Pieces of already-normalized text, with the original digit-comma re-split."""
        out: List[str] = []
        for piece in self._sp.EncodeAsPieces(text):
            split = self.digit_comma_split(piece)
            if split is None:
                out.append(piece)
            else:
                out.extend(split)
        return out

    def encode_ids(self, text: str, *, normalize: bool = True) -> List[int]:
        """Ids of `text`: `preprocess_text` (unless normalize=False), then `encode_pieces`."""
        if normalize:
            text = preprocess_text(text, lower=self.lower, keep_accents=self.keep_accents)
        return [self._sp.PieceToId(p) for p in self.encode_pieces(text)]

    def encode_ids_with_offsets(self, text: str) -> Tuple[List[int], List[Tuple[int, int]]]:
        """`encode_ids(text)` and each token's characters in the RAW text, [start, end).

        What a span means. A token covers the raw characters its visible characters came
        from, through both normalizations: ours (`normalize_with_offsets`: whitespace
        collapsed, a quote pair `` or '' made into '"' covers both raw characters, NFKD pieces
        of one character all cover that character, dropped accents belong to their letter)
        and SentencePiece's own (its alignment, `EncodeAsImmutableProto`). The word-start
        marker "▁" is not a visible character, so "▁the" covers "the", and a bare "▁" has an
        empty span (p, p) at the start of the next character (p = len(text) at the end), as
        the SQuAD reader defines it. Collapsed whitespace belongs to no token.
        """
        normalized, raw_starts, raw_ends = normalize_with_offsets(
            text, lower=self.lower, keep_accents=self.keep_accents)
        ids: List[int] = []
        spans: List[Tuple[int, int]] = []  # in normalized characters, marker excluded
        for p in self._sp.EncodeAsImmutableProto(normalized).pieces:
            begin, end = p.begin, p.end
            while begin < end and normalized[begin] == " ":
                begin += 1
            split = self.digit_comma_split(p.piece)
            if split is None:
                ids.append(p.id)
                spans.append((begin, end))
                continue
            # the re-split pieces share the piece's characters in order; if SentencePiece's
            # normalization changed their count, each gets the whole piece
            widths = [len(q.replace(SPIECE_UNDERLINE, "")) for q in split]
            exact = sum(widths) == end - begin
            at = begin
            for q, width in zip(split, widths):
                ids.append(self._sp.PieceToId(q))
                spans.append((at, at + width) if exact else (begin, end))
                at += width
        raw = []
        for begin, end in spans:
            if begin < end:
                raw.append((raw_starts[begin], raw_ends[end - 1]))
            else:
                at = raw_starts[begin] if begin < len(raw_starts) else len(text)
                raw.append((at, at))
        return ids, raw


def check_special_pieces(sp: spm.SentencePieceProcessor, source: str) -> None:
    """Raises `TokenizerError` unless pieces 0..8 are the XLNet special pieces in order."""
    size = sp.GetPieceSize()
    found = [sp.IdToPiece(i) for i in range(min(size, len(special_ids.SPECIAL_PIECES)))]
    if tuple(found) != special_ids.SPECIAL_PIECES:
        raise TokenizerError(
            f"{source} is incompatible with XLNet: pieces 0..8 are {found}, expected "
            f"{list(special_ids.SPECIAL_PIECES)}. Train the model with "
            "data_prep/train_sentencepiece.py.")
    for piece in special_ids.CONTROL_PIECES:
        if not sp.IsControl(sp.PieceToId(piece)):
            raise TokenizerError(f"{source}: {piece} must be a control symbol. Train the model "
                                 "with data_prep/train_sentencepiece.py.")


def iter_training_sentences(paths: Iterable[str], *, lower: bool = False,
                            keep_accents: bool = False) -> Iterator[str]:
    """Normalized non-empty lines of the given text files (the tokenizer training input)."""
    for path in paths:
        with open(path, "rb") as f:
            for raw in f:
                line = raw.decode("utf-8", errors="replace")
                text = preprocess_text(line, lower=lower, keep_accents=keep_accents)
                if text:
                    yield text


def train_sentencepiece(input_paths: Sequence[str], *, vocab_size: int, model_prefix: str,
                        lower: bool = False, keep_accents: bool = False,
                        character_coverage: float = 0.99995,
                        input_sentence_size: int = 10_000_000,
                        num_threads: Optional[int] = None,
                        hard_vocab_limit: bool = True) -> str:
    """Trains a unigram SentencePiece model with the XLNet special pieces at ids 0..8.

    The input lines are normalized with `preprocess_text` first, as at encoding time.
    `<cls> <sep> <pad> <mask> <eod>` are control symbols (never produced from raw text) and
    `<eop>` is user-defined (matched in raw text), as in the original setup.
    With `hard_vocab_limit` (the default) a text too small for `vocab_size` pieces is an error
    (RuntimeError, "Vocabulary size too high"); without it `vocab_size` is an upper bound and
    the model has as many pieces as the text gives, at most `vocab_size`.

    Returns:
      The path of the written `.model` file (`model_prefix + ".model"`).
    """
    if not input_paths:
        raise TokenizerError("No input files to train SentencePiece on; check --input.")
    parent = os.path.dirname(os.path.abspath(model_prefix))
    os.makedirs(parent, exist_ok=True)
    # Trained under a staging directory beside PREFIX.model and renamed into place: a failed
    # or killed training leaves an earlier model of that name as it was.
    for leftover in fileio.leftovers(model_prefix + ".model"):
        print(f"[sentencepiece] found {leftover}, an incomplete training left by a killed run; "
              "removing it.", file=sys.stderr, flush=True)
        fileio.rmtree(leftover)
    staging = fileio.staging_directory(model_prefix + ".model")
    try:
        _train(input_paths, os.path.join(staging, "spm"), vocab_size=vocab_size, lower=lower,
               keep_accents=keep_accents, character_coverage=character_coverage,
               input_sentence_size=input_sentence_size, num_threads=num_threads,
               hard_vocab_limit=hard_vocab_limit)
        with open(os.path.join(staging, "spm.model"), "rb") as f:
            SentencePieceTokenizer(f.read(), source=model_prefix + ".model")  # ids 0..8
        fileio.rename(os.path.join(staging, "spm.vocab"), model_prefix + ".vocab")
        fileio.rename(os.path.join(staging, "spm.model"), model_prefix + ".model")
    except BaseException as e:
        raise fileio.output_error(e, model_prefix + ".model") or e
    finally:
        fileio.rmtree(staging)
    return model_prefix + ".model"


def _train(input_paths: Sequence[str], model_prefix: str, *, vocab_size: int, lower: bool,
           keep_accents: bool, character_coverage: float, input_sentence_size: int,
           num_threads: Optional[int], hard_vocab_limit: bool) -> None:
    spm.SentencePieceTrainer.Train(
        sentence_iterator=iter_training_sentences(input_paths, lower=lower,
                                                  keep_accents=keep_accents),
        model_prefix=model_prefix,
        vocab_size=vocab_size,
        hard_vocab_limit=hard_vocab_limit,
        model_type="unigram",
        character_coverage=character_coverage,
        input_sentence_size=input_sentence_size,
        shuffle_input_sentence=True,
        unk_id=special_ids.UNK_ID,
        bos_id=special_ids.BOS_ID,
        eos_id=special_ids.EOS_ID,
        pad_id=-1,  # <pad> is an ordinary control symbol at id 5, as in the original
        control_symbols=list(special_ids.CONTROL_PIECES),
        user_defined_symbols=list(special_ids.USER_DEFINED_PIECES),
        num_threads=num_threads or os.cpu_count() or 1,
        minloglevel=2,
    )
