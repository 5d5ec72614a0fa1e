"""The H100 proxy's count of a Triton custom call (benchmarks/tools/optimized_hlo.py,
h100_proxy.py): FLOPs from the flash kernel's shapes, bytes its operands and results, time at
the stated shares of the peaks."""

import pytest

from benchmarks.tools import h100_proxy, optimized_hlo

B, N, S, K, H = 2, 12, 597, 896, 64
_CALL = ('  {root}%c{i} = (bf16[{B},{N},{S},{H}]{{3,2,1,0}}, f32[{B},{N},{S}]{{2,1,0}}) '
         'custom-call(%q, %k), custom_call_target="__gpu$xla.gpu.triton", '
         'backend_config={{debug = false, grid_x = 10 : i32, grid_y = 24 : i32, grid_z = 1 : i32, '
         'ir = "tt.func public @{name}(\\22x\\22)", name = "{name}", num_stages = 3 : i32, '
         'num_warps = 4 : i32}}')


def _program(names):
    calls = "\n".join(_CALL.format(root="ROOT " if i == len(names) - 1 else "", i=i, name=n,
                                   B=B, N=N, S=S, H=H) for i, n in enumerate(names))
    return (f"HloModule m\n\nENTRY %main (q: bf16[{B},{N},{S},{H}], k: bf16[{B},{N},{K},{H}]) "
            f"-> (bf16[{B},{N},{S},{H}], f32[{B},{N},{S}]) {{\n"
            f"  %q = bf16[{B},{N},{S},{H}]{{3,2,1,0}} parameter(0)\n"
            f"  %k = bf16[{B},{N},{K},{H}]{{3,2,1,0}} parameter(1)\n{calls}\n}}\n")


def test_flash_calls_are_counted_from_their_shapes_at_the_stated_efficiency():
    found = optimized_hlo.kernels(_program(["flash_fwd", "flash_bwd_dkdv", "flash_bwd_dq",
                                            "other_kernel"]))
    by_flops = sorted(k.flops for k in found)
    unit = B * N * S * K * H
    assert by_flops == [0, 4 * unit, 6 * unit, 8 * unit]
    assert {k.kind for k in found} == {optimized_hlo.TRITON_KIND}
    fwd = next(k for k in found if k.flops == 4 * unit)
    # bytes: operands q, k and the results out, lse
    assert fwd.bytes == 2 * (B * N * S * H) * 2 + 2 * B * N * K * H + 4 * B * N * S
    # 4 * 2*12*597*896*64 = 1.64 GFLOP at half of 989 TFLOP/s: 3.32 us, compute-bound
    assert h100_proxy.kernel_us(fwd) == pytest.approx(
        4 * unit / (0.5 * 989e12) * 1e6 + 2.0)
    summary = h100_proxy.summary(found, 1e12, dict(ratio=1.5, error=0.1, device="d",
                                                   commit="c", ratio_batch=16))
    assert summary["triton_kernels"] == 4
    assert summary["triton_flops"] == 18 * unit
    assert summary["triton_ms"] == pytest.approx(summary["proxy_ms"])


def test_a_flash_kernel_is_counted_reading_each_rows_window_of_the_position_scores():
    """pos [B, N, S, T]: each row loads its K columns, not T (the kernel's masked loads)."""
    T = K + 512
    program = (
        f"HloModule m\n\nENTRY %main (q: bf16[{B},{N},{S},{H}], k: bf16[{B},{N},{K},{H}], "
        f"p: bf16[{B},{N},{S},{T}]) -> (bf16[{B},{N},{S},{H}], f32[{B},{N},{S}]) {{\n"
        f"  %q = bf16[{B},{N},{S},{H}]{{3,2,1,0}} parameter(0)\n"
        f"  %k = bf16[{B},{N},{K},{H}]{{3,2,1,0}} parameter(1)\n"
        f"  %p = bf16[{B},{N},{S},{T}]{{3,2,1,0}} parameter(2)\n"
        f"  ROOT %c = (bf16[{B},{N},{S},{H}]{{3,2,1,0}}, f32[{B},{N},{S}]{{2,1,0}}) "
        f"custom-call(%q, %k, %k, %p), custom_call_target=\"__gpu$xla.gpu.triton\", "
        f"backend_config={{debug = false, grid_x = 10 : i32, grid_y = 24 : i32, grid_z = 1 : "
        f"i32, ir = \"x\", name = \"flash_fwd\", num_stages = 3 : i32, num_warps = 4 : i32}}\n}}\n")
    (fwd,) = optimized_hlo.kernels(program)
    window = 2 * B * N * S * K
    # q, k (v is k: read once), the window of pos; written out and lse
    assert fwd.in_bytes == 2 * B * N * S * H + 2 * B * N * K * H + window
    assert fwd.out_bytes == 2 * B * N * S * H + 4 * B * N * S
