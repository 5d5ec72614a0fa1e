"""The analytic FLOP count against the matmuls of the traced graph; strategy resolution."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2 import tensorflow_build
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import XLNetLMHeadModel
from xlnet_tf2.training import distribution
from xlnet_tf2.training.metrics_logger import pretrain_step_flops

from fixtures.paths import REPO_ROOT as ROOT


def _graph_matmul_flops(graph):
    """2 x (product of all index sizes) of every Einsum / MatMul / BatchMatMul in the graph."""
    total = 0
    for op in graph.get_operations():
        shapes = [i.shape.as_list() for i in op.inputs]
        if op.type == "Einsum":
            inputs = op.get_attr("equation").decode().split("->")[0].split(",")
            sizes = {}
            for letters, shape in zip(inputs, shapes):
                sizes.update(zip(letters, shape))
            total += 2 * int(np.prod(list(sizes.values())))
        elif op.type in ("MatMul", "BatchMatMulV2", "BatchMatMulV3"):
            a, b = shapes
            ta = op.get_attr("transpose_a") if op.type == "MatMul" else op.get_attr("adj_x")
            tb = op.get_attr("transpose_b") if op.type == "MatMul" else op.get_attr("adj_y")
            m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
            n = b[-2] if tb else b[-1]
            batch = int(np.prod(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2])) or [1]))
            total += 2 * batch * m * k * n
        for attr in ("then_branch", "body"):
            assert attr not in op.node_def.attr, "nested control flow is not counted"
    return total


@pytest.mark.parametrize("bi_data,mem_len", [(True, 8), (False, 0)])
def test_analytic_flops_match_the_traced_graph(bi_data, mem_len):
    config = XLNetConfig.preset("tiny", n_token=300, mem_len=mem_len, reuse_len=8,
                                bi_data=bi_data)
    model = XLNetLMHeadModel(config)
    model.build()
    B, L, P = 4, 16, 5
    inputs = {"input_ids": tf.zeros([B, L], tf.int32), "segment_ids": tf.zeros([B, L], tf.int32),
              "perm_mask": tf.zeros([B, L, L]),
              "target_mapping": tf.one_hot(tf.tile(tf.range(P)[None], [B, 1]), L)}
    if mem_len:
        inputs["mems"] = model.transformer.initial_memory(B)
    graph = tf.function(lambda x: model(x)["logits"]).get_concrete_function(inputs).graph
    flops = pretrain_step_flops(config, seq_len=L, num_predict=P,
                                global_batch_size=B)
    counted = _graph_matmul_flops(graph)
    assert counted == flops.forward_per_example * B + flops.per_batch
    assert flops.train_per_step == 3 * counted


def test_tpu_pointing_at_nothing_fails_fast_with_the_flag_named():
    start = time.time()
    with pytest.raises(distribution.StrategyError, match="--tpu='grpc://127.0.0.1:9'"):
        distribution.resolve_strategy("tpu", "grpc://127.0.0.1:9", tpu_timeout_s=5)
    with pytest.raises(distribution.StrategyError, match="--tpu is empty"):
        distribution.resolve_strategy("auto", "")
    with pytest.raises(distribution.StrategyError, match="--strategy=tpu needs --tpu"):
        distribution.resolve_strategy("tpu", None)
    with pytest.raises(distribution.StrategyError, match="multi_worker needs the TF_CONFIG"):
        distribution.resolve_strategy("multi_worker")
    assert time.time() - start < 10


@pytest.mark.slow
def test_cli_tpu_flag_pointing_at_nothing_exits_quickly(tmp_path):
    start = time.time()
    proc = subprocess.run(
        [sys.executable, "experiments/run_pretrain.py", "--tpu=grpc://127.0.0.1:9",
         "--tpu_timeout=5", f"--data_dir={tmp_path}", f"--model_dir={tmp_path}/m"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 2
    # The plain wheel says so before any connection; the TPU build tries the address.
    why = "no TPU answers" if tensorflow_build.is_tpu_build() else "has no TPU runtime"
    assert "--tpu='grpc://127.0.0.1:9'" in proc.stderr and why in proc.stderr
    assert time.time() - start < 60


@pytest.mark.slow
def test_cli_names_the_flag_for_a_bad_data_dir(tmp_path):
    proc = subprocess.run(
        [sys.executable, "experiments/run_pretrain.py", f"--data_dir={tmp_path}/missing",
         f"--model_dir={tmp_path}/m", "--strategy=one_device"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 2
    assert "--data_dir=" in proc.stderr and "is not a directory" in proc.stderr


def test_auto_strategy_on_this_machine_is_one_device():
    strategy = distribution.resolve_strategy("auto")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert distribution.is_chief(strategy)
