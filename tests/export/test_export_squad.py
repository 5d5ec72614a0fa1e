"""The SQuAD serving layout built in the graph equals the offline first window (ids,
segments, mask, p_mask, <cls> index) on real questions and contexts, truncation included;
the in-graph span pick follows the same rules as the offline post-processing; the in-graph
normalization and token spans equal the offline ones character for character; and an
exported SQuAD model answers long contexts (every window) with exactly the raw-text answers
of the offline prediction."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece op SavedModels use)

from fixtures.paths import REPO_ROOT
from fixtures.squad_data import squad_dataset
from fixtures.task_files import train_tiny_spm


def test_in_graph_squad_layout_equals_offline_first_window(tmp_path):
    from xlnet_tf2.tokenizers import in_graph_packing
    from xlnet_tf2.tokenizers.in_graph_tokenizer import InGraphTokenizer
    from xlnet_tf2.tasks.squad_data import build_windows, tokenize_context, SquadExample
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

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
    in_graph = in_graph_packing.encode_squad(
        graph_tokenizer.encode_ids(tf.constant([c for _, c in pairs])),
        graph_tokenizer.encode_ids(tf.constant([q for q, _ in pairs])), seq_len, max_query)
    extra = in_graph_packing.squad_answer_inputs(in_graph["input_ids"], in_graph["segment_ids"],
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


def _alignment_texts():
    from fixtures.stdlib_text import alignment_texts

    return alignment_texts() + ["a  ``b''\t\u00e9 ", "```x", "''''' a", "1,000 and 3,5, x",
                                "  ", "", "x\u4f60y \ufb01 \u00bd \u00c5", "\u00b4t\u00b4 s"]


def test_in_graph_normalization_and_token_spans_equal_offline(tmp_path):
    from xlnet_tf2.tokenizers.in_graph_tokenizer import InGraphTokenizer
    from xlnet_tf2.tasks.squad_data import normalize_with_offsets, tokenize_context
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

    spm = train_tiny_spm(str(tmp_path))
    tokenizer, graph_tokenizer = SentencePieceTokenizer.from_file(spm), InGraphTokenizer(spm)
    texts = _alignment_texts()
    normalized, raw_start, raw_end = graph_tokenizer.normalize_with_offsets(tf.constant(texts))
    ids, char_start, char_end = graph_tokenizer.encode_ids_with_char_spans(tf.constant(texts))
    for n, text in enumerate(texts):
        expected = normalize_with_offsets(text)
        assert (normalized[n].numpy().decode(), raw_start[n].numpy().tolist(),
                raw_end[n].numpy().tolist()) == (expected[0], expected[1], expected[2]), text
        context = tokenize_context(text, tokenizer)
        assert ids[n].numpy().tolist() == context.ids, text
        assert char_start[n].numpy().tolist() == context.char_start, text
        assert char_end[n].numpy().tolist() == context.char_end, text
    # the texts exercise what the maps are for: collapsed whitespace, quote pairs, accents,
    # compatibility characters whose NFKD adds a space (SentencePiece merges the run)
    assert sum(normalized[n].numpy().decode() != t for n, t in enumerate(texts)) > 20


def _tiny_squad_model(spec, seed=0):
    from xlnet_tf2.config import XLNetConfig
    from xlnet_tf2.models.xlnet_question_answerer import SquadModel

    tf.keras.utils.set_random_seed(seed)
    config = XLNetConfig.preset("tiny", dropout=0.0, dropatt=0.0, mem_len=0, n_token=500)
    model = SquadModel(config, spec.n_best_size, spec.n_best_size, head_dropout=0.0)
    model(model.dummy_inputs(spec.seq_len))
    return model


@pytest.mark.slow
def test_served_whole_context_answers_equal_offline_predictions(tmp_path, version_2=True):
    """SQuAD 2.0 (its answers cover 1.1's: no_answer only adds the threshold)."""
    from xlnet_tf2.export.saved_model import ServingModule, export
    from xlnet_tf2.tasks import squad
    from xlnet_tf2.tasks.classification import predict
    from xlnet_tf2.tasks.head_spec import HeadSpec
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer, preprocess_text

    spm = train_tiny_spm(str(tmp_path))
    tokenizer = SentencePieceTokenizer.from_file(spm)
    dataset = squad_dataset(["email", "json"], version_2, seed=5, max_paragraphs=10)
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(dataset), encoding="utf-8")
    spec = HeadSpec(kind="squad", seq_len=64, layout="squad", doc_stride=24,
                    max_query_length=12, max_answer_length=16, n_best_size=4,
                    version_2_with_negative=version_2, null_score_threshold=0.0)
    model = _tiny_squad_model(spec)
    data = squad.SquadEvalSet.build(str(path), tokenizer, spec)
    outputs = predict(model, data.features, 16, output_keys=squad.BEAM_OUTPUTS)
    best, odds, nbest = squad.postprocess(data.examples, data.windows, data.contexts, outputs,
                                          spec.max_answer_length, spec.n_best_size)
    if version_2:  # a threshold between the questions' null_odds: both outcomes occur
        spec = spec.replace(null_score_threshold=float(np.median(list(odds.values()))))
    predictions = squad.final_predictions(best, odds, version_2, spec.null_score_threshold)

    base = str(tmp_path / "export")
    loaded = tf.saved_model.load(export(ServingModule("squad", model, spec, spm), base))
    with open(os.path.join(base, "1", "assets.extra", "task.json")) as f:
        assert json.load(f)["doc_stride"] == 24
    examples = data.examples
    served = loaded.signatures["serving_default"](
        question=tf.constant([e.question for e in examples]),
        context=tf.constant([e.context for e in examples]))
    windows = {}
    for w in data.windows:
        windows.setdefault(w.example_index, []).append(w)
    later = raw_differs = 0
    for n, e in enumerate(examples):
        top = nbest[e.qid][0] if nbest[e.qid] else None
        answer = served["answer"][n].numpy().decode()
        assert answer == best[e.qid], e.qid
        assert served["prediction"][n].numpy().decode() == predictions[e.qid], e.qid
        assert (int(served["start_index"][n]), int(served["end_index"][n])) == (
            (top.start_token, top.end_token) if top else (-1, -1))
        if top:
            np.testing.assert_allclose(served["answer_score"][n].numpy(), top.score, atol=1e-4)
            later += top.start_token >= windows[n][0].doc_length  # beyond the first window
            raw_differs += answer != preprocess_text(answer)
        np.testing.assert_allclose(served["no_answer_score"][n].numpy(), odds[e.qid], atol=1e-4)
        assert bool(served["no_answer"][n]) == (top is None or (
            version_2 and odds[e.qid] > spec.null_score_threshold))
        assert int(served["num_windows"][n]) == len(windows[n])
    assert len(examples) >= 20 and max(len(w) for w in windows.values()) >= 4
    assert later >= 5, later        # answers found in later windows
    assert raw_differs >= 1         # raw context text, not the normalized one
    if version_2:
        assert 0 < sum(p == "" for p in predictions.values()) < len(predictions)
    # a batch of one and an empty context answer as in the batch
    one = loaded.signatures["serving_default"](question=tf.constant([examples[3].question]),
                                               context=tf.constant([examples[3].context]))
    assert one["answer"][0].numpy().decode() == best[examples[3].qid]
    empty = loaded.signatures["serving_default"](question=tf.constant(["What?"]),
                                                 context=tf.constant([""]))
    assert int(empty["start_index"][0]) == -1 and empty["answer"][0].numpy() == b""
    assert int(empty["num_windows"][0]) == 1
    # The README's client, as written, on this export and a long context.
    readme = open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8").read()
    block = next(b for b in readme.split("```python\n")[1:] if "exports/squad2/1" in b)
    block = block.split("```")[0].replace("exports/squad2/1", os.path.join(base, "1"))
    longest = max(range(len(examples)), key=lambda n: len(windows[n]))
    (tmp_path / "context.txt").write_text(examples[longest].context, encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        namespace = {}
        exec(compile(block, "README.md", "exec"), namespace)
    finally:
        os.chdir(cwd)
    out = namespace["out"]
    assert int(out["num_windows"][0]) >= 4  # a context several windows long
    assert out["answer"][0].numpy().decode() in examples[longest].context
