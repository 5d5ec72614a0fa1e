"""`XLNetTokenizer`: the tokenizer object HuggingFace users expect, on the project's own
SentencePiece encoding (xlnet_tf2.tokenizers.sentencepiece_tokenizer: the same ids as data preparation, fine-tuning
and the in-graph serving tokenizer).

    tokenizer = XLNetTokenizer.from_pretrained("path/to/model_dir")
    batch = tokenizer(["first text", "second"], ["pair b", "pair b 2"], max_length=128)
    model(batch)                      # input_ids, segment_ids, attention_mask: int32 [B, L]
    tokenizer.decode(ids, skip_special_tokens=True)

Layout (XLNET_REFERENCE.md §6, xlnet_tf2/tokenizers/packing.py): `A <sep> B <sep> <cls>`,
LEFT padded with <pad> (segment ids A 0, B 1, <cls> 2, padding 4; attention_mask 1 on real
tokens), so the last position is always <cls>. Over-long inputs lose tokens from the end of
the longer text, as in fine-tuning.

Differences from HuggingFace's tokenizer call, on purpose: a batch is padded by default
(`padding=True`) and returned as numpy int32 arrays (`return_tensors="np"`), so the result
is a ready model input; the segment ids are returned as `segment_ids` (the model also accepts
HuggingFace's `token_type_ids`).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from xlnet_tf2 import locate
from xlnet_tf2 import special_ids as sid
from xlnet_tf2.tokenizers.packing import LAYOUTS, encode_sequence_pair
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

TextInput = Union[str, Sequence[str]]
PADDING_CHOICES = (True, False, "longest", "max_length", "do_not_pad")
RETURN_TENSORS = (None, "np", "tf")
MODEL_INPUT_NAMES = ("input_ids", "segment_ids", "attention_mask")


class XLNetTokenizer:
    """SentencePiece XLNet tokenizer with batch encoding, padding, truncation and decoding.

    Args:
      spm_model: path of the SentencePiece `.model` file (pieces 0..8 must be XLNet's).
      lower: lowercase after normalization (uncased models only).
      keep_accents: keep combining marks instead of dropping them after NFKD.
    """

    unk_token, bos_token, eos_token = "<unk>", "<s>", "</s>"
    cls_token, sep_token, pad_token, mask_token = "<cls>", "<sep>", "<pad>", "<mask>"
    unk_token_id, bos_token_id, eos_token_id = sid.UNK_ID, sid.BOS_ID, sid.EOS_ID
    cls_token_id, sep_token_id, pad_token_id = sid.CLS_ID, sid.SEP_ID, sid.PAD_ID
    mask_token_id = sid.MASK_ID
    eod_token_id, eop_token_id = sid.EOD_ID, sid.EOP_ID
    all_special_ids = tuple(range(len(sid.SPECIAL_PIECES)))
    padding_side = "left"
    model_input_names = MODEL_INPUT_NAMES

    def __init__(self, spm_model: str, lower: bool = False, keep_accents: bool = False):
        self.spm_model = spm_model
        self.sp = SentencePieceTokenizer.from_file(spm_model, lower=lower,
                                                   keep_accents=keep_accents)

    @classmethod
    def from_pretrained(cls, name_or_dir: str, **kwargs) -> "XLNetTokenizer":
        """The tokenizer of a model directory or name, found as `xlnet_tf2.from_pretrained`
        finds the model (a converted, HuggingFace or original release directory, or a hub
        repository id); its `spiece.model` is used."""
        return cls(locate.resolve(name_or_dir).spm_model(), **kwargs)

    # ------------------------------------------------------------------ vocabulary
    @property
    def vocab_size(self) -> int:
        return self.sp.vocab_size

    def __len__(self) -> int:
        return self.vocab_size

    def tokenize(self, text: str) -> List[str]:
        """Pieces of `text` (normalized first, digit-comma rule applied)."""
        return [self.sp.id_to_piece(i) for i in self.sp.encode_ids(text)]

    def convert_tokens_to_ids(self, tokens: Union[str, Sequence[str]]):
        if isinstance(tokens, str):
            return self.sp.piece_to_id(tokens)
        return [self.sp.piece_to_id(t) for t in tokens]

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        if isinstance(ids, (int, np.integer)):
            return self.sp.id_to_piece(int(ids))
        return [self.sp.id_to_piece(int(i)) for i in ids
                if not (skip_special_tokens and int(i) in self.all_special_ids)]

    # ------------------------------------------------------------------ encoding
    def encode(self, text: str, text_pair: Optional[str] = None,
               add_special_tokens: bool = True) -> List[int]:
        """Ids of one text (or pair); with special tokens `A <sep> [B <sep>] <cls>`, without
        padding or truncation. `add_special_tokens=False` gives the bare text ids (what a
        generation prompt takes)."""
        ids_a = self.sp.encode_ids(text)
        ids_b = None if text_pair is None else self.sp.encode_ids(text_pair)
        if not add_special_tokens:
            return ids_a + (ids_b or [])
        return self._with_special_tokens(ids_a, ids_b)

    @staticmethod
    def _with_special_tokens(ids_a, ids_b) -> List[int]:
        ids = list(ids_a) + [sid.SEP_ID]
        if ids_b is not None:
            ids += list(ids_b) + [sid.SEP_ID]
        return ids + [sid.CLS_ID]

    def __call__(self, text: TextInput, text_pair: Optional[TextInput] = None, *,
                 padding: Union[bool, str] = True, truncation: bool = True,
                 max_length: Optional[int] = None, return_tensors: Optional[str] = "np",
                 layout: str = "cls_last") -> Dict[str, object]:
        """Encodes a text or a batch of texts (and pairs) into model inputs.

        Args:
          text: a string or a list of strings (a single string is a batch of one).
          text_pair: the second texts (same count), or None.
          padding: True / "longest": pad to the longest row (at most max_length);
            "max_length": pad every row to max_length; False / "do_not_pad": no padding
            (rows keep their lengths; only possible with return_tensors=None).
          truncation: cut rows longer than max_length (the end of the longer text goes
            first). Without truncation, longer rows are kept whole and set the padded length.
          max_length: the sequence length L, special tokens included.
          return_tensors: "np" (int32 arrays), "tf" (int32 tensors) or None (Python lists).
          layout: "cls_last" (XLNet's, left padded) or "cls_first" (right padded).
        Returns:
          {"input_ids", "segment_ids", "attention_mask"}, each [B, L].
        """
        texts = [text] if isinstance(text, str) else list(text)
        pairs = None
        if text_pair is not None:
            pairs = [text_pair] if isinstance(text_pair, str) else list(text_pair)
            if len(pairs) != len(texts):
                raise ValueError(f"text_pair has {len(pairs)} entries for {len(texts)} texts.")
        if padding not in PADDING_CHOICES:
            raise ValueError(f"padding must be one of {PADDING_CHOICES}, got {padding!r}.")
        if return_tensors not in RETURN_TENSORS:
            raise ValueError(f"return_tensors must be one of {RETURN_TENSORS}, got "
                             f"{return_tensors!r}.")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
        if padding == "max_length" and max_length is None:
            raise ValueError('padding="max_length" needs max_length.')
        if max_length is not None and max_length < 3:
            raise ValueError(f"max_length must be at least 3 (room for <sep> <sep> <cls>), "
                             f"got {max_length}.")
        ids_a = [self.sp.encode_ids(t) for t in texts]
        ids_b = None if pairs is None else [self.sp.encode_ids(t) for t in pairs]
        specials = 2 if ids_b is None else 3  # <sep> [<sep>] <cls>
        natural = [len(a) + specials + (0 if ids_b is None else len(ids_b[i]))
                   for i, a in enumerate(ids_a)]
        cut = truncation and max_length is not None
        lengths = [min(n, max_length) if cut else n for n in natural]
        if padding in (False, "do_not_pad"):
            if return_tensors is not None:
                raise ValueError("Rows of different lengths cannot be stacked: use padding=True "
                                 "or return_tensors=None.")
            # (an empty single text is 2 tokens; the layout function needs 3, so the padding
            # it adds is dropped again)
            rows = [encode_sequence_pair(a, None if ids_b is None else ids_b[i], max(n, 3),
                                         layout) for i, (a, n) in enumerate(zip(ids_a, lengths))]
            return {k: [r[k][r["attention_mask"] == 1].tolist() for r in rows]
                    for k in MODEL_INPUT_NAMES}
        seq_len = max(max(lengths, default=3), 3)
        if padding == "max_length":
            seq_len = max(seq_len, max_length)
        rows = [encode_sequence_pair(a, None if ids_b is None else ids_b[i], seq_len, layout)
                for i, a in enumerate(ids_a)]
        batch = {k: np.stack([r[k] for r in rows]) if rows
                 else np.zeros((0, seq_len), np.int32) for k in MODEL_INPUT_NAMES}
        if return_tensors is None:
            return {k: v.tolist() for k, v in batch.items()}
        if return_tensors == "tf":
            import tensorflow as tf

            return {k: tf.constant(v) for k, v in batch.items()}
        return batch

    # ------------------------------------------------------------------ decoding
    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Text of `ids` (a list, or a 1-D array or tensor). Special ids (0..8: <unk>, <s>,
        </s>, <cls>, <sep>, <pad>, <mask>, <eod>, <eop>) are dropped with
        skip_special_tokens, otherwise written as their pieces between spaces."""
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        parts, run = [], []
        for i in ids:
            if i in self.all_special_ids:
                if run:
                    parts.append(self.sp.decode_ids(run))
                    run = []
                if not skip_special_tokens:
                    parts.append(self.sp.id_to_piece(i))
            else:
                run.append(i)
        if run:
            parts.append(self.sp.decode_ids(run))
        return " ".join(p for p in parts if p)

    def batch_decode(self, sequences, skip_special_tokens: bool = False) -> List[str]:
        return [self.decode(s, skip_special_tokens=skip_special_tokens) for s in sequences]
