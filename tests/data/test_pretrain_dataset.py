"""End to end: Beam preparation of a real corpus, then the tf.data pretraining pipeline."""

import filecmp
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2 import special_ids
from xlnet_tf2.data import records
from xlnet_tf2.data.manifest import ManifestError
from xlnet_tf2.tasks.objective import dense_features
from xlnet_tf2.data.pretrain_dataset import (OUTPUT_FEATURES, BatchLayoutError,
                                             build_pretrain_dataset, bytes_per_example)

from fixtures.corpora import SMALL, prepared_dir, tokenizer
from fixtures.mask_semantics import check_mask_semantics

pytestmark = pytest.mark.slow  # prepared_dir() runs Beam with worker processes

CONFIG = dict(seq_len=SMALL.seq_len, reuse_len=SMALL.reuse_len, num_predict=SMALL.num_predict,
              bi_data=True, vocab_size=600)
R = SMALL.reuse_len


def _manifest(d):
    with open(os.path.join(d, "record_info.json")) as f:
        return json.load(f)


def _steps(dataset, num_elements):
    return [{k: v.numpy() for k, v in x.items()} for x in dataset.take(num_elements)]


def _global_steps(global_batch, replicas, pipelines, num_steps, start_step=0, **kw):
    """Global batches per step, assembled from every simulated replica in replica order."""
    per_pipeline = replicas // pipelines
    per_replica = {}
    for pid in range(pipelines):
        ctx = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=pid,
                                         num_replicas_in_sync=replicas)
        ds = build_pretrain_dataset(prepared_dir(), global_batch_size=global_batch,
                                    input_context=ctx, start_step=start_step, **dict(CONFIG, **kw))
        elements = _steps(ds, num_steps * per_pipeline)
        for j in range(per_pipeline):
            per_replica[pid * per_pipeline + j] = elements[j::per_pipeline]
    return [{k: np.concatenate([per_replica[r][t][k] for r in range(replicas)])
             for k in OUTPUT_FEATURES} for t in range(num_steps)]


def _canonical(batch):
    """The batch's rows ordered by (direction, stream): slot order depends on the topology."""
    order = np.lexsort((batch["stream_id"], batch["direction"]))
    return {k: v[order] for k, v in batch.items()}


def test_determinism_across_worker_counts():
    one, two = prepared_dir(1), prepared_dir(2)
    names = sorted(os.listdir(two))
    assert names == sorted(os.listdir(one))
    assert ".prep" not in names  # the token files and progress counts are removed
    assert len([n for n in names if n.endswith(".tfrecord")]) == 8 * 2 * 2
    match, mismatch, errors = filecmp.cmpfiles(one, two, names, shallow=False)
    assert mismatch == [] and errors == [] and len(match) == len(names)


def test_manifest_describes_the_data():
    d = prepared_dir()
    m = _manifest(d)
    assert m["params"] == SMALL.to_dict()
    assert m["vocab_size"] == 600 and m["spm_sha256"] == tokenizer().checksum
    assert m["num_streams"] == 8 and m["directions"] == 2 and m["num_passes"] == 2
    assert m["tokens_per_stream"] == m["total_tokens"] // 8
    assert m["chunks_per_stream"] == (m["tokens_per_stream"] - SMALL.seq_len) // R + 1
    assert m["num_examples"] == 8 * 2 * 2 * m["chunks_per_stream"]
    assert m["examples_per_stream_per_pass"] == 2 * m["chunks_per_stream"]
    assert m["tool_version"] and m["bad_lines_skipped"] == 0
    count = sum(1 for _ in tf.data.TFRecordDataset(os.path.join(d, m["files"][5])))
    assert count == m["chunks_per_stream"]


def test_backward_rows_are_reversed_text():
    d = prepared_dir()
    m = _manifest(d)
    chunks, row_len = m["chunks_per_stream"], m["tokens_per_stream"]
    for stream in (0, 5):
        rows = []
        for direction in (0, 1):
            path = os.path.join(d, records.shard_name(1, direction, stream))
            batch = next(iter(tf.data.TFRecordDataset(path).batch(10_000)))
            parsed = records.parse_batch(batch, SMALL.seq_len, SMALL.num_predict)
            np.testing.assert_array_equal(parsed["chunk_index"].numpy(), np.arange(chunks))
            assert set(parsed["direction"].numpy()) == {direction}
            rows.append(parsed["input_ids"].numpy()[:, :R].reshape(-1))  # prefixes in order
        forward, backward = rows  # forward = row[:C*R]; backward = row[::-1][:C*R]
        row = np.full(row_len, -1)
        row[:chunks * R] = forward
        tail = backward[::-1]  # row[row_len - C*R:]
        overlap = slice(row_len - chunks * R, chunks * R)
        assert overlap.stop - overlap.start > R
        np.testing.assert_array_equal(row[overlap], tail[:overlap.stop - overlap.start])


def _dense(x):
    """The batch with the dense masks the training step builds from its compact features."""
    return {**x, **{k: v.numpy() for k, v in dense_features(x, R).items()}}


