"""Every model class through the shared harness (tests/fixtures/model_harness.py): config round
trip, `.keras` save/load and golden outputs, for the backbone, the LM model and each task model.

The golden numbers were recorded from a run of the code at commit 625a7d7 (`golden_literals`,
CPU, float32) on a tiny config (2 layers, d_model 32, 4 heads of 8, d_inner 64, 97 tokens)
with `seeded_weights`. Those of XLNetModel and XLNetLMHeadModel are also what HuggingFace's
PyTorch XLNet (transformers 5.23, torch 2.13) computes on the same weights and inputs: when
recorded, its outputs differed from ours by at most 7.2e-7 (hidden) and 3.6e-7 (logits), and
test_golden_numbers_are_huggingfaces checks it again on every run where torch is installed.
The task models' heads have no HuggingFace counterpart with the same layout, so their numbers
are our own code's: they catch any change of the numerics, on a backbone checked against
HuggingFace.
"""

import numpy as np
import pytest

from fixtures.model_harness import CHECKS, Golden, ModelCase, outputs, seeded_model
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import (MultipleChoiceModel, SequenceClassifier, SquadModel,
                              XLNetLMHeadModel, XLNetModel)

CONFIG = XLNetConfig.preset("tiny", n_layer=2, d_model=32, n_head=4, d_head=8, d_inner=64,
                            n_token=97, dropout=0.0, dropatt=0.0).to_dict()
B, L, C, P = 2, 8, 3, 3


def _standard_inputs(shape):
    """input_ids, segment_ids (two segments) and attention_mask; the second row (of each
    question) is left-padded by two tokens, as the fine-tuning layouts pad."""
    rng = np.random.default_rng(0)
    input_ids = rng.integers(0, 97, shape).astype(np.int32)
    segment_ids = np.broadcast_to((np.arange(L) >= 5).astype(np.int32), shape).copy()
    attention_mask = np.ones(shape, np.int32)
    attention_mask[1, ..., :2] = 0
    return {"input_ids": input_ids, "segment_ids": segment_ids,
            "attention_mask": attention_mask}


def _two_stream_inputs():
    """Pretraining's inputs: a permutation mask and P = 3 predicted positions."""
    rng = np.random.default_rng(1)
    perm_mask = (rng.random((B, L, L)) < 0.4).astype(np.float32)
    target_mapping = np.zeros((B, P, L), np.float32)
    target_mapping[:, [0, 1, 2], [2, 5, 7]] = 1.0
    return {"input_ids": rng.integers(0, 97, (B, L)).astype(np.int32),
            "segment_ids": (np.arange(L)[None] >= 5).astype(np.int32).repeat(B, 0),
            "perm_mask": perm_mask, "target_mapping": target_mapping}


def _squad_inputs():
    inputs = _standard_inputs((B, L))
    p_mask = np.zeros((B, L), np.int32)
    p_mask[:, :3] = 1  # the question cannot hold the answer
    return dict(inputs, p_mask=p_mask, cls_index=np.full([B], L - 1, np.int32))


CASES = [
    ModelCase("XLNetModel", XLNetModel, dict(config=CONFIG), _standard_inputs((B, L)), (
        Golden("hidden", np.s_[0, :2, :3], [[-0.70131373, -1.1881931, 0.759202],
                                            [-1.0664235, -0.094797753, 0.18097073]], -1.9208409),
    )),
    ModelCase("XLNetLMHeadModel", XLNetLMHeadModel, dict(config=CONFIG), _two_stream_inputs(), (
        Golden("logits", np.s_[0, :2, :3], [[-0.44954014, 1.2244191, 0.80610961],
                                            [-0.3807779, 1.2331448, 0.81925023]], -8.8869959),
    )),
    ModelCase("SequenceClassifier-classification", SequenceClassifier,
              dict(config=CONFIG, num_outputs=3), _standard_inputs((B, L)), (
        Golden("logits", np.s_[:2, :3], [[0.06858559, -0.38431633, -0.034086484],
                                         [-0.54283267, -0.2501395, -0.037450735]], -1.1802401),
    )),
    ModelCase("SequenceClassifier-regression", SequenceClassifier,
              dict(config=CONFIG, num_outputs=1), _standard_inputs((B, L)), (
        Golden("logits", np.s_[:, 0], [-0.28203142, -0.55146009], -0.8334915),
        Golden("pooled", np.s_[:2, :3], [[-0.0010420304, 0.030638533, -0.81809133],
                                         [-0.64709926, -0.018544527, 0.38469884]], 1.1263015),
    )),
    ModelCase("SquadModel", SquadModel, dict(config=CONFIG, start_n_top=3, end_n_top=3),
              _squad_inputs(), (
        Golden("end_top_log_probs", np.s_[0, :2, :3], [[-1.1997367, -1.5048854, -1.6715099],
                                                       [-1.3099672, -1.4570191, -1.6489146]],
               -25.867817),
        Golden("cls_logits", np.s_[:], [0.21167535, 0.03478083], 0.24645618),
    )),
    ModelCase("MultipleChoiceModel", MultipleChoiceModel, dict(config=CONFIG, num_choices=C),
              _standard_inputs((B, C, L)), (
        Golden("logits", np.s_[:2, :3], [[0.44700515, 0.23432505, 0.3400735],
                                         [0.43609238, 0.1966666, 0.61746395]], 2.2716266),
    )),
]


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("case", CASES, ids=str)
def test_model_harness(case, check, tmp_path):
    CHECKS[check](case, str(tmp_path))


@pytest.mark.parametrize("case", [c for c in CASES if c.cls in (XLNetModel, XLNetLMHeadModel)],
                         ids=str)
def test_golden_numbers_are_huggingfaces(case):
    """The recorded numbers of the backbone and the LM model are what HuggingFace's PyTorch
    XLNet computes on the same weights and inputs."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from benchmarks.tools.hf_reference import hf_from_ours, run_hf

    model = seeded_model(case)
    theirs = run_hf(hf_from_ours(model, model.config), dict(case.inputs))
    ours = outputs(model, case.inputs)
    for golden in case.golden:
        np.testing.assert_allclose(theirs[golden.output][golden.index], golden.values,
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(theirs[golden.output].sum(dtype=np.float64), golden.total,
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(theirs[golden.output], ours[golden.output], atol=1e-5)
