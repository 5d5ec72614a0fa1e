"""Side-by-side speed benchmark: xlnet-tf2 against HuggingFace's PyTorch XLNet.

  python experiments/benchmark.py                       # all workloads at the default sizes
  python experiments/benchmark.py --workloads=pretrain --seq_len=256 --reuse_len=128

Both implementations get the same config, the same inputs and the same thread count, and are
timed alternately in this one process so background load affects both alike. Reported: median
step time after warm-up, tokens/s, the step's extra peak memory, analytic FLOPs per step and
MFU against this machine's measured float32 matmul peak, and the ratio ours/theirs of
throughput (> 1 means xlnet-tf2 is faster).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("workloads", ["pretrain", "inference", "scaling"],
                  "Which workloads to run: pretrain (one full training step), inference "
                  "(content-stream features at batch 1 and --inference_batch_size), scaling "
                  "(the training step at sequence lengths 128, 256, 512 and several memory "
                  "lengths), data (data preparation and input-pipeline throughput).")
flags.DEFINE_integer("n_layer", 4, "Number of layers of the benchmarked model.")
flags.DEFINE_integer("d_model", 256, "Model width.")
flags.DEFINE_integer("n_head", 4, "Attention heads.")
flags.DEFINE_integer("d_head", 64, "Size of each attention head.")
flags.DEFINE_integer("d_inner", 1024, "Inner width of the feed-forward layers.")
flags.DEFINE_integer("vocab_size", 32000, "Vocabulary size (the LM head's width).")
flags.DEFINE_integer("batch_size", 8, "Batch size of the pretraining step.")
flags.DEFINE_integer("seq_len", 128, "Sequence length of the pretraining step.")
flags.DEFINE_integer("reuse_len", 64, "Reused (memory-producing) prefix length.")
flags.DEFINE_integer("mem_len", 64, "Memory length of the pretraining step.")
flags.DEFINE_integer("num_predict", 21, "Predicted tokens per example (query-stream rows).")
flags.DEFINE_bool("bi_data", True, "Forward and backward halves in the pretraining batch.")
flags.DEFINE_integer("inference_batch_size", 32, "The larger batch of the inference workload.")
flags.DEFINE_integer("inference_seq_len", 128, "Sequence length of the inference workload.")
flags.DEFINE_integer("warmup", 2, "Untimed calls of each workload before timing (compilation).")
flags.DEFINE_integer("repeats", 7, "Timed calls of each workload (the median is reported).")
flags.DEFINE_integer("threads", None, "CPU threads for both frameworks; default: all cores.")
flags.DEFINE_bool("reference", True, "Also run HuggingFace's PyTorch XLNet (needs "
                  "requirements-reference.txt) and print the ratio.")
flags.DEFINE_bool("saved_model", True, "Also time the exported SavedModel (the features "
                  "export, called through its serve_token_ids signature) in the inference "
                  "workload.")
flags.DEFINE_integer("inference_vocab_size", 2000, "Vocabulary of the inference workload's "
                     "model: the SentencePiece model shipped in the SavedModel is trained with "
                     "this many pieces on a standard-library corpus. Features do not touch the "
                     "LM head, so only the embedding table's size depends on it.")
flags.DEFINE_string("output_json", None, "Optional path to write all rows as JSON.")
flags.DEFINE_integer("data_seq_len", 512, "Example length of the data workload (reuse_len is "
                     "half, num_predict 1/6 of it).")
flags.DEFINE_integer("data_corpus_bytes", 5_000_000, "Size of the data workload's docstring "
                     "corpus.")
flags.DEFINE_integer("data_corpus_repeats", 16, "The data workload's end-to-end runs prepare "
                     "its corpus concatenated this many times (Beam's start-up then weighs as "
                     "on real data); the per-stage rates use one copy.")
flags.DEFINE_list("data_workers", ["0", "1", "2"], "Beam DirectRunner worker processes of the "
                  "data workload's end-to-end runs (0: in-process, in_memory mode).")
flags.DEFINE_bool("data_word_cache", True, "Prepare with the word cache (the default of "
                  "create_tfrecords.py); --nodata_word_cache for line mode.")


def _configure_threads(threads):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(min(threads, 2))
    if FLAGS.reference:
        import torch

        torch.set_num_threads(threads)


def _model_config(workload, vocab_size=None):
    from xlnet_tf2 import XLNetConfig

    return XLNetConfig.from_dict(dict(
        n_layer=FLAGS.n_layer, d_model=FLAGS.d_model, n_head=FLAGS.n_head, d_head=FLAGS.d_head,
        d_inner=FLAGS.d_inner, n_token=vocab_size or FLAGS.vocab_size, dropout=0.1, dropatt=0.1,
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


def _compare(title, workload, ours, theirs, flops, peak):
    from xlnet_tf2.tools.benchmarking import interleaved

    runs = dict(ours)
    if theirs is not None:
        runs["huggingface (pytorch)"] = theirs
    results = interleaved(runs, warmup=FLAGS.warmup, repeats=FLAGS.repeats)
    reference = results.get("huggingface (pytorch)")
    rows = []
    for name, measurement in results.items():
        baseline = reference if (reference is not None and measurement is not reference) else None
        rows.append(_row(f"{title}: {name}", workload, measurement, flops, peak, baseline))
    return rows


def _pretrain_rows(workload, peak):
    from xlnet_tf2.tools.benchmarking import make_batch, tf_pretrain_step
    from xlnet_tf2.training.flops import pretrain_step_flops

    config = _model_config(workload)
    batch = make_batch(workload, config)
    ours = {"xlnet-tf2 (XLA)": tf_pretrain_step(config, batch, jit_compile=True),
            "xlnet-tf2 (tf.function)": tf_pretrain_step(config, batch, jit_compile=False)}
    theirs = None
    if FLAGS.reference:
        from benchmark_reference import hf_pretrain_step

        theirs = hf_pretrain_step(config, batch)
    flops = pretrain_step_flops(config, seq_len=workload.seq_len, mem_len=workload.mem_len,
                                num_predict=workload.num_predict,
                                global_batch_size=workload.batch_size).train_per_step
    title = f"pretrain step L={workload.seq_len} M={workload.mem_len}"
    return _compare(title, workload, ours, theirs, flops, peak)


def _inference_rows(batch_size, peak, export_dir):
    from xlnet_tf2.tools.benchmarking import Workload, make_batch, saved_model_inference, tf_inference
    from xlnet_tf2.training.flops import pretrain_step_flops

    workload = Workload(batch_size=batch_size, seq_len=FLAGS.inference_seq_len)
    config = _model_config(workload, FLAGS.inference_vocab_size)
    batch = make_batch(workload, config)
    ours = {"xlnet-tf2 (XLA)": tf_inference(config, batch, mode="xla"),
            "xlnet-tf2 (eager Keras)": tf_inference(config, batch, mode="eager")}
    if export_dir:
        ours["xlnet-tf2 SavedModel"] = saved_model_inference(export_dir, batch)
    theirs = None
    if FLAGS.reference:
        from benchmark_reference import hf_inference

        theirs = hf_inference(config, batch)
    flops = pretrain_step_flops(config, seq_len=workload.seq_len, mem_len=0, num_predict=0,
                                global_batch_size=batch_size).train_per_step / 3.0
    return _compare(f"inference B={batch_size}", workload, ours, theirs, flops, peak)


def _data_report(train_rows):
    """Data preparation tokens/s and input-pipeline examples/s at the pretraining step's
    shape, set against what the timed training step consumes."""
    import tempfile

    from xlnet_tf2.tools.data_throughput import format_report, measure_data_throughput

    with tempfile.TemporaryDirectory() as workdir:
        # Per-stage tokens/s (with the SentencePiece-only ceiling) and end-to-end Beam runs at
        # the data shape; the input pipeline is then timed at the training step's batch.
        result = measure_data_throughput(
            workdir, corpus_bytes=FLAGS.data_corpus_bytes, vocab_size=8000,
            workers=[int(w) for w in FLAGS.data_workers], seq_len=FLAGS.data_seq_len,
            reuse_len=FLAGS.data_seq_len // 2, num_predict=FLAGS.data_seq_len // 6,
            num_streams=2 * FLAGS.batch_size, global_batch_size=FLAGS.batch_size,
            word_cache=FLAGS.data_word_cache, corpus_repeats=FLAGS.data_corpus_repeats)
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


def _print_table(rows):
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
    threads = FLAGS.threads or os.cpu_count()
    if FLAGS.reference:
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError:
            sys.exit("--reference needs torch and transformers: pip install -r "
                     "requirements-reference.txt, or pass --noreference.")
    _configure_threads(threads)
    import logging
    import platform

    logging.getLogger("apache_beam").setLevel(logging.WARNING)

    import tensorflow as tf

    from xlnet_tf2.tools.benchmarking import Workload
    from xlnet_tf2.training.device_peak import measure_matmul_peak

    peak = measure_matmul_peak(tf.float32)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{threads} threads; TensorFlow {tf.__version__}; measured float32 matmul peak "
          f"{peak / 1e9:.1f} GFLOP/s")
    rows = []
    unknown = set(FLAGS.workloads) - {"pretrain", "inference", "scaling", "data"}
    if unknown:
        sys.exit(f"--workloads: unknown workload(s) {sorted(unknown)}.")
    base = Workload(batch_size=FLAGS.batch_size, seq_len=FLAGS.seq_len, mem_len=FLAGS.mem_len,
                    reuse_len=FLAGS.reuse_len, num_predict=FLAGS.num_predict, bi_data=FLAGS.bi_data)
    if "pretrain" in FLAGS.workloads:
        rows += _pretrain_rows(base, peak)
    if "inference" in FLAGS.workloads:
        import tempfile

        from xlnet_tf2.tools.benchmarking import export_features_saved_model

        with tempfile.TemporaryDirectory() as workdir:
            export_dir = None
            if FLAGS.saved_model:
                export_dir = export_features_saved_model(
                    _model_config(Workload(1, FLAGS.inference_seq_len), FLAGS.inference_vocab_size),
                    FLAGS.inference_seq_len, workdir)
            rows += _inference_rows(1, peak, export_dir)
            rows += _inference_rows(FLAGS.inference_batch_size, peak, export_dir)
    if "scaling" in FLAGS.workloads:
        for seq_len in (128, 256, 512):
            if seq_len == base.seq_len and "pretrain" in FLAGS.workloads:
                continue
            rows += _pretrain_rows(Workload(
                batch_size=base.batch_size, seq_len=seq_len, mem_len=seq_len // 2,
                reuse_len=seq_len // 2, num_predict=max(1, round(seq_len / 6)),
                bi_data=base.bi_data), peak)
        for mem_len in (0, 128, 256):
            rows += _pretrain_rows(Workload(
                batch_size=base.batch_size, seq_len=base.seq_len, mem_len=mem_len,
                reuse_len=base.reuse_len, num_predict=base.num_predict, bi_data=base.bi_data), peak)
    _print_table(rows)
    data = _data_report(rows) if "data" in FLAGS.workloads else None
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w") as f:
            json.dump({"peak_flops": peak, "threads": threads, "rows": rows, "data": data}, f,
                      indent=2)


if __name__ == "__main__":
    app.run(main)
