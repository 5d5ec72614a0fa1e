"""The memory's per-host checkpoint files: each worker saves only its rows, tagged with their
slots, and any topology restores every row from the file that holds its slot."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.training.memory_state import MemoryState, MemoryStateError


def _state(slots, worker, replicas=1):
    rows = len(slots) // replicas
    return MemoryState(n_layer=2, mem_len=3, d_model=4, dtype=tf.float32,
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
    removed = a.prune(str(tmp_path), [8, 12])
    assert removed and all("ckpt-4" in name for name in removed)
    assert a.restore(str(tmp_path), 8)
    everything = _state([0, 1, 2, 3], worker=0, replicas=2)
    with pytest.raises(MemoryStateError, match="lacks 2 of this worker's 4 slots"):
        everything.restore(str(tmp_path), 12)  # worker 1's file is gone