def test_real_batches_follow_mask_semantics_and_target_counts():
    ds = build_pretrain_dataset(prepared_dir(), global_batch_size=4, **CONFIG)
    for x in _steps(ds, 3):
        x = _dense(x)
        for n in range(4):
            np.testing.assert_array_equal(x["perm_rank"][n], _stored_ranks(
                x["stream_id"][n], x["direction"][n], x["pass_id"][n], x["chunk_index"][n]))
            ranks = _stored_ranks(x["stream_id"][n], x["direction"][n], x["pass_id"][n],
                                  x["chunk_index"][n])
            check_mask_semantics(x["perm_mask"][n], x["input_ids"][n], x["target_mapping"][n],
                                 ranks, R)
            positions = x["target_mapping"][n].argmax(-1)[x["target_mask"][n] == 1]
            assert (positions < R).sum() == SMALL.num_predict_reused
            assert SMALL.num_predict_new - 3 <= (positions >= R).sum() <= SMALL.num_predict_new
            np.testing.assert_array_equal(x["target"][n][x["target_mask"][n] == 1],
                                          x["input_ids"][n][positions])
            assert x["input_ids"][n][-1] == special_ids.CLS_ID
            assert x["segment_ids"][n][-1] == 2


def _stored_ranks(stream, direction, pass_id, chunk):
    path = os.path.join(prepared_dir(), records.shard_name(pass_id, direction, stream))
    record = next(iter(tf.data.TFRecordDataset(path).skip(int(chunk))))
    return records.parse_batch(record[None], SMALL.seq_len, SMALL.num_predict)[
        "perm_rank"].numpy()[0]


