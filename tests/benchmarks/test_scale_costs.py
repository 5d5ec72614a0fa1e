"""Scale costs at the paper's setting against hand-computed values, and the parameter formula
against a built model."""

import subprocess
import sys

import pytest

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import XLNetLMHeadModel
from benchmarks.tools.scale_costs import (PAPER, compact_feature_bytes, dense_feature_bytes,
                                            markdown_table, paper_costs, parameter_count)

from fixtures.paths import REPO_ROOT as ROOT


def test_paper_setting_layout():
    assert (PAPER.hosts, PAPER.replicas, PAPER.host_batch, PAPER.replica_batch) == \
        (128, 1024, 64, 8)


def test_memory_state_hand_computed():
    base, large = paper_costs()
    assert base.memory_global_bytes == 12 * 8192 * 384 * 768 * 4 == 115_964_116_992  # 116 GB
    assert base.memory_host_bytes == 12 * 64 * 384 * 768 * 4 == 905_969_664
    assert base.memory_replica_bytes == 12 * 8 * 384 * 768 * 4
    assert large.memory_global_bytes == 24 * 8192 * 384 * 1024 * 4 == 309_237_645_312
    assert large.memory_host_bytes == large.memory_global_bytes // 128


def test_host_to_device_bytes_hand_computed():
    dense = dense_feature_bytes(512, 85)
    assert dense["perm_mask"] == 512 * 512 * 4 and dense["target_mapping"] == 85 * 512 * 4
    per_seq_dense = 512 * 512 * 4 + 85 * 512 * 4 + 2 * 512 * 4 + 2 * 85 * 4 + 4 * 4
    assert sum(dense.values()) == per_seq_dense == 1_227_448
    per_seq_compact = 2 * 512 * 4 + 512 * 1 + 85 * 4 + 4 * 4  # segment ids are int8
    assert sum(compact_feature_bytes(512, 85).values()) == per_seq_compact == 4_964
    for c in paper_costs():  # the features do not depend on the model
        assert c.dense_h2d_bytes_per_host_step == 64 * per_seq_dense
        assert c.compact_h2d_bytes_per_host_step == 64 * per_seq_compact


def test_parameter_count_formula_matches_a_built_model():
    config = XLNetConfig.preset("tiny", n_token=300, d_model=48, n_head=3, d_head=8, d_inner=80)
    model = XLNetLMHeadModel(config)
    model.build()
    assert parameter_count(config) == sum(int(v.numpy().size) for v in model.trainable_variables)
    base, large = paper_costs()
    assert base.parameters == 116_750_336            # ~117 M, the released Base
    assert base.param_bytes_per_replica == 4 * base.parameters
    assert base.adam_bytes_per_replica == 8 * base.parameters
    assert 355e6 < large.parameters < 365e6          # ~360 M, the released Large


def test_ideal_step_time_uses_512_tpu_v3_chips():
    base, large = paper_costs()
    assert large.ideal_step_seconds == pytest.approx(large.train_flops_per_step / (512 * 123e12))
    assert large.train_flops_per_step > 3 * base.train_flops_per_step


@pytest.mark.slow
def test_report_prints_the_table():
    proc = subprocess.run([sys.executable, "benchmarks/scale_report.py"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == markdown_table(paper_costs()).strip()
    assert "| memory state, global (formerly all-gathered onto one host) | 116 GB | 309 GB |" \
        in proc.stdout
