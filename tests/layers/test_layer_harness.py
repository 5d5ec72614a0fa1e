"""Every Keras layer class of xlnet_tf2/layers and xlnet_tf2/models/heads through the shared
layer harness (tests/fixtures/layer_harness.py): config round trip, symbolic call, a training
step whose loss falls, mixed_bfloat16 / mixed_float16 (global and per layer), `.keras` save/load.

Shapes are tiny: B 2, L 4, M 2 (K 6), P 2 predicted positions, D 8, N 2 heads of 4, d_inner 16.
Dropout rates are non-zero so that the training step and the precision checks also run the
dropout path; round trips compare inference outputs.
"""

import keras
import numpy as np
import pytest

from fixtures.layer_harness import CHECKS, LayerCase, layer_classes
from xlnet_tf2.layers import (Dropout, PositionwiseFeedForward, RelativeAttention, XLNetBlock,
                              build_attention_masks, relative_position_encoding, segment_matrix)
from xlnet_tf2.models.heads import (ClassificationHead, MultipleChoiceHead, SequenceSummary,
                                    SquadHead)

B, L, M, P, D, N, H, D_INNER, C = 2, 4, 2, 2, 8, 2, 4, 16, 3
K = M + L
PACKAGES = ("xlnet_tf2.layers", "xlnet_tf2.models.heads")


def _normal(shape, seed):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _attention_inputs(two_stream: bool):
    """The arguments XLNetModel passes a block: a memory, a padded row, a permutation mask,
    two segments and, for the query stream, P predicted positions (one of them empty)."""
    attention_mask = np.ones((B, L), np.int32)
    attention_mask[1, 0] = 0
    perm_mask = (np.random.default_rng(3).random((B, L, L)) < 0.3).astype(np.float32)
    segment_ids = np.array([[0, 0, 1, 1], [0, 0, 0, 1]], np.int32)
    content_mask, query_mask = build_attention_masks(
        batch_size=B, q_len=L, m_len=M, attn_type="bi", same_length=False,
        attention_mask=attention_mask, perm_mask=perm_mask)
    inputs = {
        "h": _normal((B, L, D), 1),
        "pos_emb": relative_position_encoding(L, K, D).numpy(),  # [1, K + L, D]
        "mems": _normal((B, M, D), 2),
        "content_mask": content_mask.numpy(),
        "segment_mismatch": segment_matrix(segment_ids, M).numpy(),
    }
    if two_stream:
        positions = np.array([[1, 3], [0, 2]], np.int32)
        inputs.update(
            g=_normal((B, P, D), 4),
            query_mask=np.take_along_axis(query_mask.numpy(), positions[:, :, None], axis=1),
            query_segment_mismatch=segment_matrix(
                segment_ids, M, query_segment_ids=np.take_along_axis(segment_ids, positions, 1)
            ).numpy(),
            query_positions=positions,
            query_weights=np.array([[1, 1], [1, 0]], np.float32))
    return inputs


_ATTENTION_KWARGS = dict(d_model=D, n_head=N, d_head=H, dropout=0.1, dropatt=0.1)
_BLOCK_KWARGS = dict(_ATTENTION_KWARGS, d_inner=D_INNER, layer_index=1)
_hidden = _normal((B, L, D), 5)
_padding = np.array([[1, 1, 1, 1], [0, 1, 1, 1]], np.int32)
_p_mask = np.array([[1, 0, 0, 0], [1, 1, 0, 0]], np.int32)
_cls_index = np.array([3, 3], np.int32)
_SQUAD_FLOAT32 = ("start_logits", "end_logits", "cls_logits", "start_top_log_probs",
                  "end_top_log_probs")

