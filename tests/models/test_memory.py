"""The memory's per-host checkpoint files: each worker saves only its rows, tagged with their
slots, and any topology restores every row from the file that holds its slot."""

import os

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import memory
from xlnet_tf2.models.memory import MemoryState, MemoryStateError
from xlnet_tf2.models.xlnet_model import next_memory
from xlnet_tf2.tasks.objective import reset_at_stream_start


def _state(slots, worker, replicas=1):
    rows = len(slots) // replicas
    config = XLNetConfig(n_layer=2, d_model=4, n_head=1, d_head=4, d_inner=8, n_token=10,
                         mem_len=3)
    return MemoryState(config, dtype=tf.float32,
                       replica_ids=list(range(replicas)), rows_per_replica=rows, slots=slots,
                       worker=worker)


def _fill(state, seed):
    values = [np.random.default_rng(seed + i).normal(size=v.shape).astype(np.float32)
              for i, v in enumerate(state.layers)]
    for v, x in zip(state.layers, values):
        v.assign(x)
    return values


def test_each_worker_saves_its_rows_and_another_topology_restores_them(tmp_path):
    # Two hosts, two rows each (slots interleaved, as bi_data lays them out).
    a, b = _state([0, 2], worker=0), _state([1, 3], worker=1)
    va, vb = _fill(a, 0), _fill(b, 10)
    a.save(str(tmp_path), 8)
    b.save(str(tmp_path), 8)
    assert sorted(p.name for p in (tmp_path / "memory").iterdir()) == ["worker-000", "worker-001"]
    assert a.bytes == 2 * 2 * 3 * 4 * 4  # layers x local rows x M x D x float32
    # One host with two replicas, rows in another order.
    one = _state([3, 1, 0, 2], worker=0, replicas=2)
    assert one.restore(str(tmp_path), 8)
    for layer in range(2):
        got = one.layers[layer].numpy()
        np.testing.assert_array_equal(got[0], vb[layer][1])  # slot 3
        np.testing.assert_array_equal(got[1], vb[layer][0])  # slot 1
        np.testing.assert_array_equal(got[2], va[layer][0])  # slot 0
        np.testing.assert_array_equal(got[3], va[layer][1])  # slot 2
    assert not one.restore(str(tmp_path), 9)  # no files for that step


def test_missing_host_file_and_pruning(tmp_path):
    a = _state([0, 2], worker=0)
    _fill(a, 0)
    for step in (4, 8, 12):
        a.save(str(tmp_path), step)
    # What a save killed half-way leaves: a temporary directory, of a kept step or not.
    worker_dir = tmp_path / "memory" / "worker-000"
    for stale in ("ckpt-12_temp", "ckpt-16_temp_0a1b"):
        (worker_dir / stale).mkdir()
        (worker_dir / stale / "part").write_bytes(b"x")
    removed = a.prune(str(tmp_path), [8, 12])
    assert sorted(n for n in removed if "_temp" in n) == ["ckpt-12_temp", "ckpt-16_temp_0a1b"]
    assert [n for n in removed if "_temp" not in n] and all(
        n.startswith("ckpt-4.") for n in removed if "_temp" not in n)
    assert sorted(os.listdir(worker_dir)) == sorted(
        n for n in os.listdir(worker_dir) if n.startswith(("ckpt-8.", "ckpt-12.")))
    assert a.restore(str(tmp_path), 8)
    everything = _state([0, 1, 2, 3], worker=0, replicas=2)
    with pytest.raises(MemoryStateError, match="lacks 2 of this worker's 4 slots"):
        everything.restore(str(tmp_path), 12)  # worker 1's file is gone


def _config(**runtime):
    return XLNetConfig(n_layer=2, d_model=4, n_head=1, d_head=4, d_inner=8, n_token=10,
                       **runtime)


def test_initial_next_and_reset_follow_the_config():
    config = _config(mem_len=3, reuse_len=2)
    zeros = memory.initial_memory(config, 5, tf.float32)
    assert [m.shape for m in zeros] == [(5, 3, 4)] * 2 and not any(np.any(m) for m in zeros)
    assert memory.initial_memory(_config(mem_len=0), 5, tf.float32) == []
    # The next memory: the last M of (previous, the layer input's first R positions).
    h = tf.reshape(tf.range(2 * 4 * 4, dtype=tf.float32), [2, 4, 4])     # [B, L, D]
    previous = -tf.ones([2, 3, 4])
    nxt = next_memory(config, h, previous).numpy()
    np.testing.assert_array_equal(nxt[:, 0], -np.ones([2, 4]))
    np.testing.assert_array_equal(nxt[:, 1:], h.numpy()[:, :2])
    np.testing.assert_array_equal(next_memory(config, h, None), h.numpy()[:, :2])
    # Rows at chunk 0 start a stream: their memory is zeroed, the others keep theirs.
    mems = [tf.ones([3, 3, 4]), 2 * tf.ones([3, 3, 4])]
    reset = reset_at_stream_start(mems, tf.constant([0, 1, 5]))
    np.testing.assert_array_equal([m.numpy()[:, 0, 0] for m in reset], [[0, 1, 1], [0, 2, 2]])
    assert reset_at_stream_start([], tf.constant([0])) == []


def test_generation_memory_is_a_right_aligned_window():
    # Two layers' inputs of [prompt of 3, dummy]; row 1's prompt is left padded by one.
    hidden = [tf.fill([2, 4, 4], float(i + 1)) + tf.range(4, dtype=tf.float32)[None, :, None]
              for i in range(2)]
    mask = tf.constant([[1, 1, 1], [0, 1, 1]])
    window, window_mask = memory.prompt_memory(hidden, mask, memory_len=4)
    assert [w.shape for w in window] == [(2, 4, 4)] * 2
    np.testing.assert_array_equal(window[1].numpy()[0, :, 0], [0, 0, 2, 3])  # 2 empty entries
    np.testing.assert_array_equal(window_mask, [[0, 0, 1, 1], [0, 0, 0, 1]])
    step = [tf.fill([2, 3, 4], 9.0)] * 2
    window, window_mask = memory.push_memory(window, window_mask, step)
    np.testing.assert_array_equal(window[0].numpy()[0, :, 0], [0, 1, 2, 9])
    np.testing.assert_array_equal(window_mask, [[0, 1, 1, 1], [0, 0, 1, 1]])
