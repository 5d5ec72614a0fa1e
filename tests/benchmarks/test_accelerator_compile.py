"""benchmarks/accelerator_compile.py's analysis on a small optimized HLO module
(tests/fixtures/compiled_step_hlo.py, worked out by hand): the kernels' bytes, FLOPs and
launches, what each computes (tools/kernel_parts.py), the H100 proxy and its calibration,
libtpu's figures and refusal, the report's text, and where the compile venv is found."""

import os
import sys

import pytest
from fixtures.compiled_step_hlo import EXPECTED, HLO_TEXT, OUT_OF_HBM, SHAPE

from benchmarks.tools import deviceless_compile, h100_proxy, tpu_estimate
from benchmarks.tools.deviceless_compile import (AcceleratorCompileError, accelerator_python,
                                                 analyse, format_report)
from benchmarks.tools.kernel_parts import PART_NAMES, StepShape, direction, part, short_op_name
from benchmarks.tools.optimized_hlo import kernels

META = {"shape": {"model_config": "tiny", "batch_size": 2, "seq_len": 4, "mem_len": 2,
                  "num_predict": 2}, "precision": "mixed_bfloat16", "target": "gpu",
        "flops_per_step": 1e6}
RECORD = {"device_kind": "NVIDIA H100 80GB HBM3", "versions": {"jax": "0.10.2"},
          "compile_s": 12.0, "optimized_hlo": HLO_TEXT,
          "memory": {"argument": 3 * 2 ** 30, "output": 2 ** 30, "alias": 2 ** 30,
                     "temp": 5 * 2 ** 30, "generated_code": 2 ** 29}}


def _shape(monkeypatch):
    # The fixture's step has 2 heads; the tiny preset's own count must not matter here.
    monkeypatch.setattr(deviceless_compile, "step_shape", lambda meta: StepShape(**SHAPE))


def test_every_kernel_has_its_bytes_flops_launches_and_part():
    shape = StepShape(**SHAPE)
    assert (shape.keys, shape.positions) == (6, 10)
    found = {k.name: k for k in kernels(HLO_TEXT)}
    assert set(found) == set(EXPECTED)
    for name, (expected_part, expected_dir, count, nbytes, flops) in EXPECTED.items():
        k = found[name]
        assert (part(k, shape), direction(k), k.count, k.bytes, k.flops) == (
            expected_part, expected_dir, count, nbytes, flops), name
    assert found["keep"].cycles == 1500 and found["scores"].cycles is None
    assert found["ff"].kind == "gemm (cuBLAS)" and found["scores"].kind == "gemm (Triton)"
    assert found["fusion.adamw"].op_name == "xlnet_adamw/AssignSubVariableOp_3"


def test_the_sizes_that_tell_scores_and_positions_at_xlnet_base():
    s = StepShape(batch=16, seq_len=512, mem_len=384, num_predict=85, n_head=12)
    assert (s.keys, s.positions) == (896, 1408)
    # the shift's view [B, N, T - 1, L] and a merged [B N, L T] are position-sized ...
    assert s.position_sized([(16, 12, 1407, 512)]) and s.position_sized([(192, 512 * 1408)])
    assert not s.position_sized([(16, 896, 768)])  # ... the keys' projection is not
    assert s.query_positions([(2, 8, 12, 85, 1408)])
    assert not s.query_positions([(16, 12, 512, 1408)])
    assert s.score_sized([(16, 12, 85, 896)]) and not s.score_sized([(16, 896, 768)])


def test_the_table_names_each_part_once_in_order_and_ends_with_a_catch_all():
    assert PART_NAMES[-1] == "other" and len(PART_NAMES) == len(set(PART_NAMES))
    for needed in ("attention scores and values (q.k, p.v)", "position scores (q.r)", "rel shift",
                   "query-stream shift", "softmax", "attention dropout", "feed-forward",
                   "layer norm", "embedding and position encoding", "LM head and loss",
                   "optimizer (AdamW)", "gradient clipping"):
        assert needed in PART_NAMES


def test_op_names_read_alike_across_layers_and_calls():
    assert short_op_name("gradient_tape/xlnet_lm_1/transformer_1/layer_11_1/rel_attn_1/"
                         "einsum_4/Einsum_1") == "layer_N/rel_attn/einsum_4/Einsum_1"
    # the feed-forward's own sublayers layer_1 / layer_2 keep their names
    assert short_op_name("xlnet_lm/transformer/layer_3/ff/layer_2/Tensordot/MatMul") == (
        "layer_N/ff/layer_2/Tensordot/MatMul")


