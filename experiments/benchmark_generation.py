"""Generation speed: the memory cache against full recomputation, and against HuggingFace's
PyTorch `XLNetLMHeadModel.generate` (greedy, same weights, same threads) when torch is there.

  python experiments/benchmark_generation.py
  python experiments/benchmark_generation.py --prompt_len=256 --new_tokens=64 --jit_compile

Random weights of the given shape (speed does not depend on the values). Reported per
variant: the first call (tracing and compiling included) and the median of --repeats later
calls, as new tokens per second over the batch. The flags are the settings of
`GenerationBenchmarkConfig` (xlnet_tf2/tools/command_configs.py).
"""

import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from xlnet_tf2 import cli  # noqa: E402

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.tools.command_configs import GenerationBenchmarkConfig  # noqa: E402

define_flags(GenerationBenchmarkConfig)


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
    cli.no_arguments(argv)
    c = config_from_flags(GenerationBenchmarkConfig)
    import numpy as np
    import tensorflow as tf

    import xlnet_tf2

    config = xlnet_tf2.XLNetConfig.from_dict(dict(
        n_layer=c.n_layer, d_model=c.d_model, n_head=c.n_head,
        d_head=c.d_model // c.n_head, d_inner=c.d_inner, n_token=c.vocab_size,
        dropout=0.0, dropatt=0.0))
    threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    ids = np.random.default_rng(0).integers(9, c.vocab_size,
                                            size=(c.batch_size, c.prompt_len))
    new = c.batch_size * c.new_tokens
    rows = []
    hf_model = None
    if c.reference:
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
            ids, max_new_tokens=c.new_tokens, eos_token_id=None, use_cache=use_cache,
            jit_compile=c.jit_compile), c.repeats)
        rows.append((name, first, median))
    if hf_model is not None:
        import torch

        def hf_generate():
            with torch.no_grad():
                return hf_model.generate(torch.tensor(ids).long(), do_sample=False,
                                         max_new_tokens=c.new_tokens, eos_token_id=None,
                                         pad_token_id=5).numpy()
        outputs["huggingface"], first, median = _timed(hf_generate, c.repeats)
        rows.append(("huggingface (PyTorch, cache)", first, median))
    print(f"config: {c.n_layer} layers, d_model {c.d_model}, vocab {c.vocab_size}; "
          f"batch {c.batch_size}, prompt {c.prompt_len}, {c.new_tokens} new tokens; "
          f"{threads} threads; jit_compile={c.jit_compile}")
    for name, first, median in rows:
        print(f"  {name:30s} first call {first:7.2f} s   then {median:7.3f} s   "
              f"{new / median:8.1f} new tokens/s")
    same = {k: bool(np.array_equal(v, outputs["xlnet-tf2 cached"])) for k, v in outputs.items()}
    print("same tokens as the cached run:", same)


if __name__ == "__main__":
    cli.run(main)
