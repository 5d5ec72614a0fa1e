"""How one global batch is split over replicas and accumulation micro-batches: the one home of
every batch-divisibility rule of a run (the loop, the pretraining task and the input pipeline
all ask this class).

Letters (docs/GLOSSARY.md): G global batch (--train_batch_size), Rp replicas in sync, A
micro-batches per step (--grad_accum_steps), B = G / Rp rows per replica, m = B / A rows per
micro-batch, S streams read per step, a *group* (G, or G / 2 with bi_data).

    layout = BatchLayout(global_batch=32, num_replicas=2, micro_batches=2, bi_data=True)
    layout.replica_batch, layout.micro_batch      # 16, 8
    layout.slot(replica=1, row=9)                  # (stream within the step's group, direction)

Rules (checked on construction, each a `BatchLayoutError` naming the flags):
  * B = G / Rp is an integer;
  * m = B / A is an integer;
  * with bi_data every micro-batch is [forward half; backward half] of the same streams, so m
    is even (that is why the bidirectional batch splits evenly per replica: the model's
    relative positions expect each replica's rows in that order).

Row layout (`slot`): each micro-batch k of replica r is a *virtual replica* r * A + k of m rows;
without bi_data its row j reads stream (r * A + k) * m + j forward; with bi_data rows [0, m/2)
read streams (r * A + k) * m/2 + j forward and rows [m/2, m) the same streams backward. A row's
slot (direction * S + stream) names its text whatever Rp and A are (memory is restored by slot).
The words slot, group, stream and virtual replica: docs/GLOSSARY.md#data-schedule-words.
"""

from __future__ import annotations

import dataclasses
from typing import List, Tuple

from xlnet_tf2.config_flags import RunConfigError


class BatchLayoutError(RunConfigError):
    """The global batch, the replicas, the accumulation steps and the prepared streams do not
    fit together; the message names the flags."""


@dataclasses.dataclass(frozen=True)
class BatchLayout:
    global_batch: int
    num_replicas: int = 1
    micro_batches: int = 1
    bi_data: bool = False
    # Derived on construction, once the rules hold:
    replica_batch: int = dataclasses.field(init=False)  # B: rows per replica and step
    micro_batch: int = dataclasses.field(init=False)  # m: rows per replica and micro-batch
    streams_per_step: int = dataclasses.field(init=False)  # S: each read twice with bi_data

    def __post_init__(self):
        B, Rp, N = self.global_batch, self.num_replicas, self.micro_batches
        if B <= 0 or Rp <= 0 or N <= 0:
            raise BatchLayoutError(
                f"--train_batch_size={B}, the {Rp} replicas and --grad_accum_steps={N} must be "
                "positive.")
        if B % Rp:
            raise BatchLayoutError(
                f"--train_batch_size={B} is not divisible by the {Rp} replicas in sync.")
        b = B // Rp
        if self.bi_data and b % 2:
            raise BatchLayoutError(
                f"With bi_data every replica's batch is half forward, half backward, so the "
                f"local batch {b} (= --train_batch_size={B} / {Rp} replicas) must be even.")
        if b % N:
            raise BatchLayoutError(
                f"The local batch {b} (= --train_batch_size={B} / {Rp} replicas) is not "
                f"divisible by --grad_accum_steps={N}.")
        if self.bi_data and (b // N) % 2:
            raise BatchLayoutError(
                f"With bi_data every micro-batch is half forward, half backward, so the "
                f"micro-batch {b // N} (= --train_batch_size={B} / {Rp} replicas / "
                f"--grad_accum_steps={N}) must be even.")
        object.__setattr__(self, "replica_batch", b)  # (the class is frozen)
        object.__setattr__(self, "micro_batch", b // N)
        object.__setattr__(self, "streams_per_step", B // 2 if self.bi_data else B)

    def slot(self, replica: int, row: int) -> Tuple[int, int]:
        """(stream index inside the step's group, direction) of local row `row` of `replica`."""
        m = self.micro_batch
        virtual = replica * self.micro_batches + row // m
        row = row % m
        if not self.bi_data:
            return virtual * m + row, 0
        half = m // 2
        return virtual * half + row % half, int(row >= half)

    def slots(self, replica: int) -> List[int]:
        """direction * S + stream of every row of a replica batch: the identity of the text
        each row continues, the same on any topology."""
        return [direction * self.streams_per_step + stream
                for stream, direction in (self.slot(replica, row)
                                          for row in range(self.replica_batch))]
