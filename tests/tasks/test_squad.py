"""SQuAD: alignment through normalization on real text, windows and labels, the official
metric on hand-worked cases, the head and loss, bad input, and one end-to-end run
(train, predict, evaluate, export, reload, SavedModel answer == in-process answer)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece op SavedModels use)

from fixtures.paths import REPO_ROOT as ROOT
from fixtures.squad_data import write_squad
from fixtures.stdlib_text import alignment_texts, raw_docstrings
from fixtures.task_files import train_tiny_spm

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

    return SentencePieceTokenizer.from_file(train_tiny_spm(str(tmp_path_factory.mktemp("spm"))))


# ---------------------------------------------------------------------------- alignment
def test_normalization_offsets_hand_cases():
    from xlnet_tf2.tasks.squad_data import normalize_with_offsets

    text, starts, ends = normalize_with_offsets("a  ``b''\t\u00e9 ")
    assert text == 'a "b" e'
    assert starts == [0, 1, 3, 5, 6, 8, 9] and ends == [1, 2, 5, 6, 8, 9, 10]
    text, starts, ends = normalize_with_offsets("```x")        # str.replace: "``" then "`"
    assert text == '"`x' and starts == [0, 2, 3] and ends == [2, 3, 4]
    text, starts, ends = normalize_with_offsets("\ufb01n")      # ligature fi: 2 chars from 1
    assert text == "fin" and starts == [0, 0, 1] and ends == [1, 1, 2]
    text, _, _ = normalize_with_offsets("ΣΑΣ Ό", lower=True)    # final sigma, as str.lower
    assert text == "σας ο"


def visible(answer):
    """The answer without edge characters that normalize to nothing but a space (e.g. the
    spacing acute accent, NFKD " " + combining mark): no token holds them."""
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import preprocess_text

    edge = lambda c: not preprocess_text("x" + c + "x")[1:-1].strip()
    start, end = 0, len(answer)
    while start < end and edge(answer[start]):
        start += 1
    while end > start and edge(answer[end - 1]):
        end -= 1
    return answer[start:end]


def test_alignment_on_real_docstrings(tokenizer):
    from xlnet_tf2.tasks.squad_data import answer_token_span, tokenize_context
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import preprocess_text

    texts = alignment_texts()
    assert any(any(unicodedata.combining(c) for c in unicodedata.normalize("NFKD", t))
               for t in texts), "no accented text"
    assert any("``" in t for t in texts) and any("''" in t for t in texts)
    assert all(re.search(r"\s\s", t) for t in texts if "\n" in t)
    words_checked = 0
    for text in texts:
        tokens = tokenize_context(text, tokenizer)
        assert tokens.ids == tokenizer.encode_ids(text)
        for piece, start, end in zip(tokens.pieces, tokens.char_start, tokens.char_end):
            if end > start:  # the raw characters behind a piece normalize to the piece
                assert preprocess_text(text[start:end]) == piece.lstrip("\u2581"), (piece, text)
        words = [m for m in re.finditer(r"\S+", text) if preprocess_text(m.group()).strip()]
        for i, first in enumerate(words):
            last = words[min(i + i % 4, len(words) - 1)]  # 1..4-word answers over whitespace runs
            span = answer_token_span(tokens, first.start(), last.end())
            recovered = text[tokens.char_start[span[0]]:tokens.char_end[span[1]]]
            assert recovered == visible(text[first.start():last.end()])
            words_checked += 1
    assert words_checked > 1000


# ---------------------------------------------------------------------------- windows
def test_windows_with_stride_label_the_answer_or_cls(tokenizer):
    from xlnet_tf2 import special_ids as sid
    from xlnet_tf2.tasks.squad_data import (SquadExample, build_all_windows,
                                                 stack_windows, tokenize_context)

    context = " ".join(raw_docstrings("email/message.py")[:6])
    answer = re.findall(r"\S+ \S+ \S+", context)[-5]
    start = context.rindex(answer)
    examples = [SquadExample("a", "Where is it?", context, ((answer, start),), False),
                SquadExample("n", "Is it there?", context, (), True)]
    seq_len, stride, max_query = 48, 16, 10
    windows, contexts = build_all_windows(examples, tokenizer, seq_len, stride, max_query)
    tokens = tokenize_context(context, tokenizer)
    question = tokenizer.encode_ids("Where is it?")[:max_query]
    answerable = [w for w in windows if w.qid == "a"]
    doc_tokens = seq_len - 3 - len(question)
    assert len(answerable) == math.ceil((len(tokens.ids) - doc_tokens) / stride) + 1 >= 3
    assert [w.doc_offset for w in answerable] == [stride * i for i in range(len(answerable))]
    inside = [w for w in answerable if not w.is_impossible]
    outside = [w for w in answerable if w.is_impossible]
    assert inside and outside
    answer_ids = tokenizer.encode_ids(answer)
    for w in inside:
        got = w.inputs["input_ids"][w.start_position:w.end_position + 1].tolist()
        assert got == answer_ids
        raw = context[tokens.char_start[w.doc_offset + w.start_position]:
                      tokens.char_end[w.doc_offset + w.end_position]]
        assert raw == answer
    for w in outside + [w for w in windows if w.qid == "n"]:
        assert w.is_impossible and w.start_position == w.end_position == w.inputs["cls_index"]
    for w in answerable:  # the layout
        n, q = w.doc_length, len(question)
        ids = w.inputs["input_ids"]
        assert ids[:n].tolist() == tokens.ids[w.doc_offset:w.doc_offset + n]
        assert ids[n] == sid.SEP_ID and ids[n + 1:n + 1 + q].tolist() == question
        assert ids[n + 1 + q] == sid.SEP_ID and ids[n + 2 + q] == sid.CLS_ID
        assert w.inputs["cls_index"] == n + 2 + q
        assert w.inputs["p_mask"].tolist() == [0] * n + [1] * (q + 2) + [0] + \
            [1] * (seq_len - n - q - 3)
        assert w.inputs["attention_mask"].sum() == n + q + 3
        assert (ids[n + q + 3:] == sid.PAD_ID).all()
        assert w.inputs["segment_ids"].tolist()[:n + q + 3] == \
            [sid.SEG_ID_A] * (n + 1) + [sid.SEG_ID_B] * (q + 1) + [sid.SEG_ID_CLS]
    # every document token has its maximum context in exactly one window
    owners = np.zeros(len(tokens.ids), int)
    for w in answerable:
        for i, best in enumerate(w.max_context):
            owners[w.doc_offset + i] += best
    assert (owners == 1).all()
    features = stack_windows(windows, with_labels=True)
    assert features["input_ids"].shape == (len(windows), seq_len)
    assert features["is_impossible"].tolist() == [int(w.is_impossible) for w in windows]


# ---------------------------------------------------------------------------- metric
def test_official_metric_hand_worked():
    from xlnet_tf2.tasks import squad_eval

    assert squad_eval.normalize_answer("The  Cat's, a hat!") == "cats hat"
    assert squad_eval.f1_score("the big cat", "a big dog") == pytest.approx(0.5)
    assert squad_eval.exact_match("Denver Broncos.", "the denver broncos") == 1.0
    golds = {"q1": ["Denver Broncos", "Broncos"], "q2": ["the cat sat"], "q3": [], "q4": []}
    best = {"q1": "Broncos", "q2": "cat", "q3": "something", "q4": "x"}
    null_odds = {"q1": -2.0, "q2": -1.5, "q3": 1.0, "q4": -1.0}
    v1 = squad_eval.evaluate({"q1": golds["q1"], "q2": golds["q2"]}, best)
    assert v1 == pytest.approx({"exact": 50.0, "f1": 100 * (1 + 2 / 3) / 2, "total": 2.0})
    r = squad_eval.evaluate(golds, best, null_odds, null_threshold=0.0)
    # q3 is above the threshold (counted as no answer: right); q2, q4 keep their text.
    assert r["exact"] == pytest.approx(50.0)
    assert r["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
    assert r["HasAns_exact"] == pytest.approx(50.0) and r["NoAns_exact"] == pytest.approx(50.0)
    assert r["HasAns_total"] == 2 and r["NoAns_total"] == 2
    # Switching q1, q2, q4, q3 (increasing null odds) from "no answer" to the text:
    # exact 2 -> 3 -> 3 -> 2 -> 1; f1 2 -> 3 -> 3.667 -> 2.667 -> 1.667.
    assert r["best_exact"] == pytest.approx(75.0) and r["best_exact_thresh"] == -2.0
    assert r["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert r["best_f1_thresh"] == -1.5
    # An empty prediction for an unanswerable question is right at any threshold.
    r = squad_eval.evaluate({"q": []}, {"q": ""}, {"q": 5.0}, null_threshold=10.0)
    assert r["exact"] == 100.0 and r["best_exact"] == 100.0


def test_postprocess_picks_best_valid_span_and_raw_text(tokenizer):
    from xlnet_tf2.tasks import squad
    from xlnet_tf2.tasks.squad_data import SquadExample, build_all_windows

    context = "Return  the  caf\u00e9 ``menu'' now."
    example = SquadExample("q", "What?", context, (("the  caf\u00e9", 8),), False)
    windows, contexts = build_all_windows([example], tokenizer, 40, 16, 8)
    w = windows[0]
    tokens = contexts[0]
    quote = next(i for i, p in enumerate(tokens.pieces) if '"' in p)
    closing = max(i for i, p in enumerate(tokens.pieces) if '"' in p)
    # beam: k=2 starts x e=2 ends; the best-scoring pair is invalid (end before start)
    outputs = {"start_top_index": np.array([[quote, w.start_position]]),
               "start_top_log_probs": np.array([[-0.1, -0.5]]),
               "end_top_index": np.array([[[w.start_position, closing],
                                           [w.end_position, w.doc_length + 1]]]),
               "end_top_log_probs": np.array([[[-0.1, -2.0], [-0.2, -0.01]]]),
               "cls_logits": np.array([0.3])}
    best, null_odds, nbest = squad.postprocess([example], windows, contexts, outputs,
                                               max_answer_length=10, n_best_size=5)
    assert best["q"] == "the  caf\u00e9" and null_odds["q"] == pytest.approx(0.3)
    assert [c.text for c in nbest["q"]] == ["the  caf\u00e9", "``menu''"]
    assert squad.final_predictions(best, null_odds, True, 0.0) == {"q": ""}
    assert squad.final_predictions(best, null_odds, True, 0.5) == {"q": "the  caf\u00e9"}


# ---------------------------------------------------------------------------- head and loss
def test_head_paths_agree_and_mask():
    from xlnet_tf2.models.heads import SquadHead

    head = SquadHead(d_model=8, start_n_top=3, end_n_top=2, dropout=0.0)
    hidden = tf.random.normal([2, 6, 8], seed=1)
    p_mask = tf.constant([[0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 1, 0]])
    cls_index = tf.constant([5, 5])
    inference = head(hidden, p_mask, cls_index)
    assert inference["start_top_index"].shape == (2, 3)
    assert inference["end_top_index"].shape == (2, 3, 2)
    assert np.all(inference["start_logits"].numpy()[p_mask.numpy() == 1] < -1e29)
    assert not np.isin(inference["start_top_index"].numpy()[1], [2, 3, 4]).any()
    for i in range(3):  # the end beam for start i equals the training path with that start
        start = inference["start_top_index"][:, i]
        trained = head(hidden, p_mask, cls_index, start_positions=start)
        end_log_probs = tf.nn.log_softmax(trained["end_logits"]).numpy()
        top = np.argsort(-end_log_probs, axis=-1)[:, :2]
        np.testing.assert_array_equal(inference["end_top_index"][:, i].numpy(), top)
        np.testing.assert_allclose(inference["end_top_log_probs"][:, i].numpy(),
                                   np.take_along_axis(end_log_probs, top, 1), atol=1e-5)
        np.testing.assert_allclose(trained["cls_logits"], inference["cls_logits"], atol=1e-6)
    start_lp = tf.nn.log_softmax(inference["start_logits"]).numpy()
    np.testing.assert_allclose(np.sort(start_lp, -1)[:, ::-1][:, :3],
                               inference["start_top_log_probs"].numpy(), atol=1e-6)


def test_squad_loss_values_and_minimum():
    from xlnet_tf2.tasks.losses import squad_loss

    mask = np.array([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 1, 1]], bool)  # 4 allowed positions
    uniform = np.where(mask, -1e30, 0.0).astype(np.float32)
    features = {"start_positions": tf.constant([1, 3]), "end_positions": tf.constant([2, 3]),
                "is_impossible": tf.constant([0, 1])}
    outputs = {"start_logits": tf.constant(uniform), "end_logits": tf.constant(uniform),
               "cls_logits": tf.zeros([2])}
    # uniform over 4: CE = log 4 each; BCE at logit 0 = log 2: 0.5*(2 log 4) + 0.5 log 2
    np.testing.assert_allclose(squad_loss(outputs, features).numpy(),
                               [math.log(4) + 0.5 * math.log(2)] * 2, rtol=1e-6)

    def peaked(positions, scale):
        logits = uniform.copy()
        logits[np.arange(2), positions] = scale
        return tf.constant(logits)

    losses = {}
    for name, (s, e, c) in {"right": ([1, 3], [2, 3], [-20, 20]),
                            "wrong_start": ([0, 2], [2, 3], [-20, 20]),
                            "wrong_class": ([1, 3], [2, 3], [20, -20])}.items():
        out = {"start_logits": peaked(s, 20.0), "end_logits": peaked(e, 20.0),
               "cls_logits": tf.constant(c, tf.float32)}
        losses[name] = squad_loss(out, features).numpy()
    assert (losses["right"] < 1e-6).all()
    assert (losses["wrong_start"] > 9).all() and (losses["wrong_class"] > 9).all()


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("qa, message", [
    ({"question": "q?", "answers": [{"text": "a", "answer_start": 0}]},
     r"record data\[0\]\.paragraphs\[0\]\.qas\[0\]: question without an \"id\""),
    ({"id": "x7", "question": "q?", "is_impossible": True,
      "answers": [{"text": "Return", "answer_start": 0}]},
     r"record x7: an unanswerable question \(is_impossible\) has answers with text"),
    ({"id": "x8", "question": "q?", "answers": [{"text": "value", "answer_start": 3}]},
     r"record x8: answer_start 3 does not point at the answer text 'value'"),
    ({"id": "x9", "question": "q?", "answers": []},
     r"record x9: has no answers and is not marked is_impossible"),
])
def test_bad_input_names_file_and_question(tmp_path, qa, message):
    from xlnet_tf2.tasks.errors import TaskDataError
    from xlnet_tf2.tasks.squad_data import read_squad

    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": "Return the value.",
                                                          "qas": [qa]}]}]}))
    with pytest.raises(TaskDataError, match=r"bad\.json: " + message):
        read_squad(str(path), version_2_with_negative=True)


def test_malformed_json_names_file(tmp_path):
    from xlnet_tf2.tasks.errors import TaskDataError
    from xlnet_tf2.tasks.squad_data import read_squad

    path = tmp_path / "broken.json"
    path.write_text('{"data": [')
    with pytest.raises(TaskDataError, match=r"broken\.json: malformed JSON"):
        read_squad(str(path), version_2_with_negative=False)


# ---------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_squad_train_predict_evaluate_export_reload(tmp_path):
    from xlnet_tf2.tasks.finetuned_model import load_task_model
    from xlnet_tf2.tasks import squad
    from xlnet_tf2.tasks import squad_eval
    from xlnet_tf2.tasks.classification import predict
    from xlnet_tf2.tasks.squad_data import read_squad
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer, preprocess_text

    directory = str(tmp_path)
    spm = train_tiny_spm(directory)
    train = write_squad(os.path.join(directory, "train.json"),
                        ["email", "http", "asyncio", "importlib"], True, seed=0)
    dev = write_squad(os.path.join(directory, "dev.json"), ["xml", "logging", "urllib"], True,
                      seed=1)
    model_dir = os.path.join(directory, "run")
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "experiments/run_squad.py"),
         f"--model_dir={model_dir}", f"--spm_model={spm}", "--model_config=tiny",
         f"--train_file={train}", f"--predict_file={dev}", "--version_2_with_negative",
         "--seq_len=128", "--doc_stride=64", "--max_query_length=24", "--max_answer_length=30",
         "--train_steps=24", "--train_batch_size=16", "--learning_rate=1e-3",
         "--warmup_steps=3", "--eval_every=12", "--log_steps=6", "--dropout=0", "--dropatt=0",
         "--eval_batch_size=16"], capture_output=True, text=True, env=ENV, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    with open(os.path.join(model_dir, "eval_results.jsonl")) as f:
        evaluations = [json.loads(line) for line in f]
    assert [e["step"] for e in evaluations] == [12, 24]
    with open(os.path.join(model_dir, "predictions.json")) as f:
        predictions = json.load(f)
    with open(os.path.join(model_dir, "null_odds.json")) as f:
        null_odds = json.load(f)
    examples = read_squad(dev, True)
    assert set(predictions) == set(null_odds) == {e.qid for e in examples}
    # the written files, scored by the metric code, give the logged final evaluation
    golds = {e.qid: e.answer_texts if not e.is_impossible else [] for e in examples}
    rescored = squad_eval.evaluate(golds, predictions)
    assert rescored["exact"] == pytest.approx(evaluations[-1]["exact"])
    assert rescored["f1"] == pytest.approx(evaluations[-1]["f1"])
    for key in ("best_f1", "best_exact", "HasAns_f1", "NoAns_f1"):
        assert 0.0 <= evaluations[-1][key] <= 100.0
    by_id = {e.qid: e for e in examples}
    assert all(text == "" or text in by_id[q].context for q, text in predictions.items())

    # predict-only from the trained directory = the in-process reference (latest weights)
    model, spec, spm_path = load_task_model(model_dir, "squad", "latest")
    tokenizer = SentencePieceTokenizer.from_file(spm_path)
    data = squad.SquadEvalSet.build(dev, tokenizer, spec)
    metrics = squad.predict_and_evaluate(model, data, spec, 16, str(tmp_path / "again"))
    assert metrics["f1"] == pytest.approx(evaluations[-1]["f1"])

    export_base = os.path.join(directory, "export")
    run = subprocess.run([sys.executable, os.path.join(ROOT, "experiments/export_saved_model.py"),
                          f"--model_dir={model_dir}", "--kind=squad", "--checkpoint=latest",
                          f"--export_dir={export_base}"],
                         capture_output=True, text=True, env=ENV, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    # questions whose context fits one window: the SavedModel serves the same answer
    single = {}
    for row, w in enumerate(data.windows):
        single.setdefault(w.example_index, []).append(row)
    chosen = [i for i, rows in single.items() if len(rows) == 1][:12]
    assert len(chosen) >= 6
    subset = squad.SquadEvalSet(
        [data.examples[i] for i in chosen],
        [dataclasses.replace(data.windows[single[i][0]], example_index=n)
         for n, i in enumerate(chosen)], [data.contexts[i] for i in chosen], None)
    rows = [single[i][0] for i in chosen]
    features = {k: v[rows] for k, v in data.features.items()}
    outputs = predict(model, features, 16, output_keys=squad.BEAM_OUTPUTS)
    best, odds, nbest = squad.postprocess(subset.examples, subset.windows, subset.contexts,
                                          outputs, spec.max_answer_length, spec.n_best_size)
    loaded = tf.saved_model.load(os.path.join(export_base, "1"))
    served = loaded.signatures["serving_default"](
        question=tf.constant([e.question for e in subset.examples]),
        context=tf.constant([e.context for e in subset.examples]))
    by_ids = loaded.signatures["serve_token_ids"](
        **{k: tf.constant(features[k]) for k in ("input_ids", "segment_ids", "attention_mask")})
    for n, e in enumerate(subset.examples):
        top = nbest[e.qid][0] if nbest[e.qid] else None
        for out in (served, by_ids):
            start, end = int(out["start_index"][n]), int(out["end_index"][n])
            assert (start, end) == ((top.start_token, top.end_token) if top else (-1, -1))
            text = out["answer"][n].numpy().decode()
            if out is served:  # raw context text, as predictions.json
                assert text == (best[e.qid] if top else "")
                continue
            assert text == (preprocess_text(best[e.qid]) if top else "")
            assert text == (squad.piece_text([tokenizer.id_to_piece(i) for i in
                                              subset.contexts[n].ids], start, end) if top else "")
            np.testing.assert_allclose(out["no_answer_score"][n].numpy(), odds[e.qid],
                                       atol=1e-4)
            assert bool(out["no_answer"][n]) == (odds[e.qid] > spec.null_score_threshold
                                                 or top is None)
    assert sum(bool(nbest[e.qid]) for e in subset.examples) >= len(chosen) // 2
    # a fresh process with only TensorFlow and tensorflow-text gets the same answers
    client = tmp_path / "client.py"
    client.write_text(
        "import json, sys\n"
        "import tensorflow as tf\n"
        "import tensorflow_text  # noqa: F401\n"
        "pairs = json.loads(sys.argv[2])\n"
        "out = tf.saved_model.load(sys.argv[1]).signatures['serving_default'](\n"
        "    question=tf.constant([q for q, _ in pairs]), context=tf.constant([c for _, c in pairs]))\n"
        "assert not any(m.startswith('xlnet_tf2') for m in sys.modules)\n"
        "print(json.dumps([[int(s), int(e), a.decode()] for s, e, a in zip(\n"
        "    out['start_index'].numpy(), out['end_index'].numpy(), out['answer'].numpy())]))\n")
    pairs = [[e.question, e.context] for e in subset.examples]
    run = subprocess.run([sys.executable, str(client), os.path.join(export_base, "1"),
                          json.dumps(pairs)], capture_output=True, text=True, env=ENV,
                         cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == [
        [int(s), int(e), a.decode()] for s, e, a in zip(served["start_index"].numpy(),
                                                        served["end_index"].numpy(),
                                                        served["answer"].numpy())]
    # an empty question and context: a defined "no answer", not a crash
    empty = loaded.signatures["serving_default"](question=tf.constant([""]),
                                                 context=tf.constant([""]))
    assert int(empty["start_index"][0]) == -1 and empty["answer"][0].numpy() == b""
