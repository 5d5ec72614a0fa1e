"""What pretraining at the paper's scale costs in memory and host-to-device traffic.

The paper's setting (XLNet, Yang et al. 2019, section 3.1 and appendix A.3): global batch 8192,
seq_len 512, reuse_len 256, mem_len 384, 85 predicted tokens per sequence, bi_data, on 512
TPU v3 chips. Assumptions of this module (`PodSetting`):

  * TPU v3 has 2 TensorCores per chip and TensorFlow's TPUStrategy runs one replica per core:
    512 chips = 1024 replicas, 8 sequences per replica.
  * 4 chips per host (a v3-8 TPU VM), so 128 hosts, 64 sequences per host.
  * Everything in float32 (parameters, Adam moments, gradients, memory), as the paper's runs
    and this project's default; mixed_bfloat16 keeps float32 variables and memory too.

Counted quantities, with b_h sequences per host, L seq_len, M mem_len, D d_model, P num_predict,
N_l layers (all sizes in bytes):

  memory state (Transformer-XL)   N_l x rows x M x D x 4, rows = b_h per host, 8192 globally.
      It is saved per host (xlnet_tf2/models/memory.py); before that it was all-gathered, so one
      host held (and wrote) the global size. With TPUStrategy's single client the client still writes the
      global size; the per-host figure is what a multi-worker run (one process per host) holds.
  dense host-built features, per sequence:  perm_mask [L, L] f32 + target_mapping [P, L] f32 +
      input_ids, segment_ids [L] i32 + target [P] i32 + target_mask [P] f32 + 4 bookkeeping i32.
  compact features, per sequence:  input_ids, perm_rank [L] i32 + segment_ids [L] i8 +
      target_positions [P] i32 + 4 bookkeeping i32; the device builds the masks, targets and
      target mask. Both tables are the input pipeline's own (pretrain_dataset.py).
  parameters, per replica: every weight (formula in `parameter_count`) x 4; Adam keeps two
      float32 moments (x 8) and the step holds one float32 gradient (x 4); data parallelism
      replicates all three on every replica.
  ideal step time: the step's analytic FLOPs (training/metrics_logger.py) / (chips x 123
      TFLOP/s bf16), i.e. the time at 100% MFU, and the host-to-device bandwidth that time
      would need per host.

Activations are not estimated (they depend on XLA's rematerialization).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.training.device_peak import ACCELERATORS
from xlnet_tf2.training.metrics_logger import pretrain_step_flops
from xlnet_tf2.data.pretrain_dataset import feature_bytes
from benchmarks.tools.command_configs import ScaleReportConfig

F32 = 4


@dataclasses.dataclass(frozen=True)
class PodSetting(ScaleReportConfig):
    """The pod and step of the report: the command's settings (global_batch, seq_len,
    reuse_len, mem_len, num_predict, chips, chips_per_host; the paper's by default) and what
    the report assumes beside them."""

    bi_data: bool = True
    replicas_per_chip: int = 2   # TPU v3: one replica per TensorCore
    chip_peak_flops: float = ACCELERATORS["TPU v3"].bf16

    def __post_init__(self):
        super().__post_init__()
        if self.global_batch % self.replicas:
            raise RunConfigError(f"--global_batch={self.global_batch} is not divisible by the "
                                 f"{self.replicas} replicas ({self.replicas_per_chip} per "
                                 "chip).")

    @classmethod
    def of(cls, config: ScaleReportConfig) -> "PodSetting":
        """The setting of the command's config (benchmarks/scale_report.py)."""
        return cls(**dataclasses.asdict(config))

    @property
    def hosts(self) -> int:
        return self.chips // self.chips_per_host

    @property
    def replicas(self) -> int:
        return self.chips * self.replicas_per_chip

    @property
    def host_batch(self) -> int:
        return self.global_batch // self.hosts

    @property
    def replica_batch(self) -> int:
        return self.global_batch // self.replicas


PAPER = PodSetting()


def parameter_count(config: XLNetConfig) -> int:
    """Trainable weights of XLNetLMHeadModel (checked against a built model in the tests):
    per layer q, k, v, r, o [D, N, H], seg_embed [2, N, H], r_w/r_r/r_s biases [N, H], two
    LayerNorms (2D each), feed-forward D x F + F + F x D + D; plus the embedding V x D, mask_emb
    D and the LM bias V (the output layer is tied to the embedding)."""
    D, NH, F, V = config.d_model, config.n_head * config.d_head, config.d_inner, config.n_token
    per_layer = 5 * D * NH + 2 * NH + 3 * NH + 2 * 2 * D + (D * F + F) + (F * D + D)
    return config.n_layer * per_layer + V * D + D + V


def memory_state_bytes(config: XLNetConfig, rows: int, mem_len: int) -> int:
    """float32 Transformer-XL memory of `rows` sequences: n_layer x [rows, mem_len, d_model]."""
    return config.n_layer * rows * mem_len * config.d_model * F32


def dense_feature_bytes(seq_len: int, num_predict: int) -> Dict[str, int]:
    """Bytes per sequence of each feature the host shipped when it built the masks (the
    input pipeline's former output, `pretrain_dataset.DENSE_HOST_DTYPES`)."""
    return feature_bytes(seq_len, num_predict, dense_masks=True)