@pytest.mark.parametrize("replicas,pipelines", [(1, 1), (2, 1), (2, 2), (4, 1), (4, 4)])
def test_memory_continuity_and_topology_invariance(replicas, pipelines):
    steps = _global_steps(8, replicas, pipelines, num_steps=6)
    reference = _global_steps(8, 1, 1, num_steps=6)
    local = 8 // replicas
    for t, batch in enumerate(steps):
        for k in OUTPUT_FEATURES:  # the same examples at every step, whatever the topology
            np.testing.assert_array_equal(_canonical(batch)[k], _canonical(reference[t])[k])
        np.testing.assert_array_equal(batch["chunk_index"], np.full(8, t))
        # Every replica's local batch: first half forward, second half backward, same streams.
        for r in range(replicas):
            rows = slice(r * local, (r + 1) * local)
            np.testing.assert_array_equal(batch["direction"][rows],
                                          [0] * (local // 2) + [1] * (local // 2))
            streams = batch["stream_id"][rows]
            np.testing.assert_array_equal(streams[:local // 2], streams[local // 2:])
        if t:
            prev = steps[t - 1]
            np.testing.assert_array_equal(batch["stream_id"], prev["stream_id"])
            for s in range(8):  # A of step t-1 starts where the prefix of step t starts
                len_a = int((prev["segment_ids"][s] == 0).sum()) - R - 1
                n = min(len_a, R)
                np.testing.assert_array_equal(prev["input_ids"][s][R:R + n],
                                              batch["input_ids"][s][:n])


def test_block_boundary_and_resume():
    chunks = _manifest(prepared_dir())["chunks_per_stream"]
    start = chunks - 2
    resumed = _global_steps(8, 2, 1, num_steps=4, start_step=start)
    np.testing.assert_array_equal([b["chunk_index"][0] for b in resumed], [chunks - 2,
                                                                           chunks - 1, 0, 1])
    # Group 0 reads streams 0..3, then group 1 reads streams 4..7 (8 streams, 4 per step).
    np.testing.assert_array_equal(resumed[0]["stream_id"], [0, 1, 0, 1, 2, 3, 2, 3])
    np.testing.assert_array_equal(resumed[2]["stream_id"], [4, 5, 4, 5, 6, 7, 6, 7])
    # Resuming equals reading from the start of the cycle and dropping the first steps.
    ds = build_pretrain_dataset(prepared_dir(), global_batch_size=8, **CONFIG)
    full = _steps(ds.skip(start), 4)
    for a, b in zip(resumed, full):
        np.testing.assert_array_equal(_canonical(a)["input_ids"], _canonical(b)["input_ids"])
    # Pass 0 is two blocks (groups) of `chunks` steps; pass 1 follows.
    later = _global_steps(8, 1, 1, num_steps=1, start_step=2 * chunks)[0]
    assert set(later["pass_id"]) == {1} and set(later["chunk_index"]) == {0}


def test_online_permutation_resamples_valid_orders():
    ds = build_pretrain_dataset(prepared_dir(), global_batch_size=4, online_permutation=True,
                                seed=3, **CONFIG)
    offline = _steps(build_pretrain_dataset(prepared_dir(), global_batch_size=4, **CONFIG), 1)
    x = _steps(ds, 1)[0]
    np.testing.assert_array_equal(x["input_ids"], offline[0]["input_ids"])
    np.testing.assert_array_equal(x["target_positions"], offline[0]["target_positions"])
    assert x["perm_rank"].dtype == np.int32 and x["perm_rank"].shape == (4, SMALL.seq_len)
    assert not np.array_equal(x["perm_rank"], offline[0]["perm_rank"])
    again = _steps(build_pretrain_dataset(prepared_dir(), global_batch_size=4,
                                          online_permutation=True, seed=3, **CONFIG), 1)[0]
    np.testing.assert_array_equal(x["perm_rank"], again["perm_rank"])
    # Still a permutation of each half (compact, [L] per example).
    for n in range(4):
        np.testing.assert_array_equal(np.sort(x["perm_rank"][n][:R]), np.arange(R))
        np.testing.assert_array_equal(np.sort(x["perm_rank"][n][R:]),
                                      np.arange(R, SMALL.seq_len))
    x = _dense(x)
    for n in range(4):
        check_mask_semantics(x["perm_mask"][n], x["input_ids"][n], x["target_mapping"][n],
                             x["perm_rank"][n], R)
    # Recover each row's order from its mask and check the semantics with it.
    for n in range(4):
        ranked = (x["target_mapping"][n].sum(0) > 0) | np.isin(
            x["input_ids"][n], [special_ids.SEP_ID, special_ids.CLS_ID])
        for half in (slice(0, R), slice(R, SMALL.seq_len)):
            idx = np.arange(SMALL.seq_len)[half][ranked[half]]
            # among ranked positions, the number each one sees orders them
            sees = (x["perm_mask"][n][np.ix_(idx, idx)] == 0).sum(1)
            assert len(set(sees[x["target_mapping"][n].sum(0)[idx] > 0])) == \
                int((x["target_mapping"][n].sum(0)[idx] > 0).sum())


def test_manifest_mismatch_is_refused():
    for key, value in [("seq_len", 128), ("reuse_len", 16), ("num_predict", 12),
                       ("bi_data", False), ("vocab_size", 32000)]:
        with pytest.raises(ManifestError, match=f"{key}: data has"):
            build_pretrain_dataset(prepared_dir(), global_batch_size=8,
                                   **dict(CONFIG, **{key: value}))
    with pytest.raises(ManifestError, match="no record_info.json"):
        build_pretrain_dataset(os.path.dirname(prepared_dir()), global_batch_size=8, **CONFIG)


def test_batch_rule_is_checked():
    with pytest.raises(BatchLayoutError, match="not a multiple of the 6 streams"):
        build_pretrain_dataset(prepared_dir(), global_batch_size=12, **CONFIG)
    ctx = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                     num_replicas_in_sync=8)
    with pytest.raises(BatchLayoutError, match="must be even"):
        build_pretrain_dataset(prepared_dir(), global_batch_size=8, input_context=ctx, **CONFIG)
    with pytest.raises(BatchLayoutError, match="not divisible"):
        ctx3 = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                          num_replicas_in_sync=3)
        build_pretrain_dataset(prepared_dir(), global_batch_size=8, input_context=ctx3, **CONFIG)


def test_static_shapes_and_compact_features():
    ds = build_pretrain_dataset(prepared_dir(), global_batch_size=8, **CONFIG)
    spec = ds.element_spec
    L, P = SMALL.seq_len, SMALL.num_predict
    assert set(spec) == set(OUTPUT_FEATURES)
    assert "perm_mask" not in spec and "target_mapping" not in spec  # built on the device
    assert spec["perm_rank"].shape == (8, L) and spec["perm_rank"].dtype == tf.int32
    assert spec["target_positions"].shape == (8, P)
    assert spec["input_ids"].shape == (8, L) and spec["input_ids"].dtype == tf.int32
    assert spec["segment_ids"].dtype == tf.int8 and spec["stream_id"].shape == (8,)
    shipped = sum(s.shape.num_elements() * s.dtype.size for s in spec.values()) // 8
    assert shipped == bytes_per_example(L, P)
    assert bytes_per_example(L, P, dense_masks=True) == (
        4 * (2 * L + L * L + P * L + 2 * P + 4))


def test_micro_batches_are_virtual_replicas():
    """--grad_accum_steps 2 on 2 replicas: every micro-batch of 2 rows is [forward; backward]
    of one stream, the step holds the same examples as without accumulation, and each row
    keeps its stream from step to step."""
    plain = _global_steps(8, 2, 1, num_steps=3)
    micro = _global_steps(8, 2, 1, num_steps=3, micro_batches=2)
    for t, batch in enumerate(micro):
        for k in OUTPUT_FEATURES:
            np.testing.assert_array_equal(_canonical(batch)[k], _canonical(plain[t])[k])
        np.testing.assert_array_equal(batch["direction"], [0, 1] * 4)
        np.testing.assert_array_equal(batch["stream_id"], [0, 0, 1, 1, 2, 2, 3, 3])
    with pytest.raises(BatchLayoutError, match="micro-batch 1 .* must be even"):
        build_pretrain_dataset(prepared_dir(), global_batch_size=4, micro_batches=4, **CONFIG)
    with pytest.raises(BatchLayoutError, match="not divisible by --grad_accum_steps=3"):
        build_pretrain_dataset(prepared_dir(), global_batch_size=4, micro_batches=3, **CONFIG)
