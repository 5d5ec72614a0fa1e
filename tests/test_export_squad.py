"""The SQuAD serving layout built in the graph equals the offline first window (ids,
segments, mask, p_mask, <cls> index) on real questions and contexts, truncation included;
the in-graph span pick follows the same rules as the offline post-processing."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from test_finetune_data import train_tiny_spm
from test_finetune_squad_fixtures import squad_dataset


def test_in_graph_squad_layout_equals_offline_first_window(tmp_path):
    from xlnet_tf2.export import serving_inputs
    from xlnet_tf2.export.in_graph_tokenizer import InGraphTokenizer
    from xlnet_tf2.finetuning.squad_data import build_windows, tokenize_context, SquadExample
    from xlnet_tf2.tokenization import SentencePieceTokenizer

    spm = train_tiny_spm(str(tmp_path))
    tokenizer = SentencePieceTokenizer.from_file(spm)
    graph_tokenizer = InGraphTokenizer(spm)
    paragraphs = squad_dataset(["email", "http"], True, seed=3)["data"][0]["paragraphs"][:8]
    pairs = [(qa["question"], p["context"]) for p in paragraphs for qa in p["qas"]]
    pairs += [("What does the very long question with many words return here?", "Short."),
              ("", "")]
    seq_len, max_query = 64, 8
    offline = []
    for question, context in pairs:
        example = SquadExample("q", question, context, (), True)
        window = build_windows(example, 0, tokenize_context(context, tokenizer),
                               tokenizer.encode_ids(question), seq_len, 16, max_query)[0]
        offline.append(window.inputs)
    in_graph = serving_inputs.encode_squad(
        graph_tokenizer.encode_ids(tf.constant([c for _, c in pairs])),
        graph_tokenizer.encode_ids(tf.constant([q for q, _ in pairs])), seq_len, max_query)
    extra = serving_inputs.squad_answer_inputs(in_graph["input_ids"], in_graph["segment_ids"],
                                               in_graph["attention_mask"])
    for key in ("input_ids", "segment_ids", "attention_mask"):
        np.testing.assert_array_equal(in_graph[key].numpy(), np.stack([o[key] for o in offline]))
    np.testing.assert_array_equal(extra["p_mask"].numpy(), np.stack([o["p_mask"] for o in offline]))
    np.testing.assert_array_equal(extra["cls_index"].numpy(), [o["cls_index"] for o in offline])
    expected_doc = [min(len(tokenizer.encode_ids(c)),
                        seq_len - 3 - min(len(tokenizer.encode_ids(q)), max_query))
                    for q, c in pairs]
    assert extra["doc_length"].numpy().tolist() == expected_doc
    assert any(n < len(tokenizer.encode_ids(c)) for n, (_, c) in zip(expected_doc, pairs))
    assert extra["doc_length"].numpy()[-1] == 0 and in_graph["attention_mask"].numpy()[-1].sum() == 3


def test_in_graph_best_span_rules():
    from xlnet_tf2.export.serving_tasks import best_span

    outputs = {"start_top_index": tf.constant([[4, 1], [3, 0]]),
               "start_top_log_probs": tf.constant([[-0.1, -0.5], [-0.1, -0.2]]),
               "end_top_index": tf.constant([[[2, 6], [3, 9]], [[9, 9], [9, 9]]]),
               "end_top_log_probs": tf.constant([[[-0.1, -0.2], [-0.3, -0.01]],
                                                 [[-0.1, -0.1], [-0.1, -0.1]]])}
    # row 0, doc_length 8: (4,2) ends before start, (4,6) is 3 tokens, (1,3) fits, (1,9) is
    # outside the document; max_answer_length 3 -> (1,3) and (4,6) are valid, (4,6) scores
    # -0.3 vs (1,3) -0.8. Row 1: every end is outside the document -> none (-1).
    start, end, score = best_span(outputs, tf.constant([8, 8]), max_answer_length=3)
    assert start.numpy().tolist() == [4, -1] and end.numpy().tolist() == [6, -1]
    np.testing.assert_allclose(score.numpy()[0], -0.3, rtol=1e-6)
    start, end, _ = best_span(outputs, tf.constant([8, 8]), max_answer_length=2)
    assert start.numpy().tolist() == [-1, -1]  # (1,3) and (4,6) are 3 tokens long
