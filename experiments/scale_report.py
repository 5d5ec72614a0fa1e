"""Memory, optimizer state and host-to-device traffic of pretraining at the paper's scale.

  python experiments/scale_report.py                        # the paper's setting (markdown)
  python experiments/scale_report.py --chips=256 --chips_per_host=8 --global_batch=4096

Pure arithmetic (xlnet_tf2/tools/scale_costs.py, where the assumptions are listed): nothing
is built or run, so it answers in a second on any machine.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from xlnet_tf2 import cli  # noqa: E402

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.tools.scale_costs import PAPER, PodSetting, markdown_table, paper_costs  # noqa

FLAGS = flags.FLAGS
flags.DEFINE_integer("global_batch", PAPER.global_batch, "Global batch (sequences per step).")
flags.DEFINE_integer("seq_len", PAPER.seq_len, "Sequence length.")
flags.DEFINE_integer("reuse_len", PAPER.reuse_len, "Reused prefix length.")
flags.DEFINE_integer("mem_len", PAPER.mem_len, "Transformer-XL memory length.")
flags.DEFINE_integer("num_predict", PAPER.num_predict, "Predicted tokens per sequence.")
flags.DEFINE_integer("chips", PAPER.chips, "TPU v3 chips.")
flags.DEFINE_integer("chips_per_host", PAPER.chips_per_host, "TPU chips per host.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    setting = PodSetting(global_batch=FLAGS.global_batch, seq_len=FLAGS.seq_len,
                         reuse_len=FLAGS.reuse_len, mem_len=FLAGS.mem_len,
                         num_predict=FLAGS.num_predict, chips=FLAGS.chips,
                         chips_per_host=FLAGS.chips_per_host)
    for name, total, part in (("--chips", setting.chips, setting.chips_per_host),
                              ("--global_batch", setting.global_batch, setting.replicas)):
        if total % part:
            print(f"scale_report.py: error: {name}={total} is not divisible by {part}",
                  file=sys.stderr)
            return 2
    print(markdown_table(paper_costs(setting), setting))
    return 0


if __name__ == "__main__":
    app.run(main)
