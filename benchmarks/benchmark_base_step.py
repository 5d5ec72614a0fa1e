"""One pretraining step at XLNet-Base's shape: xlnet-tf2 against HuggingFace's PyTorch XLNet.

  python benchmarks/benchmark_base_step.py                 # B=2, L=512, R=256, M=384, P=85
  python benchmarks/benchmark_base_step.py --repeats=5 --output_json=base_step.json

Ours is the real training step of the pretraining task's Trainer (jit_compile=True): the synthetic input
pipeline's compact features (ranks and target positions) go to the step, which builds the
dense two-stream masks on the device, runs both streams with memory, the token-weighted LM
loss, the backward pass, clipping and AdamW. Theirs is XLNetLMHeadModel (transformers) with
the same architecture and sizes, fed dense perm_mask / target_mapping and memory of the same
length, with the LM loss, backward, clipping and torch AdamW (benchmarks/benchmark_reference.py).
Both use dropout 0.1 and float32, are timed alternately in one process (the machine's
background load hits both alike) after untimed warm-up calls; reported: median step time,
tokens/s, each step's extra peak resident memory, and the throughput ratio ours/theirs. The
flags are the settings of `BaseStepBenchmarkConfig` (benchmarks/tools/command_configs.py).
"""

import os
import resource
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import _paths  # noqa: E402,F401  (the checkout's root on sys.path)

from xlnet_tf2 import cli, fileio  # noqa: E402

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from benchmarks.tools.command_configs import BaseStepBenchmarkConfig  # noqa: E402

define_flags(BaseStepBenchmarkConfig)


def ours_step(c, model_dir):
    """() -> loss: one compiled step of the project's pretraining Trainer on synthetic compact
    data."""
    import tensorflow as tf

    from xlnet_tf2.config import XLNetConfig
    from xlnet_tf2.tasks.pretraining import DataShape, PretrainTask
    from xlnet_tf2.tasks.pretraining_config import PretrainConfig
    from benchmarks.tools.synthetic_data import SyntheticPretrainData
    from xlnet_tf2.training.trainer import Trainer
    from benchmarks.tools.synthetic_data import synthetic_pretrain_dataset

    shape = DataShape(c.seq_len, c.reuse_len, c.num_predict, True)
    model_config = XLNetConfig.resolve(c.model_config)

    def dataset_fn(context, start_step):
        return synthetic_pretrain_dataset(
            seq_len=c.seq_len, reuse_len=c.reuse_len, num_predict=c.num_predict,
            bi_data=True, vocab_size=model_config.n_token, global_batch_size=c.batch_size,
            input_context=context, start_step=start_step)

    config = PretrainConfig.flat(
        model_dir=model_dir, data_dir=("synthetic",), model_config=c.model_config,
        train_batch_size=c.batch_size, train_steps=10 ** 6, mem_len=c.mem_len,
        jit_compile=True, learning_rate=1e-4, warmup_steps=0, dropout=0.1, dropatt=0.1,
        peak_tflops=1.0)
    pretrainer = Trainer(PretrainTask(config, architecture=model_config,
                                      data=SyntheticPretrainData(shape, model_config.n_token,
                                                                 dataset_fn)))
    iterator = iter(pretrainer.strategy.distribute_datasets_from_function(
        lambda context: dataset_fn(context, 0)))
    carried = {"state": pretrainer.distribute_state()}
    one = tf.constant(1, tf.int32)

    def step():
        carried["state"], stats = pretrainer._loop(iterator, carried["state"], one)
        return float(stats["loss"][0])

    return step, pretrainer.task.xlnet_config


def hf_step(config, batch, dropout=0.1, clip_norm=1.0):
    """() -> loss: HF XLNetLMHeadModel in training mode at `dropout` (the benchmark_reference
    step, with the dropout of our step): two streams with memory, LM loss over the targets,
    backward, clipping, torch AdamW."""
    from benchmark_reference import hf_pretrain_step

    return hf_pretrain_step(config, batch, clip_norm=clip_norm, dropout=dropout)


def main(argv):
    del argv
    c = config_from_flags(BaseStepBenchmarkConfig)
    import tensorflow as tf

    from benchmarks.tools.benchmarking import Workload, interleaved, make_batch
    from xlnet_tf2.data.pretrain_dataset import bytes_per_example
    from xlnet_tf2.training.metrics_logger import pretrain_step_flops

    threads = c.threads or os.cpu_count()
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(min(threads, 2))
    runs = {}
    with tempfile.TemporaryDirectory() as model_dir:
        step, config = ours_step(c, model_dir)
        runs["xlnet-tf2 pretraining step (XLA, masks on device)"] = step
        workload = Workload(batch_size=c.batch_size, seq_len=c.seq_len,
                            mem_len=c.mem_len, reuse_len=c.reuse_len,
                            num_predict=c.num_predict, bi_data=True)
        if c.reference:
            import torch

            torch.set_num_threads(threads)
            runs["huggingface XLNetLMHeadModel (pytorch)"] = hf_step(
                config, make_batch(workload, config))
        results = interleaved(runs, warmup=c.warmup, repeats=c.repeats)
    flops = pretrain_step_flops(config, seq_len=c.seq_len,
                                num_predict=c.num_predict,
                                global_batch_size=c.batch_size).train_per_step
    reference = results.get("huggingface XLNetLMHeadModel (pytorch)")
    rows = []
    for name, m in results.items():
        row = {"step": name, "batch": c.batch_size, "seq_len": c.seq_len,
               "mem_len": c.mem_len, "num_predict": c.num_predict,
               "n_layer": config.n_layer, "d_model": config.d_model, "threads": threads,
               "step_s": m.median, "step_s_all": m.times,
               "tokens_per_s": c.batch_size * c.seq_len / m.median,
               "step_peak_extra_mb": m.peak_memory_mb, "gflops_per_step": flops / 1e9,
               "gflops_per_s": flops / m.median / 1e9}
        if reference is not None and m is not reference:
            row["throughput_ratio_vs_hf"] = reference.median / m.median
        rows.append(row)
    process_peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nPretraining step at B={c.batch_size} L={c.seq_len} R={c.reuse_len} "
          f"M={c.mem_len} P={c.num_predict}, {config.n_layer} layers d_model "
          f"{config.d_model}, bi_data, dropout 0.1, float32, {threads} threads")
    print("| step | median s | tokens/s | extra peak MB | GFLOP/s | ratio vs HF |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        ratio = r.get("throughput_ratio_vs_hf")
        peak = r["step_peak_extra_mb"]
        print(f"| {r['step']} | {r['step_s']:.2f} | {r['tokens_per_s']:.0f} | "
              f"{'n/a' if peak is None else f'{peak:.0f}'} | {r['gflops_per_s']:.1f} | "
              f"{'' if ratio is None else f'{ratio:.2f}x'} |")
    print(f"process peak resident memory ({'both frameworks' if c.reference else 'xlnet-tf2 only'}"
          f", compilation included): {process_peak_mb:.0f} MB")
    print(f"host-to-device bytes per example: {bytes_per_example(c.seq_len, c.num_predict):,}"
          f" (compact) vs {bytes_per_example(c.seq_len, c.num_predict, True):,} "
          "(dense host masks)")
    if c.output_json:
        fileio.write_json_atomically(c.output_json,
                                     {"rows": rows, "process_peak_mb": process_peak_mb})


if __name__ == "__main__":
    cli.run(main)
