"""The tokenized-feature cache: built once, read back identically, keyed by everything the
features depend on, shared with non-chief workers, rebuilt when damaged."""

import threading

import numpy as np

from xlnet_tf2.tasks.feature_cache import cache_key, cached_features


def _features():
    rng = np.random.default_rng(0)
    return {"input_ids": rng.integers(0, 500, size=(37, 16)).astype(np.int32),
            "attention_mask": np.ones((37, 16), np.int32),
            "label": rng.integers(0, 3, size=37).astype(np.int32),
            "score": rng.normal(size=37).astype(np.float32)}


def test_built_once_then_read_back_identically(tmp_path):
    calls = []

    def build():
        calls.append(1)
        return _features()

    key = {"examples": "abc", "spm": "def", "spec": {"seq_len": 16}}
    first = cached_features("train", key, build, str(tmp_path))
    second = cached_features("train", key, build, str(tmp_path))
    assert len(calls) == 1
    for name, values in _features().items():
        assert second[name].dtype == values.dtype
        np.testing.assert_array_equal(second[name], values)
        np.testing.assert_array_equal(first[name], values)
    # Another key (e.g. another seq_len or tokenizer): built again.
    cached_features("train", {**key, "spec": {"seq_len": 32}}, build, str(tmp_path))
    assert len(calls) == 2
    # Disabled: always built.
    cached_features("train", key, build, "off")
    assert len(calls) == 3


def test_non_chief_waits_for_the_chief_and_damage_is_rebuilt(tmp_path):
    key = {"examples": "xyz"}
    got = {}
    waiter = threading.Thread(target=lambda: got.update(cached_features(
        "train", key, lambda: (_ for _ in ()).throw(AssertionError("a worker tokenized")),
        str(tmp_path), is_chief=False)))
    waiter.start()
    cached_features("train", key, _features, str(tmp_path))
    waiter.join(timeout=60)
    np.testing.assert_array_equal(got["input_ids"], _features()["input_ids"])
    record = tmp_path / f"{cache_key(key)}.tfrecord"
    record.write_bytes(record.read_bytes()[:100])  # cut short
    rebuilt = cached_features("train", key, _features, str(tmp_path))
    np.testing.assert_array_equal(rebuilt["label"], _features()["label"])


def test_squad_windows_tokenized_once_and_rebuilt_identically(tmp_path, monkeypatch,
                                                                capsys):
    """SQuAD (run_squad.py): the training windows and the evaluation set (windows, contexts,
    everything post-processing reads) come back from the cache equal to a fresh build, and
    post-processing gives the same answers; only window settings make a new entry."""
    import os

    from fixtures.task_files import train_tiny_spm
    from fixtures.squad_data import write_squad
    from xlnet_tf2.tasks import squad
    from xlnet_tf2.tasks import squad_data
    from xlnet_tf2.tasks.head_spec import HeadSpec
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer.from_file(train_tiny_spm(str(tmp_path)))
    path = write_squad(os.path.join(str(tmp_path), "squad.json"), ["email", "json"], True,
                       seed=2, max_paragraphs=8)
    spec = HeadSpec(kind="squad", seq_len=64, layout="squad", doc_stride=24,
                    max_query_length=12, version_2_with_negative=True)
    cache = str(tmp_path / "cache")
    calls = []
    original = squad_data.build_all_windows

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(squad, "build_all_windows", counting)
    from xlnet_tf2.progress import Progress

    monkeypatch.setattr(Progress.__init__, "__defaults__", ("items", 0.0, None))  # every update
    capsys.readouterr()
    fresh = squad.train_features(path, tokenizer, spec, "off")
    assert len(calls) == 1
    lines = capsys.readouterr().out.splitlines()
    n = len(squad_data.read_squad(path, True))
    assert lines[-1].startswith(f"tokenizing {path}: {n:,}/{n:,} questions (100%) | ")
    assert len(lines) >= n and all(" | ETA " in line for line in lines)
    for _ in range(2):
        cached = squad.train_features(path, tokenizer, spec, cache)
        assert sorted(cached) == sorted(fresh)
        for name, values in fresh.items():
            assert cached[name].dtype == values.dtype
            np.testing.assert_array_equal(cached[name], values)
    assert len(calls) == 2  # built once for the cache, then read

    reference = squad.SquadEvalSet.build(path, tokenizer, spec, "off")
    assert len(reference.windows) > len(reference.examples)  # contexts span several windows
    for _ in range(2):
        data = squad.SquadEvalSet.build(path, tokenizer, spec, cache)
        assert [(w.example_index, w.qid, w.doc_offset, w.doc_length, w.max_context,
                 w.start_position, w.end_position, w.is_impossible) for w in data.windows] == \
            [(w.example_index, w.qid, w.doc_offset, w.doc_length, w.max_context,
              w.start_position, w.end_position, w.is_impossible) for w in reference.windows]
        assert [(c.ids, c.char_start, c.char_end) for c in data.contexts] == \
            [(c.ids, c.char_start, c.char_end) for c in reference.contexts]
        for name, values in reference.features.items():
            np.testing.assert_array_equal(data.features[name], values)
    assert len(calls) == 4  # fresh reference + one cached build

    rng = np.random.default_rng(0)
    n, k = len(reference.windows), 3
    outputs = {"start_top_index": rng.integers(0, 40, size=(n, k)).astype(np.int32),
               "end_top_index": rng.integers(0, 40, size=(n, k, k)).astype(np.int32),
               "start_top_log_probs": rng.normal(size=(n, k)).astype(np.float32),
               "end_top_log_probs": rng.normal(size=(n, k, k)).astype(np.float32),
               "cls_logits": rng.normal(size=n).astype(np.float32)}
    expected = squad.postprocess(reference.examples, reference.windows, reference.contexts,
                                 outputs, 16, k)
    got = squad.postprocess(data.examples, data.windows, data.contexts, outputs, 16, k)
    assert got == expected and sum(bool(t) for t in expected[0].values()) >= 5

    squad.train_features(path, tokenizer, spec.replace(n_best_size=7, null_score_threshold=1.0),
                         cache)
    assert len(calls) == 4  # prediction settings: the same windows
    squad.train_features(path, tokenizer, spec.replace(doc_stride=16), cache)
    assert len(calls) == 5  # another stride: other windows
