"""The in-graph tokenizer and input layout give exactly the offline ids on real text."""

from __future__ import annotations

import ast
import os
import re
import sysconfig

import numpy as np
import pytest
import tensorflow as tf


STDLIB = sysconfig.get_paths()["stdlib"]


def _string_constants():
    """Every string literal of the standard library, tests included (lots of non-ASCII, odd
    whitespace, accents, digits with commas)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(STDLIB, "test")):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "__pycache__"))
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(dirpath, name), "rb") as f:
                    tree = ast.parse(f.read())
            except (SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and 0 < len(node.value) < 400
                        and not any(0xD800 <= ord(c) <= 0xDFFF for c in node.value)):
                    out.append(node.value)
    return out


@pytest.fixture(scope="module")
def corpus_and_spm(tmp_path_factory):
    texts = _string_constants()
    sample = ([t for t in texts if not t.isascii()][:2500]
              + [t for t in texts if re.search(r"\d,", t)][:1500] + texts[::150])
    # Trained on this text so that pieces such as "1," exist and the digit-comma rule fires.
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import train_sentencepiece

    directory = tmp_path_factory.mktemp("spm")
    text_path = directory / "text.txt"
    text_path.write_text("\n".join(" ".join(t.split()) for t in sample) + "\n", encoding="utf-8")
    spm = train_sentencepiece([str(text_path)], vocab_size=800, num_threads=2,
                              model_prefix=str(directory / "spm"))
    return sample, spm


def test_in_graph_ids_equal_offline_ids_on_real_text(corpus_and_spm):
    from xlnet_tf2.tokenizers.in_graph_tokenizer import InGraphTokenizer
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer, preprocess_text

    texts, spm = corpus_and_spm
    offline = SentencePieceTokenizer.from_file(spm)
    graph = InGraphTokenizer(spm)
    expected = [offline.encode_ids(t) for t in texts]
    got = graph.encode_ids(tf.constant(texts)).to_list()
    mismatches = [(t, e, g) for t, e, g in zip(texts, expected, got) if e != g]
    assert not mismatches, mismatches[:3]
    # The corpus exercises every rule: normalization changed text, the digit-comma re-split fired.
    assert sum(preprocess_text(t) != " ".join(t.split()) for t in texts) > 100
    plain = [[offline.piece_to_id(p) for p in offline._sp.EncodeAsPieces(preprocess_text(t))]
             for t in texts]
    assert sum(p != e for p, e in zip(plain, expected)) > 50
    assert len(texts) > 3000


def test_in_graph_layout_equals_offline_layout(corpus_and_spm):
    from xlnet_tf2.tokenizers import in_graph_packing
    from xlnet_tf2.tokenizers.in_graph_tokenizer import InGraphTokenizer
    from xlnet_tf2.tokenizers.packing import encode_sequence_pair
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

    texts, spm = corpus_and_spm
    texts = texts[:200] + ["", "   "]
    offline = SentencePieceTokenizer.from_file(spm)
    graph = InGraphTokenizer(spm)
    pairs_b = texts[::-1]
    for layout in ("cls_last", "cls_first"):
        for seq_len in (8, 48):
            ids_a = graph.encode_ids(tf.constant(texts))
            for b_texts in (None, pairs_b):
                ids_b = None if b_texts is None else graph.encode_ids(tf.constant(b_texts))
                got = in_graph_packing.encode_sequence_pair(ids_a, ids_b, seq_len, layout)
                for i, text in enumerate(texts):
                    want = encode_sequence_pair(
                        offline.encode_ids(text),
                        None if b_texts is None else offline.encode_ids(b_texts[i]),
                        seq_len, layout)
                    for k in want:
                        np.testing.assert_array_equal(got[k].numpy()[i], want[k], err_msg=(
                            f"{k} layout={layout} seq_len={seq_len} pair={b_texts is not None} "
                            f"text={text!r}"))


def test_truncation_closed_form_matches_pop_loop():
    from xlnet_tf2.tokenizers.packing import truncated_lengths

    for la in range(0, 14):
        for lb in range(0, 14):
            a, b = la, lb
            while a + b > 9:  # the original _truncate_seq_pair with max_length = 12 - 3
                if a > b:
                    a -= 1
                else:
                    b -= 1
            assert truncated_lengths(la, lb, 12) == (a, b), (la, lb)
