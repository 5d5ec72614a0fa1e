"""Shared pytest setup: quiet TensorFlow logs and deterministic seeds per test."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _seed_everything():
    import keras

    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    yield
