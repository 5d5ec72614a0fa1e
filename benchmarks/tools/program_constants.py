"""The constants of the pretraining step's compiled program (BENCHMARKS.md, "Dropout masks":
the step's constants), read from the HLO TensorFlow hands to XLA.

  python -m benchmarks.tools.program_constants                 # XLNet-Base, batch 16 (minutes, ~12 GB)
  python -m benchmarks.tools.program_constants --loop_shape    # the loop benchmark's model
  python -m benchmarks.tools.program_constants --stage=optimized_hlo --stored

The real Trainer's step (`Trainer._step_fn`: forward, backward, clipping, AdamW) on synthetic
pretraining batches (benchmarks/tools/synthetic_data.py), bi_data, dropout 0.1; the CPU-only
stored attention mask off as on a GPU unless --stored. Prints the total, the count over 64 KiB
and 1 KiB, and the largest constants by shape.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import tempfile
import time
from typing import List, Tuple

_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
          "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8}
# `%constant.12 = u32[1,32,128]{2,1,0} constant({...})`: large literals are elided, the shape
# is always printed.
_CONSTANT = re.compile(r"= (\w+)\[([\d,]*)\]\S* constant\(")


def constant_sizes(hlo_text: str) -> List[Tuple[int, str]]:
    """[(bytes, "dtype[dims]")] of every constant op of an HLO module's text, largest first."""
    sizes = []
    for match in _CONSTANT.finditer(hlo_text):
        elements = 1
        for dim in filter(None, match.group(2).split(",")):
            elements *= int(dim)
        sizes.append((elements * _BYTES[match.group(1)], f"{match.group(1)}[{match.group(2)}]"))
    return sorted(sizes, reverse=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=16, help="global batch (Base shape)")
    parser.add_argument("--stage", default="hlo", choices=("hlo", "optimized_hlo"),
                        help="the program TensorFlow hands to XLA, or XLA CPU's optimized one")
    parser.add_argument("--stored", action="store_true",
                        help="keep the CPU-only stored attention-dropout mask")
    parser.add_argument("--loop_shape", action="store_true",
                        help="the loop benchmark's 4 x 256 model, seq 128, batch 8")
    args = parser.parse_args(argv)

    from benchmarks.tools.synthetic_data import SyntheticPretrainData, synthetic_pretrain_dataset
    from xlnet_tf2.config import XLNetConfig
    from xlnet_tf2.tasks.pretraining import DataShape, PretrainTask
    from xlnet_tf2.tasks.pretraining_config import PretrainConfig
    from xlnet_tf2.training.trainer import Trainer

    seq, reuse, mem, predict, batch = 512, 256, 384, 85, args.batch
    architecture = XLNetConfig.preset("base")
    if args.loop_shape:
        seq, reuse, mem, predict, batch = 128, 64, 64, 21, 8
        architecture = XLNetConfig.preset("base", n_layer=4, d_model=256, n_head=4, d_head=64,
                                          d_inner=1024)
    shape = DataShape(seq_len=seq, reuse_len=reuse, num_predict=predict, bi_data=True)

    def dataset_fn(context, start_step):
        return synthetic_pretrain_dataset(
            seq_len=seq, reuse_len=reuse, num_predict=predict, bi_data=True, vocab_size=32000,
            global_batch_size=batch, input_context=context, start_step=start_step)

    config = PretrainConfig.flat(
        model_dir=tempfile.mkdtemp(prefix="program_constants_"), data_dir=("synthetic",),
        model_config="base", train_batch_size=batch, train_steps=10, mem_len=mem,
        jit_compile=True, learning_rate=1e-4, warmup_steps=0, dropout=0.1, dropatt=0.1,
        peak_tflops=1.0)
    trainer = Trainer(PretrainTask(config, architecture=architecture,
                                   data=SyntheticPretrainData(shape, 32000, dataset_fn)))
    # Without --stored, the step as traced for a GPU (no CPU-only stored dropout mask).
    step_fn, step_args = trainer.first_step(device=None if args.stored else "gpu")
    start = time.time()
    text = step_fn.experimental_get_compiler_ir(*step_args)(stage=args.stage)
    print(f"HLO ({args.stage}) in {time.time() - start:.1f} s, {len(text):,} characters")
    found = constant_sizes(text)
    total = sum(size for size, _ in found)
    print(f"constants: {len(found)}, total {total:,} bytes ({total / 2**20:.2f} MiB)")
    print(f"over 64 KiB: {sum(size > 65536 for size, _ in found)}; "
          f"over 1 KiB: {sum(size > 1024 for size, _ in found)}")
    counts = collections.Counter(name for _, name in found)
    for size, name in sorted({(size, name) for size, name in found}, reverse=True)[:12]:
        print(f"  {size:>12,} bytes  {name} x{counts[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
