"""The H100 proxy's count of a Triton custom call (benchmarks/tools/optimized_hlo.py,
h100_proxy.py): FLOPs from the flash kernel's shapes, bytes its operands and results, time at
the stated shares of the peaks."""

import pytest

from benchmarks.tools import h100_proxy, optimized_hlo
from xlnet_tf2.layers.kernels import flash_relative_attention

B, N, S, K, H = 2, 12, 597, 896, 64
_CALL = ('  {root}%c{i} = (bf16[{B},{S},{N},{H}]{{3,2,1,0}}, f32[{B},{N},{S}]{{2,1,0}}) '
         'custom-call(%q, %r, %r, %k), custom_call_target="__gpu$xla.gpu.triton", '
         'backend_config={{debug = false, grid_x = 10 : i32, grid_y = 24 : i32, grid_z = 1 : i32, '
         'ir = "tt.func public @{name}(\\22x\\22)", name = "{name}", num_stages = 3 : i32, '
         'num_warps = 4 : i32}}')


def _program(names):
    calls = "\n".join(_CALL.format(root="ROOT " if i == len(names) - 1 else "", i=i, name=n,
                                   B=B, N=N, S=S, H=H) for i, n in enumerate(names))
    return (f"HloModule m\n\nENTRY %main (q: bf16[{B},{S},{N},{H}], r: bf16[{N},{H}], "
            f"k: bf16[{B},{K},{N},{H}]) -> (bf16[{B},{S},{N},{H}], f32[{B},{N},{S}]) {{\n"
            f"  %q = bf16[{B},{S},{N},{H}]{{3,2,1,0}} parameter(0)\n"
            f"  %r = bf16[{N},{H}]{{1,0}} parameter(1)\n"
            f"  %k = bf16[{B},{K},{N},{H}]{{3,2,1,0}} parameter(2)\n{calls}\n}}\n")


def test_flash_calls_are_counted_from_their_shapes_at_the_stated_efficiency():
    found = optimized_hlo.kernels(_program(["flash_fwd", "flash_bwd_dkdv", "flash_bwd_dq",
                                            "other_kernel"]))
    by_flops = sorted(k.flops for k in found)
    unit = B * N * S * K * H
    assert by_flops == [0, 6 * unit, 12 * unit, 12 * unit]
    assert {k.kind for k in found} == {optimized_hlo.TRITON_KIND}
    fwd = next(k for k in found if k.flops == 6 * unit)
    # bytes: operands q, r (read once, though passed twice), k and the results out, lse
    assert fwd.bytes == 2 * (B * N * S * H) * 2 + 2 * N * H + 2 * B * N * K * H + 4 * B * N * S
    # 6 * 2*12*597*896*64 = 2.47 GFLOP at half of 989 TFLOP/s: 4.99 us, compute-bound
    assert h100_proxy.kernel_us(fwd) == pytest.approx(
        6 * unit / (0.5 * 989e12) * 1e6 + 2.0)
    summary = h100_proxy.summary(found, 1e12, dict(ratio=1.5, error=0.1, device="d",
                                                   commit="c", ratio_batch=16))
    assert summary["triton_kernels"] == 4
    assert summary["triton_flops"] == 30 * unit
    assert summary["triton_ms"] == pytest.approx(summary["proxy_ms"])


def test_the_flop_table_is_the_kernels_own():
    """optimized_hlo's table (this module imports no TensorFlow) says what the kernel module
    does."""
    assert optimized_hlo.FLASH_FLOPS == flash_relative_attention.MATRIX_FLOPS
