"""Generation speed against the model's own step time and against HuggingFace's PyTorch
`XLNetLMHeadModel.generate` (same weights, same thread count), warm, on prompts of different
lengths (as real calls come), greedy and beam search.

  python benchmarks/benchmark_generation.py
  python benchmarks/benchmark_generation.py --n_layer=2 --d_model=64 --n_head=4 \
      --d_inner=128 --vocab_size=1000 --prompt_len=16 --new_tokens=20

Reported: the model's time for one call's work (one prefill + new_tokens - 1 three-position
steps, timed as compiled graphs), our `generate` per call (median over
--repeats calls, each with a different prompt length in one length bucket, after one warm-up
call) and its ratio to that model time, HF's per call and the ratio ours / HF, whether both
gave the same tokens, how many traces the timed calls added (0 expected), and the machine load
(/proc/loadavg) before and after: on a shared machine read the ratios, not the seconds.
Random weights of the given shape (speed does not depend on the values). The flags are the
settings of `GenerationBenchmarkConfig` (benchmarks/tools/command_configs.py).
"""

import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import _paths  # noqa: E402,F401  (the checkout's root on sys.path)

from xlnet_tf2 import cli  # noqa: E402

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from benchmarks.tools.command_configs import GenerationBenchmarkConfig  # noqa: E402

define_flags(GenerationBenchmarkConfig)


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _median_time(fn, arguments):
    """Median seconds of fn(a) over the arguments (each call timed alone)."""
    times, results = [], []
    for a in arguments:
        start = time.perf_counter()
        results.append(fn(a))
        times.append(time.perf_counter() - start)
    return statistics.median(times), results


def _model_call_time(c, model, prompt, generation, tf):
    """Seconds of one call's model work: a prefill, then new_tokens - 1 three-position steps
    run in one graph (so no Python dispatch is counted; the logits are reduced so none of the
    work is pruned)."""
    ids = tf.constant(prompt)
    mask = tf.ones_like(ids)
    slots = ids.shape[1] + generation.bucket_length(c.new_tokens) - 3
    token = ids[:, -1]

    @tf.function
    def prefill():
        logits, memory, memory_mask = generation._prefill(model, ids, mask, slots)
        return tf.reduce_max(logits), memory, memory_mask

    @tf.function
    def steps(memory, memory_mask):
        def body(i, total, memory, memory_mask):
            logits, memory, memory_mask = generation._advance(model, token, token, memory,
                                                              memory_mask)
            return i + 1, total + tf.reduce_max(logits), memory, memory_mask
        return tf.while_loop(lambda i, *_: i < c.new_tokens - 1, body,
                             (tf.constant(0), tf.constant(0.0), memory, memory_mask))[1]

    _, memory, memory_mask = prefill()
    steps(memory, memory_mask)
    prefill_time, _ = _median_time(lambda _: prefill()[0].numpy(), range(c.repeats))
    steps_time, _ = _median_time(lambda _: steps(memory, memory_mask).numpy(), range(c.repeats))
    return prefill_time + steps_time, prefill_time, steps_time / (c.new_tokens - 1)


def main(argv):
    del argv
    c = config_from_flags(GenerationBenchmarkConfig)
    import numpy as np
    import tensorflow as tf
    import torch

    threads = c.threads or os.cpu_count()
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    torch.set_num_threads(threads)
    from benchmarks.tools.hf_reference import ours_from_hf, random_hf_model

    import xlnet_tf2
    from xlnet_tf2.models import generation

    load_before = _load()
    config = xlnet_tf2.XLNetConfig.from_dict(dict(
        n_layer=c.n_layer, d_model=c.d_model, n_head=c.n_head,
        d_head=c.d_model // c.n_head, d_inner=c.d_inner, n_token=c.vocab_size,
        dropout=0.0, dropatt=0.0))
    hf_model = random_hf_model(config, seed=0)
    model = ours_from_hf(hf_model, config)
    rng = np.random.default_rng(0)
    low = generation.bucket_length(c.prompt_len) // 2 + 1   # the bucket's shortest
    lengths = [max(low, c.prompt_len - 3 * i) for i in range(c.repeats + 1)]
    prompts = [rng.integers(9, c.vocab_size, size=(c.batch_size, n)).astype(np.int32)
               for n in lengths]
    common = dict(max_new_tokens=c.new_tokens, eos_token_id=None)

    model_time, prefill_time, step_time = _model_call_time(c, model, prompts[0], generation, tf)
    rows = []
    for beams in (1, c.num_beams) if c.num_beams > 1 else (1,):
        kwargs = dict(common, num_beams=beams)

        def ours(p, kwargs=kwargs):
            return model.generate(p, jit_compile=c.jit_compile, **kwargs)

        def theirs(p, kwargs=kwargs):
            with torch.no_grad():
                return hf_model.generate(torch.tensor(p).long(), do_sample=False,
                                         pad_token_id=5, **kwargs).numpy()

        start = time.perf_counter()
        ours(prompts[0])                                     # warm-up: traces this bucket
        first = time.perf_counter() - start
        traced = generation._compiled(model, c.jit_compile)
        count = traced.experimental_get_tracing_count()
        ours_time, ours_out = _median_time(ours, prompts[1:])
        added = traced.experimental_get_tracing_count() - count
        theirs(prompts[0])
        hf_time, hf_out = _median_time(theirs, prompts[1:])
        same = all(np.array_equal(a, b) for a, b in zip(ours_out, hf_out))
        rows.append((beams, first, ours_time, hf_time, same, added))

    print(f"config: {c.n_layer} layers, d_model {c.d_model}, vocab "
          f"{c.vocab_size}; batch {c.batch_size}, prompts of {min(lengths[1:])}.."
          f"{max(lengths[1:])} tokens (bucket {generation.bucket_length(c.prompt_len)}), "
          f"{c.new_tokens} new tokens; {threads} threads; jit_compile={c.jit_compile}")
    print(f"  model work per call: prefill {prefill_time * 1e3:.1f} ms + "
          f"{c.new_tokens - 1} steps x {step_time * 1e3:.2f} ms = {model_time * 1e3:.1f} ms")
    for beams, first, ours_time, hf_time, same, added in rows:
        name = "greedy" if beams == 1 else f"beam search ({beams} beams)"
        ratio_to_model = f"  = {ours_time / model_time:.2f} x model work" if beams == 1 else ""
        print(f"  {name:24s} ours {ours_time * 1e3:8.1f} ms/call (first call {first:.1f} s)"
              f"{ratio_to_model}   HF {hf_time * 1e3:8.1f} ms/call   ours/HF "
              f"{ours_time / hf_time:.2f}   same tokens: {same}   traces added: {added}")
    print(f"  load average (1, 5, 15 min): before {load_before}, after {_load()}")


if __name__ == "__main__":
    cli.run(main)
