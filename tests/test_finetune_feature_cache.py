"""The tokenized-feature cache: built once, read back identically, keyed by everything the
features depend on, shared with non-chief workers, rebuilt when damaged."""

import threading

import numpy as np

from xlnet_tf2.finetuning.feature_cache import cache_key, cached_features


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
