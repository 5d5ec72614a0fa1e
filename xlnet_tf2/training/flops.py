"""Analytic FLOP count of one pretraining step of the graph this project runs (the MFU
numerator; the denominator, a device's peak FLOP/s, is device_peak.py).

Counted (multiply-add = 2 FLOPs), per layer, for B examples of L tokens with M memory
positions (K = M + L keys), P predicted rows, T = K + L encoded relative distances, X direction
groups (2 with bi_data), D width, N heads of size H (NH = N * H), F = d_inner, V vocabulary:

  content stream (all L rows)   q: 2 L D NH      k, v over K keys: 4 K D NH
                                ac: 2 L K NH     bd (before rel-shift, T columns): 2 L T NH
                                ef: 2 L 2 NH     probs . v: 2 L K NH      o: 2 L NH D
                                feed-forward: 4 L D F
  query stream (P rows only)    q: 2 P D NH      ac: 2 P K NH   bd: 2 P T NH   ef: 2 P 2 NH
                                probs . v: 2 P K NH   o: 2 P NH D   feed-forward: 4 P D F
  per batch (not per example)   relative-position projection r: 2 X T D NH
  LM head (P rows)              2 P D V

Training = forward + backward = 3x forward. Element-wise work (softmax, LayerNorm, GELU,
masks) and the embedding lookup are not counted, as is usual for MFU.
"""

from __future__ import annotations

import dataclasses

from xlnet_tf2.config import XLNetConfig


@dataclasses.dataclass(frozen=True)
class StepFlops:
    forward_per_example: float
    per_batch: float  # shared position projection, counted once per replica batch
    train_per_step: float  # whole global batch, forward + backward


def pretrain_step_flops(config: XLNetConfig, *, seq_len: int, mem_len: int, num_predict: int,
                        global_batch_size: int, num_replicas: int = 1) -> StepFlops:
    """FLOPs of one training step over the global batch (see module doc)."""
    L, M, P = seq_len, mem_len, num_predict
    K = M + L
    T = K + L if config.attn_type == "bi" else K + 1
    X = 2 if config.bi_data else 1
    D, NH, F, V = config.d_model, config.n_head * config.d_head, config.d_inner, config.n_token
    content = 2 * L * D * NH + 4 * K * D * NH + 2 * L * K * NH + 2 * L * T * NH \
        + 2 * L * 2 * NH + 2 * L * K * NH + 2 * L * NH * D + 4 * L * D * F
    query = 2 * P * D * NH + 2 * P * K * NH + 2 * P * T * NH + 2 * P * 2 * NH \
        + 2 * P * K * NH + 2 * P * NH * D + 4 * P * D * F
    per_example = config.n_layer * (content + query) + 2 * P * D * V
    per_batch = config.n_layer * 2 * X * T * D * NH
    train = 3.0 * (per_example * global_batch_size + per_batch * num_replicas)
    return StepFlops(float(per_example), float(per_batch), float(train))
