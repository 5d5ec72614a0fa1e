"""Text normalization, the digit-comma rule and the special pieces of trained models."""

import os
import random
import subprocess
import sys
import unicodedata

import pytest
import sentencepiece as spm

from xlnet_tf2 import special_ids
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer, TokenizerError, preprocess_text

from fixtures.corpora import corpus_path, spm_model, tokenizer, workdir  # noqa: F401 (fixtures)
from fixtures.paths import REPO_ROOT as REPO
from fixtures.task_files import number_lines, number_spm_model


def test_preprocess_text_collapses_space_and_quotes():
    assert preprocess_text("  He  said\t``hi''\n ") == 'He said "hi"'


def test_preprocess_text_accents_and_case():
    assert preprocess_text("Café Ångström") == "Cafe Angstrom"
    assert preprocess_text("Caf\u00e9", keep_accents=True) == "Caf\u00e9"  # untouched
    assert preprocess_text("Café", keep_accents=True) != "Cafe"
    assert preprocess_text("Café ABC", lower=True) == "cafe abc"
    assert preprocess_text("Café ABC") == "Cafe ABC"  # cased by default


def test_preprocess_text_drops_exactly_the_combining_marks_of_every_code_point():
    # The original's rule, character by character, over all of Unicode (surrogates aside),
    # each code point between letters so that NFKD and the whitespace collapse see context.
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    text = "a".join(chars)
    nfkd = unicodedata.normalize("NFKD", " ".join(text.strip().split())
                                 .replace("``", '"').replace("\'\'", '"'))
    assert preprocess_text(text) == "".join(c for c in nfkd if not unicodedata.combining(c))


def test_trained_model_has_xlnet_special_pieces():
    tok = tokenizer()
    assert [tok.id_to_piece(i) for i in range(9)] == list(special_ids.SPECIAL_PIECES)
    assert tok.vocab_size == 600
    # Control symbols never come out of raw text; <eop> (user-defined) does.
    ids = tok.encode_ids("text <cls> and <sep> here <eop> end")
    assert special_ids.CLS_ID not in ids and special_ids.SEP_ID not in ids
    assert special_ids.EOP_ID in ids


def test_encode_uses_normalization():
    tok = tokenizer()
    assert tok.encode_ids("Café  ``x''") == tok.encode_ids('Cafe "x"')


class _PieceTable:
    """A SentencePiece stand-in with a fixed segmentation, to exercise the re-split rule."""

    def __init__(self, table):
        self.table = table

    def EncodeAsPieces(self, text):
        return self.table[text]


def test_digit_comma_resplit_rule():
    tok = tokenizer()
    tok._sp = _PieceTable({"in 2000, ok": ["\u2581in", "\u25812000,", "\u2581ok"],
                           "2000": ["\u25812000"],
                           "x12,": ["\u2581x", "12,"], "12": ["\u258112"]})
    assert tok.encode_pieces("in 2000, ok") == ["\u2581in", "\u25812000", ",", "\u2581ok"]
    # A piece that did not start a word loses the space marker its re-encoding adds.
    assert tok.encode_pieces("x12,") == ["\u2581x", "12", ","]


def _ends_in_digit_comma(piece):
    return len(piece) > 1 and piece.endswith(",") and piece[-2].isdigit()


def test_digit_comma_rule_on_real_model():
    """A model trained on number-heavy lines makes pieces such as "▁12,"; on such lines the
    rule fires for each of them: no piece of ours ends in a digit and a comma, each one's
    comma is a piece of its own, and the text is unchanged."""
    tok = SentencePieceTokenizer.from_file(number_spm_model())
    text = preprocess_text(" ".join(number_lines(random.Random(5), 20)))
    raw = tok._sp.EncodeAsPieces(text)
    fired = sum(_ends_in_digit_comma(p) for p in raw)
    assert fired >= 20  # the rule has work on this input
    pieces = tok.encode_pieces(text)
    assert not any(_ends_in_digit_comma(p) for p in pieces)
    assert pieces.count(",") == raw.count(",") + fired
    assert "".join(pieces) == "".join(raw)


def test_incompatible_model_is_refused():
    prefix = os.path.join(workdir(), "plain")
    spm.SentencePieceTrainer.Train(input=corpus_path(), model_prefix=prefix, vocab_size=300,
                                   minloglevel=2)
    with pytest.raises(TokenizerError, match="pieces 0..8"):
        SentencePieceTokenizer.from_file(prefix + ".model")
    with pytest.raises(TokenizerError, match="does not exist"):
        SentencePieceTokenizer.from_file(prefix + ".missing")


@pytest.mark.slow
def test_train_sentencepiece_cli(tmp_path):
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "data_prep/train_sentencepiece.py"),
         f"--input={corpus_path()}", "--vocab_size=400", f"--model_prefix={tmp_path}/sp"],
        capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    tok = SentencePieceTokenizer.from_file(f"{tmp_path}/sp.model")
    assert tok.vocab_size == 400
    assert [tok.id_to_piece(i) for i in range(9)] == list(special_ids.SPECIAL_PIECES)
    bad = subprocess.run(
        [sys.executable, os.path.join(REPO, "data_prep/train_sentencepiece.py"),
         f"--input={tmp_path}/nothing*.txt", "--vocab_size=400", f"--model_prefix={tmp_path}/x"],
        capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "matches no file" in bad.stderr
    assert "Traceback" not in bad.stderr
