"""Generation speed: the memory cache against full recomputation, and against HuggingFace's
PyTorch `XLNetLMHeadModel.generate` (greedy, same weights, same threads) when torch is there.

  python experiments/benchmark_generation.py
  python experiments/benchmark_generation.py --prompt_len=256 --new_tokens=64 --jit_compile

Random weights of the given shape (speed does not depend on the values). Reported per
variant: the first call (tracing and compiling included) and the median of --repeats later
calls, as new tokens per second over the batch.
"""

import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("n_layer", 6, "Number of layers.")
flags.DEFINE_integer("d_model", 512, "Model width.")
flags.DEFINE_integer("n_head", 8, "Attention heads.")
flags.DEFINE_integer("d_inner", 2048, "Inner width of the feed-forward layers.")
flags.DEFINE_integer("vocab_size", 32000, "Vocabulary size.")
flags.DEFINE_integer("batch_size", 1, "Prompts per call.")
flags.DEFINE_integer("prompt_len", 128, "Prompt tokens (XLNet prompts are long: the padding "
                     "text alone is about 170 tokens).")
flags.DEFINE_integer("new_tokens", 32, "Tokens generated per prompt.")
flags.DEFINE_integer("repeats", 3, "Timed calls after the first.")
flags.DEFINE_bool("jit_compile", False, "XLA-compile the generation loop.")
flags.DEFINE_bool("reference", True, "Also time HuggingFace's PyTorch generate if installed.")


def _timed(fn, repeats):
    start = time.perf_counter()
    result = fn()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return result, first, statistics.median(times)


def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf

    import xlnet_tf2

    config = xlnet_tf2.XLNetConfig.from_dict(dict(
        n_layer=FLAGS.n_layer, d_model=FLAGS.d_model, n_head=FLAGS.n_head,
        d_head=FLAGS.d_model // FLAGS.n_head, d_inner=FLAGS.d_inner, n_token=FLAGS.vocab_size,
        dropout=0.0, dropatt=0.0))
    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    ids = np.random.default_rng(0).integers(9, FLAGS.vocab_size,
                                            size=(FLAGS.batch_size, FLAGS.prompt_len))
    new = FLAGS.batch_size * FLAGS.new_tokens
    rows = []
    hf_model = None
    if FLAGS.reference:
        try:
            import torch
            sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
            from fixtures.hf_reference import ours_from_hf, random_hf_model
            torch.set_num_threads(threads)
            hf_model = random_hf_model(config, seed=0)
            model = ours_from_hf(hf_model, config)
        except ImportError:
            hf_model = None
    if hf_model is None:
        model = xlnet_tf2.XLNetLMHeadModel(config)
        model.build()
    outputs = {}
    for name, use_cache in (("xlnet-tf2 cached", True), ("xlnet-tf2 full recompute", False)):
        outputs[name], first, median = _timed(lambda: model.generate(
            ids, max_new_tokens=FLAGS.new_tokens, eos_token_id=None, use_cache=use_cache,
            jit_compile=FLAGS.jit_compile), FLAGS.repeats)
        rows.append((name, first, median))
    if hf_model is not None:
        import torch

        def hf_generate():
            with torch.no_grad():
                return hf_model.generate(torch.tensor(ids).long(), do_sample=False,
                                         max_new_tokens=FLAGS.new_tokens, eos_token_id=None,
                                         pad_token_id=5).numpy()
        outputs["huggingface"], first, median = _timed(hf_generate, FLAGS.repeats)
        rows.append(("huggingface (PyTorch, cache)", first, median))
    print(f"config: {FLAGS.n_layer} layers, d_model {FLAGS.d_model}, vocab {FLAGS.vocab_size}; "
          f"batch {FLAGS.batch_size}, prompt {FLAGS.prompt_len}, {FLAGS.new_tokens} new tokens; "
          f"{threads} threads; jit_compile={FLAGS.jit_compile}")
    for name, first, median in rows:
        print(f"  {name:30s} first call {first:7.2f} s   then {median:7.3f} s   "
              f"{new / median:8.1f} new tokens/s")
    same = {k: bool(np.array_equal(v, outputs["xlnet-tf2 cached"])) for k, v in outputs.items()}
    print("same tokens as the cached run:", same)


if __name__ == "__main__":
    app.run(main)
