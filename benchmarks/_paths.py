"""Puts the checkout's root on sys.path (for `benchmarks.tools` and, in a checkout not
installed, `xlnet_tf2`): `python benchmarks/<name>.py` puts only this folder there. Imported
first by every script in this folder. The benchmarks never import the test suite (tests/):
what both use (the HuggingFace reference, the synthetic pretraining input) lives in
benchmarks/tools/, which the tests import (tests/test_architecture.py checks the direction)."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