def compact_feature_bytes(seq_len: int, num_predict: int) -> Dict[str, int]:
    """Bytes per sequence of each feature the input pipeline ships now that the device builds
    the masks (`pretrain_dataset.OUTPUT_DTYPES`)."""
    return feature_bytes(seq_len, num_predict)


@dataclasses.dataclass(frozen=True)
class ScaleCosts:
    name: str
    parameters: int
    param_bytes_per_replica: int
    adam_bytes_per_replica: int
    grad_bytes_per_replica: int
    memory_global_bytes: int
    memory_host_bytes: int
    memory_replica_bytes: int
    dense_h2d_bytes_per_host_step: int
    compact_h2d_bytes_per_host_step: int
    train_flops_per_step: float
    ideal_step_seconds: float

    @property
    def dense_h2d_bytes_per_second(self) -> float:
        return self.dense_h2d_bytes_per_host_step / self.ideal_step_seconds

    @property
    def compact_h2d_bytes_per_second(self) -> float:
        return self.compact_h2d_bytes_per_host_step / self.ideal_step_seconds


def scale_costs(name: str, config: XLNetConfig, setting: PodSetting = PAPER) -> ScaleCosts:
    s = setting
    params = parameter_count(config)
    step_config = dataclasses.replace(config, mem_len=s.mem_len, reuse_len=s.reuse_len,
                                      bi_data=s.bi_data)
    flops = pretrain_step_flops(step_config, seq_len=s.seq_len,
                                num_predict=s.num_predict, global_batch_size=s.global_batch,
                                num_replicas=s.replicas).train_per_step
    dense = sum(dense_feature_bytes(s.seq_len, s.num_predict).values())
    compact = sum(compact_feature_bytes(s.seq_len, s.num_predict).values())
    return ScaleCosts(
        name=name, parameters=params, param_bytes_per_replica=params * F32,
        adam_bytes_per_replica=2 * params * F32, grad_bytes_per_replica=params * F32,
        memory_global_bytes=memory_state_bytes(config, s.global_batch, s.mem_len),
        memory_host_bytes=memory_state_bytes(config, s.host_batch, s.mem_len),
        memory_replica_bytes=memory_state_bytes(config, s.replica_batch, s.mem_len),
        dense_h2d_bytes_per_host_step=dense * s.host_batch,
        compact_h2d_bytes_per_host_step=compact * s.host_batch,
        train_flops_per_step=flops, ideal_step_seconds=flops / (s.chips * s.chip_peak_flops))


def paper_costs(setting: PodSetting = PAPER) -> List[ScaleCosts]:
    """Base and Large (n_token 32000) at the setting."""
    return [scale_costs(name, XLNetConfig.preset(name), setting) for name in ("base", "large")]


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def markdown_table(costs: List[ScaleCosts], setting: PodSetting = PAPER) -> str:
    """The costs as a markdown table (one column per model), with the setting above it."""
    s = setting
    lines = [f"Setting: global batch {s.global_batch}, seq_len {s.seq_len}, reuse_len "
             f"{s.reuse_len}, mem_len {s.mem_len}, {s.num_predict} predictions, "
             f"bi_data={s.bi_data}; {s.chips} TPU v3 chips, {s.chips_per_host} per host = "
             f"{s.hosts} hosts, {s.replicas} replicas (one per TensorCore): {s.host_batch} "
             f"sequences per host, {s.replica_batch} per replica. Sizes in decimal units, "
             "float32.", "",
             "| quantity | " + " | ".join(f"XLNet-{c.name.capitalize()}" for c in costs) + " |",
             "|---|" + "---:|" * len(costs)]

    def row(label, values):
        lines.append(f"| {label} | " + " | ".join(values) + " |")

    row("parameters", [f"{c.parameters / 1e6:.1f} M" for c in costs])
    row("weights per replica", [_size(c.param_bytes_per_replica) for c in costs])
    row("Adam moments (m, v) per replica", [_size(c.adam_bytes_per_replica) for c in costs])
    row("gradients per replica", [_size(c.grad_bytes_per_replica) for c in costs])
    row(f"weights + Adam + gradients, the {s.chips_per_host * s.replicas_per_chip} replicas "
        "of a host (device memory)",
        [_size(4 * s.chips_per_host * s.replicas_per_chip * c.param_bytes_per_replica)
         for c in costs])
    row("memory state, global (formerly all-gathered onto one host)",
        [_size(c.memory_global_bytes) for c in costs])
    row("memory state per host (saved per host now)", [_size(c.memory_host_bytes) for c in costs])
    row("memory state per replica (on device)", [_size(c.memory_replica_bytes) for c in costs])
    row("host-to-device per host per step, dense masks",
        [_size(c.dense_h2d_bytes_per_host_step) for c in costs])
    row("host-to-device per host per step, compact features",
        [_size(c.compact_h2d_bytes_per_host_step) for c in costs])
    row("training FLOPs per step", [f"{c.train_flops_per_step:.3g}" for c in costs])
    row("step time at 100% MFU (bf16 peak)", [f"{c.ideal_step_seconds:.3g} s" for c in costs])
    row("host-to-device per host at that step time, dense",
        [_size(c.dense_h2d_bytes_per_second) + "/s" for c in costs])
    row("host-to-device per host at that step time, compact",
        [_size(c.compact_h2d_bytes_per_second) + "/s" for c in costs])
    return "\n".join(lines)
