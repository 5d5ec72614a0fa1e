"""Whole-dataset inference in fixed-size batches inside the run's strategy: the same outputs
on one device and on two replicas, padding dropped, row order kept."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.training.inference import batched_outputs

from fixtures.paths import REPO_ROOT as ROOT


def _fn(batch):
    return {"double": 2 * batch["x"], "row_sum": tf.reduce_sum(batch["x"], axis=-1)}


def test_outputs_keep_row_order_and_drop_padding():
    x = np.arange(23 * 3, dtype=np.float32).reshape(23, 3)
    out = batched_outputs(_fn, {"x": x}, batch_size=5)
    np.testing.assert_array_equal(out["double"], 2 * x)
    np.testing.assert_array_equal(out["row_sum"], x.sum(-1))


SCRIPT = textwrap.dedent("""
    import json, numpy as np, tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from xlnet_tf2.training.inference import batched_outputs
    x = np.arange(23 * 3, dtype=np.float32).reshape(23, 3)
    fn = lambda b: {"y": tf.tanh(b["x"] / 50.0) + tf.cast(
        tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32) * 0}
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    out = batched_outputs(fn, {"x": x}, batch_size=5, strategy=strategy)
    one = batched_outputs(fn, {"x": x}, batch_size=5)
    print("RESULT" + json.dumps({"two": out["y"].tolist(), "one": one["y"].tolist(),
                                 "replicas": strategy.num_replicas_in_sync}))
""")


@pytest.mark.slow
def test_two_replicas_give_the_same_outputs_in_the_same_order():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=240,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert out["replicas"] == 2
    np.testing.assert_allclose(out["two"], out["one"], atol=1e-6)
    x = np.arange(23 * 3, dtype=np.float32).reshape(23, 3)
    np.testing.assert_allclose(out["one"], np.tanh(x / 50.0), atol=1e-6)