CASES = [
    LayerCase("Dropout", Dropout, dict(rate=0.25, seed=3), {"inputs": _normal((B, L, D), 6)},
              {"output": (B, L, D)}),
    LayerCase("Dropout-store_mask", Dropout, dict(rate=0.25, store_mask=True),
              {"inputs": _normal((B, L, D), 6)}, {"output": (B, L, D)}),
    LayerCase("PositionwiseFeedForward", PositionwiseFeedForward,
              dict(d_model=D, d_inner=D_INNER, dropout=0.1), {"x": _hidden},
              {"output": (B, L, D)}),
    LayerCase("PositionwiseFeedForward-relu", PositionwiseFeedForward,
              dict(d_model=D, d_inner=D_INNER, activation="relu", dropout=0.1), {"x": _hidden},
              {"output": (B, L, D)}),
    LayerCase("RelativeAttention-two-stream", RelativeAttention, _ATTENTION_KWARGS,
              _attention_inputs(True), {"0": (B, L, D), "1": (B, P, D)},
              unbatched=("pos_emb",)),
    LayerCase("RelativeAttention-content", RelativeAttention, _ATTENTION_KWARGS,
              _attention_inputs(False), {"output": (B, L, D)},
              unbatched=("pos_emb",)),
    LayerCase("XLNetBlock-two-stream", XLNetBlock, _BLOCK_KWARGS, _attention_inputs(True),
              {"0": (B, L, D), "1": (B, P, D)}, unbatched=("pos_emb",)),
    LayerCase("XLNetBlock-content", XLNetBlock, _BLOCK_KWARGS, _attention_inputs(False),
              {"output": (B, L, D)}, unbatched=("pos_emb",)),
    LayerCase("SequenceSummary-attn", SequenceSummary,
              dict(d_model=D, summary_type="attn", n_head=2, dropout=0.1),
              {"hidden": _hidden, "attention_mask": _padding}, {"output": (B, D)}),
    LayerCase("SequenceSummary-mean", SequenceSummary,
              dict(d_model=D, summary_type="mean", dropout=0.1),
              {"hidden": _hidden, "attention_mask": _padding}, {"output": (B, D)}),
    LayerCase("ClassificationHead", ClassificationHead,
              dict(d_model=D, num_outputs=3, summary_type="last", dropout=0.1),
              {"hidden": _hidden}, {"0": (B, 3), "1": (B, D)}, float32_outputs=("0",)),
    LayerCase("MultipleChoiceHead", MultipleChoiceHead,
              dict(d_model=D, num_choices=C, summary_type="first", dropout=0.1),
              {"hidden": _normal((B * C, L, D), 7)}, {"output": (B, C)},
              float32_outputs=("output",)),
    LayerCase("SquadHead-training", SquadHead, dict(d_model=D, start_n_top=2, end_n_top=2),
              {"hidden": _hidden, "p_mask": _p_mask, "cls_index": _cls_index,
               "start_positions": np.array([2, 3], np.int32)},
              {"start_logits": (B, L), "end_logits": (B, L), "cls_logits": (B,)},
              float32_outputs=_SQUAD_FLOAT32),
    LayerCase("SquadHead-beam", SquadHead, dict(d_model=D, start_n_top=2, end_n_top=2),
              {"hidden": _hidden, "p_mask": _p_mask, "cls_index": _cls_index},
              {"start_logits": (B, L), "cls_logits": (B,), "start_top_log_probs": (B, 2),
               "start_top_index": (B, 2), "end_top_log_probs": (B, 2, 2),
               "end_top_index": (B, 2, 2)},
              float32_outputs=_SQUAD_FLOAT32),
]


def _params():
    for case in CASES:
        for check in CHECKS:
            marks = ()
            if check in case.xfail:
                reason, raises = case.xfail[check]
                marks = pytest.mark.xfail(reason=reason, raises=raises, strict=True)
            yield pytest.param(case, check, id=f"{case.name}-{check}", marks=marks)


@pytest.fixture(autouse=True)
def _float32_policy_after_each_case():
    """Keras' dtype policy is global: every case starts and ends under float32."""
    assert keras.mixed_precision.global_policy().name == "float32"
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("case, check", list(_params()))
def test_layer_harness(case, check, tmp_path):
    CHECKS[check](case, str(tmp_path))


def test_every_layer_class_is_registered_and_has_a_case():
    """A new layer class in xlnet_tf2/layers or xlnet_tf2/models/heads fails here until it is
    registered for Keras serialization and given a LayerCase above."""
    found = layer_classes(PACKAGES)
    unregistered = sorted(cls.__qualname__ for cls, name in found.items() if name is None)
    assert not unregistered, f"not registered with keras.saving: {unregistered}"
    missing = sorted(cls.__qualname__ for cls in set(found) - {case.cls for case in CASES})
    assert not missing, f"layer classes without a LayerCase: {missing}"
    assert {case.cls for case in CASES} <= set(found)
