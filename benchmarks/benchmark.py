"""Side-by-side speed benchmark: xlnet-tf2 against HuggingFace's PyTorch XLNet.

  python benchmarks/benchmark.py                       # the default workloads and sizes
  python benchmarks/benchmark.py --workloads=pretrain --seq_len=256 --reuse_len=128
  python benchmarks/benchmark.py --workloads=loop --loop_repeats=3

Both implementations get the same config, the same inputs and the same thread count, and are
timed alternately in this one process so background load affects both alike. Reported: median
step time after warm-up, tokens/s, the step's extra peak memory, analytic FLOPs per step and
MFU against this machine's measured float32 matmul peak, and the ratio ours/theirs of
throughput (> 1 means xlnet-tf2 is faster).

The loop workload is the exception: it runs the real pretraining loop of run_pretrain.py on
TFRecords it prepares, the bare step and a HuggingFace PyTorch loop on the same data, each in a
process of its own (so each peak RSS is its own), in rotating rounds with the load average
recorded around every run (benchmarks/tools/loop_benchmark.py). The flags are the settings of
`BenchmarkConfig` (benchmarks/tools/command_configs.py).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import _paths  # noqa: E402,F401  (the checkout's root on sys.path)

from xlnet_tf2 import cli, fileio  # noqa: E402

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from benchmarks.tools.command_configs import BenchmarkConfig  # noqa: E402

define_flags(BenchmarkConfig)


def _configure_threads(c, threads):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(min(threads, 2))
    if c.reference:
        import torch

        torch.set_num_threads(threads)


def _model_config(c, workload, vocab_size=None):
    from xlnet_tf2 import XLNetConfig

    return XLNetConfig.from_dict(dict(
        n_layer=c.n_layer, d_model=c.d_model, n_head=c.n_head, d_head=c.d_head,
        d_inner=c.d_inner, n_token=vocab_size or c.vocab_size, dropout=0.1, dropatt=0.1,
        mem_len=workload.mem_len, reuse_len=workload.reuse_len, bi_data=workload.bi_data))


def _row(name, workload, measurement, flops, peak, baseline=None):
    step = measurement.median
    row = {"workload": name, "batch": workload.batch_size, "seq_len": workload.seq_len,
           "mem_len": workload.mem_len, "step_ms": 1000 * step,
           "tokens_per_s": workload.tokens_per_step / step, "peak_mem_mb": measurement.peak_memory_mb,
           "gflops_per_step": flops / 1e9, "mfu": flops / step / peak}
    if baseline is not None:
        row["ratio_vs_reference"] = baseline.median / step
    return row


def _compare(c, title, workload, ours, theirs, flops, peak):
    from benchmarks.tools.benchmarking import interleaved

    runs = dict(ours)
    if theirs is not None:
        runs["huggingface (pytorch)"] = theirs
    results = interleaved(runs, warmup=c.warmup, repeats=c.repeats)
    reference = results.get("huggingface (pytorch)")
    rows = []
    for name, measurement in results.items():
        baseline = reference if (reference is not None and measurement is not reference) else None
        rows.append(_row(f"{title}: {name}", workload, measurement, flops, peak, baseline))
    return rows


def _pretrain_rows(c, workload, peak):
    from benchmarks.tools.benchmarking import make_batch, tf_pretrain_step
    from xlnet_tf2.training.metrics_logger import pretrain_step_flops

    config = _model_config(c, workload)
    batch = make_batch(workload, config)
    ours = {"xlnet-tf2 (XLA)": tf_pretrain_step(config, batch, jit_compile=True),
            "xlnet-tf2 (tf.function)": tf_pretrain_step(config, batch, jit_compile=False)}
    theirs = None
    if c.reference:
        from benchmark_reference import hf_pretrain_step

        theirs = hf_pretrain_step(config, batch)
    flops = pretrain_step_flops(config, seq_len=workload.seq_len,
                                num_predict=workload.num_predict,
                                global_batch_size=workload.batch_size).train_per_step
    title = f"pretrain step L={workload.seq_len} M={workload.mem_len}"
    return _compare(c, title, workload, ours, theirs, flops, peak)


def _inference_rows(c, batch_size, peak, export_dir):
    from benchmarks.tools.benchmarking import Workload, make_batch, saved_model_inference, tf_inference
    from xlnet_tf2.training.metrics_logger import pretrain_step_flops

    workload = Workload(batch_size=batch_size, seq_len=c.inference_seq_len)
    config = _model_config(c, workload, c.inference_vocab_size)
    batch = make_batch(workload, config)
    ours = {"xlnet-tf2 (XLA)": tf_inference(config, batch, mode="xla"),
            "xlnet-tf2 (eager Keras)": tf_inference(config, batch, mode="eager")}
    if export_dir:
        ours["xlnet-tf2 SavedModel"] = saved_model_inference(export_dir, batch)
    theirs = None
    if c.reference:
        from benchmark_reference import hf_inference

        theirs = hf_inference(config, batch)
    flops = pretrain_step_flops(config, seq_len=workload.seq_len, num_predict=0,
                                global_batch_size=batch_size).train_per_step / 3.0
    return _compare(c, f"inference B={batch_size}", workload, ours, theirs, flops, peak)


def _data_report(c, train_rows):
    """Data preparation tokens/s on new text (the whole command, the default settings against
    --noword_cache, side by side) and input-pipeline examples/s at the pretraining step's
    shape, set against what the timed training step consumes."""
    from benchmarks.tools.data_throughput import format_report, measure_data_throughput

    # Per-stage tokens/s (with the SentencePiece-only ceiling) and end-to-end runs at the
    # data shape; the input pipeline is then timed at the training step's batch.
    result = measure_data_throughput(
        c.data_workdir, corpus_bytes=c.data_corpus_bytes, vocab_size=c.data_vocab_size,
        workers=c.data_workers, runs=c.data_runs, scaling=c.data_scaling,
        seq_len=c.data_seq_len,
        reuse_len=c.data_seq_len // 2, num_predict=c.data_seq_len // 6,
        num_streams=2 * c.batch_size, global_batch_size=c.batch_size)
    print(format_report(result))
    fastest = max((r for r in train_rows if r["workload"].startswith("pretrain step")),
                  key=lambda r: r["tokens_per_s"], default=None)
    if fastest is not None:
        # Tokens/s on both sides: the data workload's L may differ from the training step's.
        consumed = fastest["tokens_per_s"]
        produced = result["pipeline"]["tokens_per_s"]
        print(f"input pipeline {produced:,.0f} tokens/s vs. {consumed:,.0f} tokens/s consumed by "
              f"the fastest training step ({produced / consumed:.0f}x headroom)")
    return result


def _loop_report(c, threads):
    """The real pretraining loop against the bare step and HuggingFace's loop, each in its own
    process (benchmarks/tools/loop_benchmark.py); returns everything measured, for --output_json."""
    import dataclasses
    import shutil
    import tempfile

    from benchmarks.tools import loop_benchmark
    from benchmarks.tools.loop_contenders import prepare_loop_data
    from xlnet_tf2.training.device_peak import device_peak_flops, measure_matmul_peak
    from xlnet_tf2.training.metrics_logger import pretrain_step_flops

    workdir = c.loop_workdir or tempfile.mkdtemp(prefix="xlnet_loop_benchmark_")
    spec = loop_benchmark.LoopSpec(
        n_layer=c.n_layer, d_model=c.d_model, n_head=c.n_head, d_head=c.d_head,
        d_inner=c.d_inner, vocab_size=c.loop_vocab_size, batch_size=c.batch_size,
        seq_len=c.seq_len, reuse_len=c.reuse_len, mem_len=c.mem_len, num_predict=c.num_predict,
        bi_data=c.bi_data, steps=c.loop_steps, steps_per_loop=c.loop_steps_per_loop,
        workdir=os.path.abspath(workdir), threads=c.threads)
    try:
        prepared = prepare_loop_data(spec, c.loop_corpus_bytes)
        print(f"loop workload data in {workdir}: {prepared['corpus_bytes']:,} bytes of "
              f"docstrings, {prepared['tokens']:,} tokens, {c.loop_vocab_size}-piece "
              f"SentencePiece model{' (reused)' if prepared['reused'] else ''}", flush=True)
        roles = loop_benchmark.ROLES if c.reference else ("real", "bare")
        worker = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                               "benchmark_loop_worker.py")]
        rounds = loop_benchmark.run_rounds(spec, roles, c.loop_repeats, worker,
                                           log=lambda line: print(line, flush=True))
        flops = pretrain_step_flops(spec.xlnet_config(), seq_len=spec.seq_len,
                                    num_predict=spec.num_predict,
                                    global_batch_size=spec.batch_size).train_per_step
        # The MFU denominator the training loop itself logs with (device_peak.py).
        peak = device_peak_flops("float32") or measure_matmul_peak()
        summary = loop_benchmark.summarize(rounds, spec, flops, peak)
        print(loop_benchmark.format_summary(summary, spec))
        return {"spec": dataclasses.asdict(spec), "threads": threads, "prepared": prepared,
                "rounds": rounds, **summary}
    finally:
        if not c.loop_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _print_table(rows):
    if not rows:  # e.g. only the loop workload, which prints its own table
        return
    header = ("| workload | B | L | M | step ms | tokens/s | peak extra MB | GFLOP/step | MFU | "
              "ours/HF |")
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for r in rows:
        ratio = r.get("ratio_vs_reference")
        mem = r.get("peak_mem_mb")
        print(f"| {r['workload']} | {r['batch']} | {r['seq_len']} | {r['mem_len']} | "
              f"{r['step_ms']:.1f} | {r['tokens_per_s']:.0f} | "
              f"{'' if mem is None else f'{mem:.0f}'} | {r['gflops_per_step']:.2f} | "
              f"{100 * r['mfu']:.1f}% | {'' if ratio is None else f'{ratio:.2f}x'} |")


def main(argv):
    del argv
    c = config_from_flags(BenchmarkConfig)
    threads = c.threads or os.cpu_count()
    if c.reference:
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError:
            sys.exit("--reference needs torch and transformers: pip install -r "
                     "requirements-reference.txt, or pass --noreference.")
    _configure_threads(c, threads)
    import logging
    import platform

    logging.getLogger("apache_beam").setLevel(logging.WARNING)

    import tensorflow as tf

    from benchmarks.tools.benchmarking import Workload
    from xlnet_tf2.training.device_peak import measure_matmul_peak

    peak = measure_matmul_peak(tf.float32)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{threads} threads; TensorFlow {tf.__version__}; measured float32 matmul peak "
          f"{peak / 1e9:.1f} GFLOP/s")
    rows = []
    base = Workload(batch_size=c.batch_size, seq_len=c.seq_len, mem_len=c.mem_len,
                    reuse_len=c.reuse_len, num_predict=c.num_predict, bi_data=c.bi_data)
    if "pretrain" in c.workloads:
        rows += _pretrain_rows(c, base, peak)
    if "inference" in c.workloads:
        import tempfile

        from benchmarks.tools.benchmarking import export_features_saved_model

        with tempfile.TemporaryDirectory() as workdir:
            export_dir = None
            if c.saved_model:
                export_dir = export_features_saved_model(
                    _model_config(c, Workload(1, c.inference_seq_len), c.inference_vocab_size),
                    c.inference_seq_len, workdir)
            rows += _inference_rows(c, 1, peak, export_dir)
            rows += _inference_rows(c, c.inference_batch_size, peak, export_dir)
    if "scaling" in c.workloads:
        for seq_len in (128, 256, 512):
            if seq_len == base.seq_len and "pretrain" in c.workloads:
                continue
            rows += _pretrain_rows(c, Workload(
                batch_size=base.batch_size, seq_len=seq_len, mem_len=seq_len // 2,
                reuse_len=seq_len // 2, num_predict=max(1, round(seq_len / 6)),
                bi_data=base.bi_data), peak)
        for mem_len in (0, 128, 256):
            rows += _pretrain_rows(c, Workload(
                batch_size=base.batch_size, seq_len=base.seq_len, mem_len=mem_len,
                reuse_len=base.reuse_len, num_predict=base.num_predict, bi_data=base.bi_data), peak)
    loop = _loop_report(c, threads) if "loop" in c.workloads else None
    _print_table(rows)
    data = _data_report(c, rows) if "data" in c.workloads else None
    if c.output_json:
        fileio.write_json_atomically(c.output_json, {
            "peak_flops": peak, "threads": threads, "rows": rows, "data": data, "loop": loop})


if __name__ == "__main__":
    cli.run(main)
