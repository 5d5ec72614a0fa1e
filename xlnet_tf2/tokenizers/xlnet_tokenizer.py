"""`XLNetTokenizer`: HuggingFace's tokenizer interface on this project's SentencePiece encoding
(xlnet_tf2/tokenizers/sentencepiece_tokenizer.py: the same ids as the original XLNet, data
preparation, fine-tuning and the in-graph serving tokenizer). Usage, the layout and where it
differs from HF: `XLNetTokenizer`. Loads neither TensorFlow nor Keras.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from xlnet_tf2 import fileio, locate
from xlnet_tf2 import special_ids as sid
from xlnet_tf2.run_dir import SPM_FILE
from xlnet_tf2.tokenizers import batching
from xlnet_tf2.tokenizers.packing import LAYOUTS, with_special_tokens
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import (SPIECE_UNDERLINE,
                                                          SentencePieceTokenizer, TokenizerError,
                                                          preprocess_text)

CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
MODEL_INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")
TYPE_ID_NAMES = ("token_type_ids", "segment_ids")
RETURN_TENSORS = (None, "np", "tf")
VERY_LARGE_INTEGER = int(1e30)  # HF's model_max_length for XLNet: relative positions, no limit
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                  "sep_token": "<sep>", "pad_token": "<pad>", "cls_token": "<cls>",
                  "mask_token": "<mask>"}
ADDITIONAL_SPECIAL_TOKENS = ("<eop>", "<eod>")
# Spaces HF's clean_up_tokenization removes (off by default for XLNet, as in HF).
_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
             (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))

TextInput = Union[str, Sequence[str], Sequence[Sequence[str]]]


class XLNetTokenizer:
    """SentencePiece XLNet tokenizer with HuggingFace's calling conventions.

        tokenizer = XLNetTokenizer.from_pretrained("converted/base")   # a model directory
        batch = tokenizer(["first text", "second"], ["pair b", "pair b 2"], max_length=128)
        # input_ids, token_type_ids, attention_mask int32 [B, L]
        model = xlnet_tf2.XLNetModel.from_pretrained("converted/base")
        model(batch)                      # last_hidden_state [B, L, D]
        tokenizer.decode(batch["input_ids"][0], skip_special_tokens=True)
        tokenizer.save_pretrained("dir")  # spiece.model + configs transformers.XLNetTokenizer reads

    Layout (docs/SEMANTICS.md#fine-tuning-formats, packing.py): `A <sep> B <sep> <cls>`, LEFT
    padded with <pad> (token type ids A 0, B 1, <cls> 2, padding 4; attention_mask 1 on real
    tokens), so the last position is <cls>, where the sequence classifiers read.
    `layout="cls_first"` gives `<cls> A <sep> B <sep>`, right padded, for the `first` summary.

    The call takes HF's keywords (add_special_tokens, padding, truncation, max_length, stride,
    is_split_into_words, pad_to_multiple_of, padding_side, return_tensors,
    return_token_type_ids, return_attention_mask, return_overflowing_tokens,
    return_special_tokens_mask, return_offsets_mapping, return_length). Where HF's slow
    (SentencePiece) tokenizer and its fast one differ, this one follows the slow one, which is
    the original's encoding; the differences from transformers' tokenizers are listed, with
    their causes, in tests/tokenizers/test_xlnet_tokenizer_hf.py. On purpose, two defaults
    differ from HF: a batch is padded (`padding=True`) and comes back as numpy int32 arrays
    (`return_tensors="np"`), so the result is a ready model input; pass
    `padding=False, return_tensors=None` for HF's lists.

    The segment ids are returned as `token_type_ids`, HF's name. Construct with
    `model_input_names=("input_ids", "segment_ids", "attention_mask")` to get them under this
    project's name instead (the model takes either name, but refuses both at once, so one
    batch never carries both). `return_tensors="tf"` imports TensorFlow when asked.

    Args:
      vocab_file: path of the SentencePiece `.model` file (pieces 0..8 must be XLNet's).
      do_lower_case: lowercase after normalization (uncased models only).
      remove_space: must stay True: the original always collapses whitespace.
      keep_accents: keep combining marks instead of dropping them after NFKD.
      padding_side: "left" (XLNet's: <cls> stays last) or "right".
      model_max_length: HF's limit used by nothing here but kept and saved (XLNet has none).
      clean_up_tokenization_spaces: decode's default (HF's XLNet default False).
      model_input_names: which keys a call returns by default; "segment_ids" instead of
        "token_type_ids" gives this project's name for the segment ids.
    """

    padding_side = "left"
    truncation_side = "right"
    vocab_files_names = {"vocab_file": SPM_FILE}

    def __init__(self, vocab_file: str, do_lower_case: bool = False, remove_space: bool = True,
                 keep_accents: bool = False, *, padding_side: str = "left",
                 model_max_length: int = VERY_LARGE_INTEGER,
                 clean_up_tokenization_spaces: bool = False,
                 model_input_names: Sequence[str] = MODEL_INPUT_NAMES):
        if not isinstance(vocab_file, (str, os.PathLike)):
            raise TokenizerError(
                f"vocab_file must be the path of a SentencePiece model (spiece.model), got "
                f"{type(vocab_file).__name__}; to load a model directory use "
                "XLNetTokenizer.from_pretrained(directory).")
        vocab_file = os.fspath(vocab_file)
        if not remove_space:
            raise ValueError("remove_space=False is not supported: XLNet's encoding always "
                             "collapses whitespace (the released models were trained so).")
        _check_side(padding_side)
        names = list(model_input_names)
        if (names[:1] != ["input_ids"] or sum(n in TYPE_ID_NAMES for n in names) > 1
                or not set(names) <= {"input_ids", "attention_mask", *TYPE_ID_NAMES}):
            raise ValueError(f"model_input_names must be input_ids, then token_type_ids or "
                             f"segment_ids and/or attention_mask; got {list(model_input_names)}.")
        self.vocab_file = self.spm_model = vocab_file
        self.do_lower_case = do_lower_case
        self.keep_accents = keep_accents
        self.remove_space = True
        self.padding_side = padding_side
        self.model_max_length = model_max_length
        self.clean_up_tokenization_spaces = clean_up_tokenization_spaces
        self.model_input_names = names
        self.sp = SentencePieceTokenizer.from_file(vocab_file, lower=do_lower_case,
                                                   keep_accents=keep_accents)

    # ------------------------------------------------------------------ loading and saving
    @classmethod
    def from_pretrained(cls, name_or_dir: str, **kwargs) -> "XLNetTokenizer":
        """The tokenizer of a directory or name: a directory with spiece.model (what
        save_pretrained writes, this project's or HF's model directories, the original
        release), else whatever `xlnet_tf2.from_pretrained` finds for the name (xlnet_tf2.locate:
        a hub repository id or a release name). A tokenizer_config.json there supplies
        do_lower_case, keep_accents, padding_side, model_max_length,
        clean_up_tokenization_spaces and model_input_names; keyword arguments override."""
        spm_model = os.path.join(name_or_dir, SPM_FILE)
        if not fileio.exists(spm_model):
            if fileio.isdir(name_or_dir) and locate.detect_layout(name_or_dir) is None:
                raise TokenizerError(
                    f"{name_or_dir} holds no {SPM_FILE}, the SentencePiece model this tokenizer "
                    "reads (transformers 5's save_pretrained writes only tokenizer.json): copy "
                    "the model's spiece.model there.")
            spm_model = locate.resolve(name_or_dir).spm_model()  # one clear error if none
        options = _read_config(os.path.dirname(spm_model))
        options.update(kwargs)
        return cls(spm_model, **options)

    def save_pretrained(self, save_directory: str) -> Tuple[str, str, str]:
        """Writes spiece.model, tokenizer_config.json and special_tokens_map.json (each
        atomically); `transformers.XLNetTokenizer.from_pretrained` / `AutoTokenizer` read the
        directory as well as this class does. Returns the three paths."""
        fileio.makedirs(save_directory)
        config = {"tokenizer_class": "XLNetTokenizer", "do_lower_case": self.do_lower_case,
                  "remove_space": True, "keep_accents": self.keep_accents, **SPECIAL_TOKENS,
                  "additional_special_tokens": list(ADDITIONAL_SPECIAL_TOKENS),
                  "padding_side": self.padding_side, "truncation_side": "right",
                  "model_max_length": self.model_max_length,
                  "clean_up_tokenization_spaces": self.clean_up_tokenization_spaces,
                  "model_input_names": self.model_input_names}
        special = {**SPECIAL_TOKENS, "additional_special_tokens": list(ADDITIONAL_SPECIAL_TOKENS)}
        paths = tuple(os.path.join(save_directory, n)
                      for n in (SPM_FILE, CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE))
        fileio.write_atomically(paths[0], self.sp.model_proto)
        for path, values in zip(paths[1:], (config, special)):
            fileio.write_atomically(path, (json.dumps(values, indent=2) + "\n").encode())
        return paths

    # ------------------------------------------------------------------ vocabulary
    bos_token, eos_token, unk_token = "<s>", "</s>", "<unk>"
    sep_token, pad_token, cls_token, mask_token = "<sep>", "<pad>", "<cls>", "<mask>"
    additional_special_tokens = list(ADDITIONAL_SPECIAL_TOKENS)
    unk_token_id, bos_token_id, eos_token_id = sid.UNK_ID, sid.BOS_ID, sid.EOS_ID
    cls_token_id, sep_token_id, pad_token_id = sid.CLS_ID, sid.SEP_ID, sid.PAD_ID
    mask_token_id = sid.MASK_ID
    eod_token_id, eop_token_id = sid.EOD_ID, sid.EOP_ID
    pad_token_type_id = sid.SEG_ID_PAD
    # HF's order: the named special tokens, then the additional ones.
    all_special_tokens = [SPECIAL_TOKENS[k] for k in ("bos_token", "eos_token", "unk_token",
                                                      "sep_token", "pad_token", "cls_token",
                                                      "mask_token")] + list(
                                                          ADDITIONAL_SPECIAL_TOKENS)
    all_special_ids = [sid.SPECIAL_PIECES.index(t) for t in all_special_tokens]
    special_tokens_map = {**SPECIAL_TOKENS,
                          "additional_special_tokens": list(ADDITIONAL_SPECIAL_TOKENS)}

    @property
    def vocab_size(self) -> int:
        return self.sp.vocab_size

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return (f"XLNetTokenizer(vocab_file={self.vocab_file!r}, vocab_size={self.vocab_size}, "
                f"do_lower_case={self.do_lower_case}, keep_accents={self.keep_accents}, "
                f"padding_side={self.padding_side!r})")

    def get_vocab(self) -> Dict[str, int]:
        return {self.sp.id_to_piece(i): i for i in range(self.vocab_size)}

    def add_tokens(self, new_tokens, special_tokens: bool = False) -> int:
        """HuggingFace's `add_tokens`: the number of tokens added, which is 0 when every one
        is a piece of the vocabulary already; any other token is refused with a TokenizerError
        (a ValueError) saying why, since the ids here are the SentencePiece model's and only
        its own: data preparation, the in-graph serving tokenizer and exported SavedModels
        encode with the model file alone, so a token kept beside it would give ids nothing
        else produces."""
        tokens = [new_tokens] if isinstance(new_tokens, str) else list(new_tokens)
        # HF's AddedToken carries its text in .content.
        texts = [str(getattr(token, "content", token)) for token in tokens]
        unknown = [t for t in texts if self.sp.piece_to_id(t) == sid.UNK_ID and t != "<unk>"]
        if unknown:
            raise TokenizerError(
                f"add_tokens({unknown!r}): an XLNet vocabulary is its SentencePiece model "
                f"({self.vocab_file}), fixed when it was trained, and data preparation, the "
                "in-graph tokenizer and exports read only that file; a new token needs a new "
                "SentencePiece model that holds it (sentencepiece's user_defined_symbols) and "
                "a model pretrained on that vocabulary.")
        return 0

    def tokenize(self, text: str, pair: Optional[str] = None,
                 add_special_tokens: bool = False) -> List[str]:
        """Pieces of `text` (normalized first, digit-comma rule applied); a character outside
        the vocabulary stays itself (its id is <unk>'s), as in HF's slow tokenizer."""
        pieces = [self.sp.encode_pieces(preprocess_text(t, lower=self.do_lower_case,
                                                        keep_accents=self.keep_accents))
                  for t in ([text] if pair is None else [text, pair])]
        if not add_special_tokens:
            return [p for part in pieces for p in part]
        return [p for part in pieces for p in part + [self.sep_token]] + [self.cls_token]

    def convert_tokens_to_ids(self, tokens: Union[str, Sequence[str]]):
        if isinstance(tokens, str):
            return self.sp.piece_to_id(tokens)
        return [self.sp.piece_to_id(t) for t in tokens]

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        if isinstance(ids, (int, np.integer)):
            return self.sp.id_to_piece(self._checked_id(ids))
        return [self.sp.id_to_piece(i) for i in self._id_list(ids)
                if not (skip_special_tokens and i in _SPECIAL_IDS)]

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        """Pieces joined, "▁" read as a space, ends stripped (HF's XLNet)."""
        return "".join(tokens).replace(SPIECE_UNDERLINE, " ").strip()

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return 3 if pair else 2

    def build_inputs_with_special_tokens(self, token_ids_0: Sequence[int],
                                         token_ids_1: Optional[Sequence[int]] = None) -> List[int]:
        """`A <sep> <cls>` or `A <sep> B <sep> <cls>`."""
        return with_special_tokens(token_ids_0, token_ids_1)[0]

    def create_token_type_ids_from_sequences(self, token_ids_0: Sequence[int],
                                             token_ids_1: Optional[Sequence[int]] = None
                                             ) -> List[int]:
        """Token type ids of `build_inputs_with_special_tokens` (A 0, B 1, <cls> 2)."""
        return with_special_tokens(token_ids_0, token_ids_1)[1]

    def get_special_tokens_mask(self, token_ids_0: Sequence[int],
                                token_ids_1: Optional[Sequence[int]] = None,
                                already_has_special_tokens: bool = False) -> List[int]:
        """1 where `build_inputs_with_special_tokens` puts a special token; with
        already_has_special_tokens, 1 on every special id of the given ids."""
        if already_has_special_tokens:
            if token_ids_1 is not None:
                raise ValueError("Give one sequence when it already has its special tokens.")
            return [int(i in _SPECIAL_IDS) for i in self._id_list(token_ids_0)]
        specials = [0] * len(token_ids_0) + [1]
        if token_ids_1 is not None:
            specials += [0] * len(token_ids_1) + [1]
        return specials + [1]

    # ------------------------------------------------------------------ encoding
    def encode(self, text, text_pair=None, add_special_tokens: bool = True,
               **kwargs) -> List[int]:
        """Ids of one text (or pair) as a list: with special tokens `A <sep> [B <sep>] <cls>`,
        and no padding unless asked; `add_special_tokens=False` gives the bare text ids (what a
        generation prompt takes). Other keywords as for a call."""
        kwargs.setdefault("padding", False)
        if _is_batch(text, kwargs.get("is_split_into_words", False)):
            raise ValueError("encode takes one text (or pair); call the tokenizer for a batch.")
        return self(text, text_pair, add_special_tokens=add_special_tokens,
                    return_tensors=None, **kwargs)["input_ids"]

    def __call__(self, text: TextInput, text_pair: Optional[TextInput] = None, *,
                 add_special_tokens: bool = True, padding: Union[bool, str] = True,
                 truncation: Union[bool, str, None] = None, max_length: Optional[int] = None,
                 stride: int = 0, is_split_into_words: bool = False,
                 pad_to_multiple_of: Optional[int] = None, padding_side: Optional[str] = None,
                 return_tensors: Optional[str] = "np",
                 return_token_type_ids: Optional[bool] = None,
                 return_attention_mask: Optional[bool] = None,
                 return_overflowing_tokens: bool = False,
                 return_special_tokens_mask: bool = False,
                 return_offsets_mapping: bool = False, return_length: bool = False,
                 layout: str = "cls_last") -> Dict[str, object]:
        """Encodes a text or a batch of texts (and pairs) into model inputs.

        Args:
          text: a string or a list of strings; with is_split_into_words, a list of words or a
            list of such lists (each word is encoded alone, as HF does).
          text_pair: the second texts (same count), or None.
          add_special_tokens: the <sep>/<cls> layout; False gives the bare text ids (token
            type ids A 0, B 1).
          padding, truncation, max_length, stride, pad_to_multiple_of: see batching.py;
            max_length counts the special tokens.
          padding_side: "left" or "right"; default the tokenizer's ("left"), or "right" for
            layout="cls_first".
          return_tensors: "np" (default), "tf", or None for lists (a single text, not
            batched, then gives flat lists, as HF).
          return_token_type_ids, return_attention_mask: default True (model_input_names).
          return_overflowing_tokens: the cut text goes on in more rows (windows overlapping by
            `stride` tokens); adds `overflow_to_sample_mapping` (the text of each row).
          return_special_tokens_mask: `special_tokens_mask`, 1 on <sep>, <cls> and padding.
          return_offsets_mapping: `offset_mapping`, each token's [start, end) in the raw text
            (of its word with is_split_into_words); special tokens and padding (0, 0). What a
            span means after normalization: SentencePieceTokenizer.encode_ids_with_offsets.
          return_length: `length`, the tokens of each row before padding.
          layout: "cls_last" (the original's) or "cls_first".

        Returns:
          A dict of int32 arrays [B, L] ([B, L, 2] offsets, [B] length and mapping).
        """
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
        if return_tensors not in RETURN_TENSORS:
            raise ValueError(f"return_tensors must be one of {RETURN_TENSORS}, got "
                             f"{return_tensors!r} (PyTorch tensors: torch.tensor on the numpy "
                             "arrays).")
        side = padding_side or ("right" if layout == "cls_first" else self.padding_side)
        _check_side(side)
        pad_strategy = batching.padding_strategy(padding)
        cut_strategy = batching.truncation_strategy(truncation, max_length)
        batched = _is_batch(text, is_split_into_words)
        texts = _as_batch(text, batched, is_split_into_words, "text")
        pairs = None if text_pair is None else _as_batch(text_pair, batched,
                                                         is_split_into_words, "text_pair")
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"text_pair has {len(pairs)} entries for {len(texts)} texts.")
        if (pad_to_multiple_of and max_length is not None and pad_strategy != "do_not_pad"
                and cut_strategy != "do_not_truncate" and max_length % pad_to_multiple_of):
            raise ValueError(f"max_length ({max_length}) is not a multiple of "
                             f"pad_to_multiple_of ({pad_to_multiple_of}): rows would be cut to "
                             "one length and padded past it (HF refuses this too).")
        specials = self.num_special_tokens_to_add(pairs is not None) if add_special_tokens else 0
        budget = None if max_length is None else max_length - specials

        encode = self._encode_with_offsets if return_offsets_mapping else self._encode_plain
        rows = []
        for index, t in enumerate(texts):
            a = encode(t, is_split_into_words)
            b = None if pairs is None else encode(pairs[index], is_split_into_words)
            for span_a, span_b in batching.cut(len(a[0]), None if b is None else len(b[0]),
                                               budget, cut_strategy, stride,
                                               return_overflowing_tokens):
                part_b = None if b is None else (b[0][slice(*span_b)], b[1][slice(*span_b)])
                rows.append(self._row((a[0][slice(*span_a)], a[1][slice(*span_a)]), part_b,
                                      add_special_tokens, layout, index))

        target = batching.padded_length([len(r["input_ids"]) for r in rows], pad_strategy,
                                        max_length, pad_to_multiple_of)
        type_name = next((n for n in self.model_input_names if n in TYPE_ID_NAMES),
                         "token_type_ids")
        keep = {"input_ids": True,
                "token_type_ids": _default(return_token_type_ids, type_name in
                                           self.model_input_names),
                "attention_mask": _default(return_attention_mask, "attention_mask" in
                                           self.model_input_names),
                "special_tokens_mask": return_special_tokens_mask,
                "offset_mapping": return_offsets_mapping, "length": return_length,
                "overflow_to_sample_mapping": return_overflowing_tokens}
        out = {}
        padded = [batching.pad_row(r, target, side) for r in rows]
        for key, wanted in keep.items():
            if wanted:
                name = type_name if key == "token_type_ids" else key
                out[name] = [r[key] for r in padded]
        if not batched and return_tensors is None and len(rows) == 1:
            return {k: v[0] for k, v in out.items()}
        return _as_tensors(out, return_tensors, target)

    def _encode_plain(self, text, is_split_into_words: bool):
        if is_split_into_words:
            ids = [i for word in text for i in self.sp.encode_ids(word)]
        else:
            ids = self.sp.encode_ids(text)
        return ids, [None] * len(ids)

    def _encode_with_offsets(self, text, is_split_into_words: bool):
        if not is_split_into_words:
            return self.sp.encode_ids_with_offsets(text)
        ids, spans = [], []
        for word in text:  # offsets within each word, as HF's fast tokenizers
            word_ids, word_spans = self.sp.encode_ids_with_offsets(word)
            ids += word_ids
            spans += word_spans
        return ids, spans

    @staticmethod
    def _row(a, b, add_special_tokens: bool, layout: str, index: int) -> Dict[str, list]:
        """One unpadded row: ids, type ids, special mask, offsets, length, sample index."""
        ids_a, spans_a = a
        ids_b, spans_b = b if b is not None else (None, [])
        if add_special_tokens:
            ids, types = with_special_tokens(ids_a, ids_b, layout)
            first = 1 if layout == "cls_first" else 0       # where A starts
            text_positions = list(range(first, first + len(ids_a)))
            if ids_b is not None:
                start_b = first + len(ids_a) + 1
                text_positions += list(range(start_b, start_b + len(ids_b)))
        else:
            ids = list(ids_a) + list(ids_b or [])
            types = [sid.SEG_ID_A] * len(ids_a) + [sid.SEG_ID_B] * len(ids_b or [])
            text_positions = list(range(len(ids)))
        special = [1] * len(ids)
        offsets = [(0, 0)] * len(ids)
        for position, span in zip(text_positions, list(spans_a) + list(spans_b)):
            special[position] = 0
            offsets[position] = span
        return {"input_ids": ids, "token_type_ids": types, "attention_mask": [1] * len(ids),
                "special_tokens_mask": special, "offset_mapping": offsets, "length": len(ids),
                "overflow_to_sample_mapping": index}

    def pad(self, encoded_inputs, padding: Union[bool, str] = True,
            max_length: Optional[int] = None, pad_to_multiple_of: Optional[int] = None,
            padding_side: Optional[str] = None, return_attention_mask: Optional[bool] = None,
            return_tensors: Optional[str] = None) -> Dict[str, object]:
        """Pads encoded rows (a dict of per-row lists, or a list of such dicts: what a data
        collator gets) as a call pads: ids with <pad>, token type ids with 4, attention_mask
        0, special_tokens_mask 1, offsets (0, 0); adds attention_mask when missing."""
        if return_tensors not in RETURN_TENSORS:
            raise ValueError(f"return_tensors must be one of {RETURN_TENSORS}, got "
                             f"{return_tensors!r}.")
        if isinstance(encoded_inputs, (list, tuple)):
            rows = [dict(r) for r in encoded_inputs]
            single = False
        else:
            ids = encoded_inputs["input_ids"]
            single = len(ids) == 0 or isinstance(_first(ids), (int, np.integer))
            batch = {k: ([v] if single else v) for k, v in encoded_inputs.items()}
            rows = [{k: v[i] for k, v in batch.items()} for i in range(len(batch["input_ids"]))]
        rows = [{k: (np.asarray(v).tolist() if k in batching.PAD_VALUES else v)
                 for k, v in r.items()} for r in rows]
        if _default(return_attention_mask, "attention_mask" in self.model_input_names):
            for r in rows:
                r.setdefault("attention_mask", [1] * len(r["input_ids"]))
        target = batching.padded_length([len(r["input_ids"]) for r in rows],
                                        batching.padding_strategy(padding), max_length,
                                        pad_to_multiple_of)
        side = padding_side or self.padding_side
        _check_side(side)
        padded = [batching.pad_row(r, target, side) for r in rows]
        out = {k: [r[k] for r in padded] for k in (padded[0] if padded else {})}
        if single and return_tensors is None:
            return {k: v[0] for k, v in out.items()}
        return _as_tensors(out, return_tensors, target)

    # ------------------------------------------------------------------ decoding
    def decode(self, token_ids, skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: Optional[bool] = None) -> str:
        """Text of `token_ids` (an int, a list, or a 1-D array or tensor), as HF's slow
        XLNet tokenizer writes it: the pieces between special tokens are joined ("▁" read as
        a space, ends stripped) and the special tokens are written in between with no
        spaces ('list.<sep><cls>'); skip_special_tokens drops them without a trace (so
        'a <unk> b' skipped is 'a b', and 'x<unk>y' is 'xy')."""
        parts, run = [], []
        for i in self._id_list(token_ids):
            if i in _SPECIAL_IDS:
                if skip_special_tokens:
                    continue
                if run:
                    parts.append(self.convert_tokens_to_string(run))
                    run = []
                parts.append(self.sp.id_to_piece(i))
            else:
                run.append(self.sp.id_to_piece(i))
        if run:
            parts.append(self.convert_tokens_to_string(run))
        text = "".join(parts)
        if _default(clean_up_tokenization_spaces, self.clean_up_tokenization_spaces):
            for before, after in _CLEAN_UP:
                text = text.replace(before, after)
        return text

    def batch_decode(self, sequences, skip_special_tokens: bool = False,
                     clean_up_tokenization_spaces: Optional[bool] = None) -> List[str]:
        return [self.decode(s, skip_special_tokens, clean_up_tokenization_spaces)
                for s in sequences]

    def _checked_id(self, token_id) -> int:
        token_id = int(token_id)
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"Token id {token_id} is outside the vocabulary (0..."
                             f"{self.vocab_size - 1}) of {self.vocab_file}.")
        return token_id

    def _id_list(self, token_ids) -> List[int]:
        values = np.asarray(token_ids)
        if values.ndim == 2 and values.shape[0] == 1:
            values = values[0]
        if values.ndim > 1:
            raise ValueError(f"Expected one sequence of ids, got shape {values.shape}; use "
                             "batch_decode for a batch.")
        return [self._checked_id(i) for i in values.reshape(-1)]


_SPECIAL_IDS = frozenset(XLNetTokenizer.all_special_ids)


def _check_side(side: str) -> None:
    if side not in ("left", "right"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {side!r}.")


def _default(value: Optional[bool], default: bool) -> bool:
    return default if value is None else bool(value)


def _first(values):
    return values[0] if len(values) else None


def _is_batch(text, is_split_into_words: bool) -> bool:
    if isinstance(text, str):
        if is_split_into_words:
            raise ValueError("is_split_into_words needs a list of words (or a batch of lists).")
        return False
    if not isinstance(text, (list, tuple)):
        raise TypeError(f"text must be a string or a list of strings, got "
                        f"{type(text).__name__}.")
    if is_split_into_words:
        return len(text) > 0 and not isinstance(text[0], str)
    return True


def _as_batch(text, batched: bool, is_split_into_words: bool, name: str) -> list:
    items = list(text) if batched else [text]
    for item in items:
        words = item if is_split_into_words else [item]
        if isinstance(words, str) or not all(isinstance(w, str) for w in words):
            kind = "lists of words" if is_split_into_words else "strings"
            raise TypeError(f"{name} must hold {kind}; got {item!r:.80}.")
    return items


def _read_config(directory: str) -> dict:
    """The options a tokenizer_config.json gives (HF's or ours); {} without one."""
    path = os.path.join(directory, CONFIG_FILE)
    if not fileio.exists(path):
        return {}
    try:
        with fileio.open_file(path) as f:
            config = json.load(f)
    except ValueError as e:
        raise TokenizerError(f"{path} is not valid JSON ({e}); fix or remove it.") from None
    for key, value in SPECIAL_TOKENS.items():
        given = config.get(key, value)
        given = given.get("content") if isinstance(given, dict) else given
        if given != value:
            raise TokenizerError(f"{path} sets {key}={given!r}; XLNet's is {value!r} (its ids "
                                 "are fixed by the SentencePiece model).")
    if config.get("truncation_side", "right") != "right":
        raise TokenizerError(f"{path}: truncation_side {config['truncation_side']!r} is not "
                             "supported (only 'right').")
    names = ("do_lower_case", "remove_space", "keep_accents", "padding_side",
             "model_max_length", "clean_up_tokenization_spaces", "model_input_names")
    return {k: config[k] for k in names if k in config}


def _as_tensors(out: Dict[str, list], return_tensors: Optional[str],
                target: Optional[int]) -> Dict[str, object]:
    """Lists of rows -> int32 numpy arrays (or TensorFlow tensors); rows of one length."""
    if return_tensors is None:
        return out
    arrays = {}
    for key, rows in out.items():
        if key in ("length", "overflow_to_sample_mapping"):
            arrays[key] = np.asarray(rows, np.int32).reshape(-1)
            continue
        lengths = {len(r) for r in rows}
        if len(lengths) > 1:
            raise ValueError("Rows of different lengths cannot be stacked into arrays: use "
                             "padding=True or return_tensors=None.")
        width = lengths.pop() if lengths else (target or 0)
        tail = (2,) if key == "offset_mapping" else ()
        arrays[key] = np.asarray(rows, np.int32).reshape((len(rows), width) + tail)
    if return_tensors == "tf":
        import tensorflow as tf  # only when asked: the tokenizer itself never needs it

        return {k: tf.constant(v) for k, v in arrays.items()}
    return arrays
