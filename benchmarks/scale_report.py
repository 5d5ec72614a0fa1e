"""Memory, optimizer state and host-to-device traffic of pretraining at the paper's scale.

  python benchmarks/scale_report.py                        # the paper's setting (markdown)
  python benchmarks/scale_report.py --chips=256 --chips_per_host=8 --global_batch=4096

Pure arithmetic (benchmarks/tools/scale_costs.py, where the assumptions are listed): nothing
is built or run, so it answers in a second on any machine. The flags are the settings of
`ScaleReportConfig` (benchmarks/tools/command_configs.py).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import _paths  # noqa: E402,F401  (the checkout's root on sys.path)

from xlnet_tf2 import cli  # noqa: E402

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from benchmarks.tools.command_configs import ScaleReportConfig  # noqa: E402

define_flags(ScaleReportConfig)


def main(argv):
    del argv
    config = config_from_flags(ScaleReportConfig)  # a bad setting stops here
    from benchmarks.tools.scale_costs import PodSetting, markdown_table, paper_costs

    setting = PodSetting.of(config)
    print(markdown_table(paper_costs(setting), setting))


if __name__ == "__main__":
    cli.run(main)