def test_h100_proxy_and_prediction(monkeypatch):
    _shape(monkeypatch)
    cal = h100_proxy.calibration()
    # The newest measured program calibrates (43be5fb's step at batch 16, not its cuDNN point).
    assert cal["ratio"] == pytest.approx(49.58 / 37.062) and cal["error"] == 0.18
    report = analyse("h100", META, RECORD)
    found = kernels(HLO_TEXT)
    proxy_us = sum((max(k.bytes / 3.35e12, k.flops / 989e12) * 1e6 + 2) * k.count
                   for k in found)
    h = report["h100"]
    assert h["proxy_ms"] == pytest.approx(proxy_us / 1e3)
    assert h["launch_ms"] == pytest.approx(sum(k.count for k in found) * 2e-3)
    assert h["predicted_ms"] == pytest.approx(cal["ratio"] * proxy_us / 1e3)
    assert h["predicted_ms_range"] == pytest.approx([0.82 * h["predicted_ms"],
                                                     1.18 * h["predicted_ms"]])
    assert h["mfu"] == pytest.approx(1e6 / (h["predicted_ms"] / 1e3) / 989e12)
    assert report["kernels"] == sum(v[2] for v in EXPECTED.values()) == 20
    assert report["bytes"] == sum(v[2] * v[3] for v in EXPECTED.values())
    assert report["flops"] == 576 + 960 + 1024
    # the grouped tables add up to the whole
    for table in ("parts", "part_totals", "kinds"):
        assert sum(r["kernels"] for r in report[table]) == report["kernels"]
        assert sum(r["ms"] for r in report[table]) == pytest.approx(h["proxy_ms"])
    softmax = {(r["part"], r["dir"]): r["kernels"] for r in report["parts"]}
    assert softmax[("softmax", "fwd")] == softmax[("softmax", "bwd")] == 1


def test_h100_report_text(monkeypatch):
    _shape(monkeypatch)
    text = format_report(dict(analyse("h100", META, RECORD), step_dir="/x/step"))
    lines = text.splitlines()
    assert lines[0] == ("/x/step (model tiny, batch 2, seq 4, memory 2, 2 predictions; "
                        "mixed_bfloat16; traced for GPU)")
    assert lines[1] == "compiled for NVIDIA H100 80GB HBM3 (h100) by jax 0.10.2 in 12 s"
    assert lines[2].startswith("kernels 20 (14 fusions); bytes (operands + outputs of each) ")
    assert lines[3].startswith("H100 proxy 0.04 ms = sum over kernels of max(bytes / 3.35 "
                               "TB/s, FLOPs / 989 TFLOP/s) + 2 us")
    assert lines[4].startswith("predicted H100 step 0.1 ms (+-18%: ") and (
        "= 1.338 x proxy" in lines[4] and "commit 43be5fb, batch 16" in lines[4])
    assert "time by part of the model (H100 proxy):" in lines
    assert any(line.endswith("optimizer (AdamW)") for line in lines)


def test_tpu_fit_cost_and_cycles(monkeypatch):
    _shape(monkeypatch)
    record = dict(RECORD, device_kind="TPU v5 lite", cost_analysis={
        "flops": 2.5e9, "bytes accessed": 3e9, "optimal_seconds": -1.5})
    report = analyse("tpu_v5e", META, record)
    tpu = report["tpu"]
    # arguments 3 + outputs 1 - aliased 1 + temporaries 5 + code 0.5 GiB
    assert tpu["needs_bytes"] == 8.5 * 2 ** 30 and tpu["fits"] is True
    assert tpu["estimated_cycles"] == 1500 and tpu["kernels_with_cycles"] == 1
    assert tpu["serial_ms"] == pytest.approx(1500 / 1.5e9 * 1e3)
    assert tpu["cost_analysis"]["optimal_seconds_corrected"] == pytest.approx(-0.5)  # 1 call
    text = format_report(dict(report, step_dir="/x/step"))
    assert ("fits HBM: needs 8.50 of 16.00 GiB (arguments 3.00, outputs not aliased to them "
            "0.00, temporaries 5.00, code 0.50 GiB)") in text
    assert ("kernels 20 top-level ops (14 fusions, 1 with a cycle estimate); FLOPs 0.003 T and "
            "bytes accessed 3.0 GB by libtpu's cost analysis") in text
    assert "libtpu's estimated cycles, summed: 1,500 = 0.0 ms at 1.5 GHz" in text
    # libtpu's totals replace the kernels' own sums on a TPU (its convolutions stand for
    # batched products), and the tables leave GB and GFLOP out
    assert (report["flops"], report["bytes"]) == (2.5e9, 3e9)
    assert "GFLOP" not in text
    # libtpu's estimate is the table's time: only the dropout hash has one here
    assert report["part_totals"][0]["part"] == "attention dropout"


