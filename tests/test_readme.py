"""The README's Python examples run as written."""

import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def _python_blocks():
    text = open(README).read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_model_api_example_runs():
    block = next(b for b in _python_blocks() if "XLNetLMHeadModel(config)" in b)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    out = namespace["out"]
    assert tuple(out["logits"].shape) == (2, 3, 1000)
    assert tuple(out["hidden"].shape) == (2, 3, 64)
    assert tuple(out["new_mems"][0].shape) == (2, 8, 64)
