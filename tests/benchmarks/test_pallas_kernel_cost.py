"""benchmarks/tools/pallas_kernel_cost.py: the Pallas attention kernels' work counted from their
traced programs. The matrix FLOPs counted dot by dot equal the kernels' own formula (the cost
estimate their calls carry, which the TPU pricing reads); the unit counts are there."""

import pytest

pytest.importorskip("jax")

from benchmarks.tools import pallas_kernel_cost  # noqa: E402


@pytest.mark.parametrize("generation", ["v5e", "v4"])
def test_counted_matrix_flops_are_the_kernels_cost_estimate(generation):
    g = pallas_kernel_cost.base_geometry(batch=2, generation=generation)
    counts = pallas_kernel_cost.kernel_counts(g)
    for direction in ("forward", "backward"):
        c = counts[direction]
        assert c["mxu_flops"] == c["estimated_flops"] > 0, direction
        assert c["valu"] > c["xlu"] > 0 and c["eup"] > 0 and c["hbm_bytes"] > 0
        assert c.get("other", 0) == 0  # every primitive of the kernels has a unit
    # The backward recomputes the forward's products and adds five: 3.5 x its FLOPs or so.
    assert 2 < counts["backward"]["mxu_flops"] / counts["forward"]["mxu_flops"] < 4