def test_a_compiled_tpu_program_fits_whatever_its_statistics_sum(monkeypatch):
    _shape(monkeypatch)
    memory = dict(RECORD["memory"], temp=14 * 2 ** 30)  # 17.5 GiB in all, on a 16 GiB chip
    record = dict(RECORD, memory=memory, cost_analysis={"flops": 1.0})
    report = analyse("tpu_v5e", META, record)
    assert report["tpu"]["fits"] is True
    assert ("fits HBM (libtpu compiled it, so it fits: near the limit the statistics' sum "
            "exceeds the chip's HBM): needs 17.50 of 16.00 GiB") in format_report(report)


def test_tpu_refusal_is_one_line():
    assert tpu_estimate.refused_for_memory(OUT_OF_HBM) == {
        "needs_bytes": 17.25 * 2 ** 30, "available_bytes": 15.75 * 2 ** 30}
    assert tpu_estimate.refused_for_memory("INTERNAL: something else") is None
    report = analyse("tpu_v5e", META, {"device_kind": "TPU v5 lite", "compile_s": 300.0,
                                       "versions": {"libtpu": "0.0.42.1"},
                                       "error": OUT_OF_HBM})
    assert report["tpu"]["fits"] is False and report["kernels"] == 0
    lines = format_report(report).splitlines()
    assert len(lines) == 3
    assert lines[2] == ("does not fit: needs 17.25 of 15.75 GiB (libtpu refuses the program; "
                        "the chip has 16.00 GiB of HBM)")


def test_the_compile_venv_is_found_or_named(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    assert accelerator_python("h100", str(venv)) == str(venv / "bin" / "python")
    assert accelerator_python("tpu_v4", environ={"XLNET_TF2_AOT_TPU_VENV": str(venv)}) == str(
        venv / "bin" / "python")
    with pytest.raises(AcceleratorCompileError, match=(
            r"no GPU compile venv at --venv=/nowhere: `bash scripts/"
            r"setup_accelerator_compile.sh gpu` creates it")):
        accelerator_python("h100", "/nowhere")
    monkeypatch.setattr(deviceless_compile, "ROOT", str(tmp_path))  # no .venv-aot-* there
    with pytest.raises(AcceleratorCompileError, match=r"no GPU compile venv at .*"
                       r"\.venv-aot-gpu \(the default; --venv or XLNET_TF2_AOT_GPU_VENV"):
        accelerator_python("h100", environ={})
    monkeypatch.setattr(deviceless_compile, "_has_libtpu", lambda: True)
    assert accelerator_python("tpu_v5e", environ={}) == sys.executable
    monkeypatch.setattr(deviceless_compile, "_has_libtpu", lambda: False)
    with pytest.raises(AcceleratorCompileError, match="setup_accelerator_compile.sh tpu"):
        accelerator_python("tpu_v5e", environ={})


def test_a_step_dir_without_an_export_is_one_line(tmp_path):
    with pytest.raises(AcceleratorCompileError, match="is not a directory: pass a directory "
                       "written by benchmarks/accelerator_check.py --export_step=DIR"):
        deviceless_compile.read_step(str(tmp_path / "missing"))
    with pytest.raises(AcceleratorCompileError, match=r"step\.hlo\.pb is missing"):
        deviceless_compile.read_step(str(tmp_path))
    (tmp_path / "step.hlo.pb").write_bytes(b"")
    (tmp_path / "meta.json").write_text('{"shape": {}}')
    with pytest.raises(AcceleratorCompileError, match="is not an export's meta.json"):
        deviceless_compile.read_step(str(tmp_path))


def test_the_worker_gets_the_device_free_environment():
    env = deviceless_compile.worker_env("tpu_v4", {"PYTHONPATH": "/elsewhere"})
    assert env["JAX_PLATFORMS"] == "cpu" and env["ALLOW_MULTIPLE_LIBTPU_LOAD"] == "1"
    assert env["PYTHONPATH"] == deviceless_compile.ROOT + os.pathsep + "/elsewhere"
    assert deviceless_compile.worker_target("tpu_v4") == {
        "platform": "tpu", "topology": "v4:2x2x1", "chip_config": "megacore"}
    assert deviceless_compile.worker_env("h100", {})["CUDA_VISIBLE_DEVICES"] == "-1"
