"""Text normalization and SentencePiece encoding exactly as the original XLNet.

Every code path that turns text into ids (data preparation, fine-tuning readers, serving)
goes through `preprocess_text` and `SentencePieceTokenizer.encode_ids`, so the same text
always gives the same ids.

Special pieces and their ids are fixed in `xlnet_tf2.special_ids` (XLNET_REFERENCE.md §1);
`train_sentencepiece` produces models whose pieces 0..8 are exactly those.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from typing import Iterable, Iterator, List, Optional, Sequence

import sentencepiece as spm

from xlnet_tf2 import special_ids
from xlnet_tf2 import fileio

SPIECE_UNDERLINE = "\u2581"


class TokenizerError(ValueError):
    """A SentencePiece model is missing or does not have the XLNet special pieces."""


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
        text = "".join(c for c in text if not unicodedata.combining(c))
    if lower:
        text = text.lower()
    return text


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

    def encode_pieces(self, text: str) -> List[str]:
        """Pieces of already-normalized text, with the original digit-comma re-split.

        A piece such as "▁2000," (a comma right after a digit) is encoded again without the
        comma, and the comma becomes its own piece: "▁2000" ",".
        """
        pieces = self._sp.EncodeAsPieces(text)
        out: List[str] = []
        for piece in pieces:
            if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
                sub = self._sp.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
                if piece[0] != SPIECE_UNDERLINE and sub and sub[0][0] == SPIECE_UNDERLINE:
                    if len(sub[0]) == 1:
                        sub = sub[1:]
                    else:
                        sub[0] = sub[0][1:]
                sub.append(piece[-1])
                out.extend(sub)
            else:
                out.append(piece)
        return out

    def encode_ids(self, text: str, *, normalize: bool = True) -> List[int]:
        """Ids of `text`: `preprocess_text` (unless normalize=False), then `encode_pieces`."""
        if normalize:
            text = preprocess_text(text, lower=self.lower, keep_accents=self.keep_accents)
        return [self._sp.PieceToId(p) for p in self.encode_pieces(text)]

    def decode_ids(self, ids: Sequence[int]) -> str:
        return self._sp.DecodeIds([int(i) for i in ids])


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
                        num_threads: Optional[int] = None) -> str:
    """Trains a unigram SentencePiece model with the XLNet special pieces at ids 0..8.

    The input lines are normalized with `preprocess_text` first, as at encoding time.
    `<cls> <sep> <pad> <mask> <eod>` are control symbols (never produced from raw text) and
    `<eop>` is user-defined (matched in raw text), as in the original setup.

    Returns:
      The path of the written `.model` file (`model_prefix + ".model"`).
    """
    if not input_paths:
        raise TokenizerError("No input files to train SentencePiece on; check --input.")
    parent = os.path.dirname(os.path.abspath(model_prefix))
    os.makedirs(parent, exist_ok=True)
    spm.SentencePieceTrainer.Train(
        sentence_iterator=iter_training_sentences(input_paths, lower=lower,
                                                  keep_accents=keep_accents),
        model_prefix=model_prefix,
        vocab_size=vocab_size,
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
    path = model_prefix + ".model"
    with open(path, "rb") as f:
        SentencePieceTokenizer(f.read(), source=path)  # verifies ids 0..8
    return path
