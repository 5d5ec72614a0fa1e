"""A pretraining run's held-out loss against the context-free unigram baselines (step 5 of
scripts/run_demo.sh): does the model use context, or only token frequencies?

    python benchmarks/heldout_report.py --model_dir=runs/demo/model --data_dir=runs/demo/data \
        --eval_dir=runs/demo/data/eval --global_batch_size=32 --min_margin=0.3

Prints the baselines (benchmarks/tools/baselines.py: the training targets' unigram entropy, and
the held-out targets' cross-entropy under the training unigram), every held-out evaluation of
the run, and the first and last training losses; exits 1 unless the last held-out loss is
--min_margin nats below the held-out baseline. The flags are the settings of
`HeldOutReportConfig` (benchmarks/tools/command_configs.py).
"""

import os
import sys

import _paths  # noqa: E402,F401  (the checkout's root on sys.path)

from xlnet_tf2 import cli  # noqa: E402

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2 import fileio  # noqa: E402
from xlnet_tf2.run_dir import RunDirError  # noqa: E402
from benchmarks.tools.command_configs import HeldOutReportConfig  # noqa: E402

define_flags(HeldOutReportConfig)


def _records(path: str) -> list:
    if not os.path.exists(path):
        raise RunDirError(f"{path} does not exist: is --model_dir a pretraining run "
                                 "made with --record_steps and --eval_steps?")
    return fileio.read_jsonl(path)


def main(argv):
    del argv
    c = config_from_flags(HeldOutReportConfig)
    steps = _records(os.path.join(c.model_dir, "steps.jsonl"))
    evals = _records(os.path.join(c.model_dir, "eval_results.jsonl"))
    if not steps or not evals:
        raise RunDirError(f"{c.model_dir} holds no recorded steps or evaluations yet.")
    from benchmarks.tools.baselines import held_out_unigram_baseline

    n = len(steps)
    base = held_out_unigram_baseline([c.data_dir], [c.eval_dir],
                                     global_batch_size=c.global_batch_size, max_steps=n)
    window = max(n // 10, 1)
    first = sum(s["loss"] for s in steps[:window]) / window
    last = sum(s["loss"] for s in steps[-window:]) / window
    held_out = evals[-1]["loss"]
    print(f"unigram baselines (token frequencies of the training targets, nothing else): "
          f"training entropy {base['train_entropy']:.3f} nats; held-out cross-entropy "
          f"{base['heldout_cross_entropy']:.3f} nats ({base['heldout_targets']} held-out "
          "targets)")
    for e in evals:
        print(f"  step {e['step']:>5d}: held-out loss {e['loss']:.3f} (perplexity "
              f"{e['perplexity']:.1f})")
    margin = base["heldout_cross_entropy"] - held_out
    print(f"training loss: first {window} steps {first:.3f}, last {window} steps {last:.3f}; "
          f"held-out loss at step {evals[-1]['step']}: {held_out:.3f}, {margin:.3f} nats below "
          "the held-out unigram baseline")
    if c.summary_json:
        fileio.write_json_atomically(c.summary_json, {
            "heldout_baseline_nats": base["heldout_cross_entropy"],
            "train_entropy_nats": base["train_entropy"], "heldout_loss": held_out,
            "first_loss": first, "last_loss": last, "steps": n, "evals": evals})
    if not margin > c.min_margin:
        print(f"FAILED: the held-out loss is not {c.min_margin} nats below the held-out "
              "unigram baseline.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    cli.run(main)
