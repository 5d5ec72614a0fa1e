"""Puts the checkout's root (for `benchmarks.tools`) and tests/ (for `fixtures`, the shared test
data builders some benchmarks reuse) on sys.path: `python benchmarks/<name>.py` puts only this
folder there. Imported first by every script in this folder."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (os.path.join(ROOT, "tests"), ROOT):
    if _path not in sys.path:
        sys.path.insert(0, _path)
