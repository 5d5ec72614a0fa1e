"""Does pretraining pay off? A small replication of XLNet's central claim on this machine.

    sudo apt-get install -y linux-doc perl-doc   # documentation prose for the corpus (once)
    python benchmarks/pretraining_payoff.py --workdir=runs/payoff

On 2 CPU cores, about 90 minutes at the defaults: builds two downstream classification tasks
from labeled text installed here (the section of a man page paragraph; the Python package of a
docstring paragraph), a corpus of documentation prose that leaves every task document out,
a SentencePiece model and pretraining data with a held-out part; pretrains a 4 x 128 XLNet
twice on the same tokens, with sampled factorization orders (the paper's objective) and with
the left-to-right order (`--factorization_order=left_to_right`: a plain causal language
model on the same targets), memory, bi_data and dropout 0.1; fine-tunes the two pretrained
models and a random initialization on both tasks at three seeds with the same recipe; and
writes WORKDIR/results.json, results.md (test accuracy per task and initialization: each
seed's figure and their mean +- sd; held-out pretraining losses, the time and load of each
stage) and payoff.png.
Stages are in benchmarks/tools/payoff_experiment.py; a stage whose output is complete is
reused, so running the command again continues an interrupted experiment. The flags are the
settings of `PayoffConfig` (benchmarks/tools/command_configs.py). Results: BENCHMARKS.md,
"Does pretraining pay off?".
"""

import _paths  # noqa: F401  (the checkout's root on sys.path)

from xlnet_tf2 import cli  # noqa: E402

cli.quiet_startup()

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from benchmarks.tools.command_configs import PayoffConfig  # noqa: E402

define_flags(PayoffConfig)


def main(argv):
    del argv
    from benchmarks.tools.payoff_experiment import Experiment
    Experiment(config_from_flags(PayoffConfig)).run()  # PayoffError: one line from cli.run
    return 0


if __name__ == "__main__":
    cli.run(main, usage=__doc__)
