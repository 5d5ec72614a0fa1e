"""Shared pytest setup: quiet TensorFlow logs, deterministic seeds per test, the slow tier."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Tokenized fine-tuning features are cached (xlnet_tf2/tasks/feature_cache.py): tests, and
# the command-line tools they start, use a fresh cache of their own, not the user's.
os.environ.setdefault("XLNET_TF2_CACHE", __import__("tempfile").mkdtemp(prefix="xlnet_cache_"))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# The bad-input battery's table of counts at the end of a run (tests/battery/).
from fixtures.battery_report import (pytest_runtest_logreport,  # noqa: E402,F401
                                     pytest_runtest_makereport, pytest_terminal_summary)

# The two tiers (tests/fixtures/slow_tier.py): an unmarked test that starts a Python process
# fails, unmarked tests over ~20 s are listed at the end. pytester runs the check's own tests.
# The longest files go to the pytest-xdist workers first (tests/fixtures/schedule.py). A skip
# CI does not expect fails a run with --strict-skips (tests/fixtures/expected_skips.py); tests
# marked xla skip where TensorFlow cannot compile for the CPU (tests/fixtures/xla_backend.py).
# Each test file starts on a collected, frozen heap (tests/fixtures/heap.py).
pytest_plugins = ("fixtures.slow_tier", "fixtures.schedule", "fixtures.xla_backend",
                  "fixtures.expected_skips", "fixtures.heap", "pytester")

# Bit-reproducible execution for every in-process test (training/distribution.py's
# apply_determinism): determinism and resume tests compare runs bit for bit, and the setting
# must precede the first TensorFlow op of the process.
tf.config.threading.set_inter_op_parallelism_threads(1)


@pytest.fixture(autouse=True)
def _seed_everything():
    """Seeds every test, and gives the next test the Keras dtype policy this one started
    with: a Trainer sets the global policy to its --precision, as a run should, and a
    mixed-precision test would otherwise change the dtypes of whichever test runs next."""
    import keras

    policy = keras.mixed_precision.global_policy()
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    yield
    keras.mixed_precision.set_global_policy(policy)
