"""The flash relative attention kernels (layers/kernels/flash_relative_attention.py) under
Triton's CPU interpreter, against an independent float64 TensorFlow implementation of
the kernel module's formulas (gradients by TF's autodiff, dropout bits from layers/dropout.py's
hashed_bits), and their lowering to TTIR for sm_80 and sm_90 (no GPU needed).

The module makes its kernels interpreted or compiled on request (`kernels(interpret=...)`), so
both run in one process, whatever TRITON_INTERPRET says and whatever imported triton first.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import tensorflow as tf

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

from xlnet_tf2.layers import Dropout  # noqa: E402
from xlnet_tf2.layers import dropout  # noqa: E402
from xlnet_tf2.layers.kernels import flash_relative_attention as flash  # noqa: E402


@pytest.fixture(scope="module")
def interpreted():
    """The kernel module, its kernels checked to be the CPU interpreter's."""
    from triton.runtime.interpreter import InterpretedFunction
    for kernel in flash.kernels(interpret=True).values():
        assert isinstance(kernel, InterpretedFunction)
    return flash


def _case(name):
    """Inputs of one attention (numpy) and its settings."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    two_stream = name in ("two_stream", "two_stream_bf16")
    b, n, h, groups = 2, 2, 16, 1
    if two_stream:
        mem, seq_len, p_rows = 20, 16, 5                       # K = 36: two mask words
        b, groups = 4, 2                                       # bi_data: 2 examples a group
    elif name == "uni_causal":
        mem, seq_len, p_rows = 8, 12, 0
    elif name == "query_only":                # rows at scattered positions: wide bands
        mem, seq_len, p_rows = 10, 40, 9
    else:                                     # fine-tuning, inference: no memory
        mem, seq_len, p_rows = 0, 24, 0
    keys = mem + seq_len
    content = 0 if name == "query_only" else seq_len
    rows = content + p_rows
    dist = keys + 1 if name == "uni_causal" else keys + seq_len
    row_pos = np.concatenate([np.tile(np.arange(content), (b, 1)),
                              rng.integers(0, seq_len, (b, p_rows))], axis=1).astype(np.int32)
    row_pos[1, content:] = row_pos[1, content:][::-1]         # per-example query positions
    if name == "query_only":
        row_pos[0, :3] = [0, seq_len - 1, 1]                   # starts 40 apart in one tile
    blocked = np.zeros((b, rows, keys), bool)
    if name == "uni_causal":
        blocked |= np.arange(keys)[None, None, :] > mem + row_pos[:, :, None]
    if two_stream:
        blocked[:, seq_len:, :] = rng.random((b, p_rows, keys)) < 0.3
        blocked[0, :, keys - 3:] = True                        # padding of example 0
        blocked[1, 2, :] = True                                # rows that see nothing
        blocked[0, seq_len + 1, :] = True
    if name == "finetune":
        blocked[1, :, :5] = True                               # left padding
    example_seg = rng.integers(0, 2, (b, seq_len)).astype(np.int32)
    row_seg = np.take_along_axis(example_seg, row_pos, axis=1)  # a row's: its position's
    key_seg = np.concatenate([np.zeros((b, mem), np.int32), example_seg], axis=1)
    f = lambda *shape: rng.standard_normal(shape)  # noqa: E731
    return dict(
        b=b, n=n, h=h, rows=rows, keys=keys, dist=dist, seq_len=seq_len, groups=groups,
        split=seq_len if two_stream else None,
        has_segment=name not in ("uni_causal", "inference"), has_mask=name != "inference",
        rate={"two_stream": 0.3, "two_stream_bf16": 0.3, "uni_causal": 0.6,
              "query_only": 0.2}.get(name, 0.0),
        dtype="bfloat16" if name.endswith("bf16") else "float32",
        q=f(b, n, rows, h), r_w=f(n, h), r_r=f(n, h), k=f(b, n, keys, h), v=f(b, n, keys, h),
        k_r=f(groups, n, dist, h), seg=f(b, n, rows, 2), d_out=f(b, n, rows, h),
        row_pos=row_pos, row_order=np.argsort(row_pos, axis=1, kind="stable").astype(np.int32),
        row_seg=row_seg, key_seg=key_seg, blocked=blocked,
        k0s=np.array([0x9E3779B9 ^ 12345, 0xDEADBEEF], np.uint32),
        k1=np.array([7, 0xFFFFFFF0, 3, 0x80000001], np.uint32)[:b])


def _keep(c):
    """The keep mask [B,N,S,K] of the reference: dropout.hashed_bits of each row part."""
    parts = [(0, c["rows"])] if c["split"] is None else [(0, c["split"]),
                                                         (c["split"], c["rows"])]
    threshold = tf.constant(Dropout(c["rate"])._threshold, tf.uint32)
    keeps = [dropout.hashed_bits([c["b"], c["n"], stop - start, c["keys"]],
                                 tf.constant(c["k0s"][i]), tf.constant(c["k1"])) >= threshold
             for i, (start, stop) in enumerate(parts)]
    return tf.concat(keeps, axis=2)


def _reference(c, cast):
    """Output and gradients (float64 TF, autodiff) of the kernel module's formulas."""
    bf16 = c["dtype"] == "bfloat16"
    t = {name: tf.constant(cast(c[name]), tf.float64)
         for name in ("q", "r_w", "r_r", "k", "v", "k_r", "seg", "d_out")}
    col = c["seq_len"] - c["row_pos"][:, :, None] + np.arange(c["keys"])[None, None, :]
    col = np.broadcast_to(col[:, None], (c["b"], c["n"], c["rows"], c["keys"]))
    differ = (c["row_seg"][:, :, None] != c["key_seg"][:, None, :])[:, None]
    with tf.GradientTape() as tape:
        tape.watch(list(t.values()))
        # Every row's position scores against every distance, [B, N, S, T].
        k_r = tf.repeat(t["k_r"], c["b"] // c["groups"], axis=0)
        # q + r_w, q + r_r rounded as the kernels round them (to bf16 in the bf16 case).
        narrow = lambda x: tf.cast(tf.cast(x, tf.bfloat16), tf.float64) if bf16 else x  # noqa
        pos = tf.einsum("bnsh,bnth->bnst", narrow(t["q"] + t["r_r"][:, None]), k_r)
        padded = tf.pad(pos, [[0, 0], [0, 0], [0, 0], [0, c["keys"] + c["seq_len"]]])
        bd = tf.gather(padded, col, batch_dims=3)
        ac = tf.einsum("bnsh,bnkh->bnsk", narrow(t["q"] + t["r_w"][:, None]), t["k"])
        score = ac + bd
        if c["has_segment"]:
            score += tf.where(differ, t["seg"][..., 1:], t["seg"][..., :1])
        score *= c["h"] ** -0.5
        score = tf.where(c["blocked"][:, None], tf.constant(-1e30, tf.float64), score)
        prob = tf.nn.softmax(score, axis=-1)
        if c["rate"]:
            prob = tf.where(_keep(c), prob / (1.0 - c["rate"]), tf.zeros_like(prob))
        out = tf.einsum("bnsk,bnkh->bnsh", prob, t["v"])
    lse = tf.reduce_logsumexp(score, axis=-1)
    names = ("q", "r_w", "r_r", "k", "v", "k_r", "seg")
    grads = tape.gradient(out, [t[x] for x in names], output_gradients=t["d_out"])
    result = {"out": out.numpy(), "lse": lse.numpy()}
    result.update({"d_" + x if x in ("r_w", "r_r", "k_r", "seg") else "d" + x: g.numpy()
                   for x, g in zip(names, grads) if g is not None})
    result["dk_r"] = result.pop("d_k_r")
    return result


def _rows_major(x):
    """[B, N, rows, H] <-> [B, rows, N, H]: the kernels' layout of q, k, v and their kin."""
    return np.ascontiguousarray(np.swapaxes(x, 1, 2))


def _packed(blocked):
    """[B,S,K] bool -> [B,S,ceil(K/32)] int32 words, bit j % 32 of word j // 32 = key j."""
    b, s, k = blocked.shape
    words = np.zeros((b, s, -(-k // 32)), np.uint64)
    for j in range(k):
        words[:, :, j // 32] |= blocked[:, :, j].astype(np.uint64) << np.uint64(j % 32)
    return words.astype(np.uint32).view(np.int32)


def _run(module, c, name, buffers, block=(16, 16)):
    launch = module.launch(
        name, batch=c["b"], heads=c["n"], rows=c["rows"], keys=c["keys"], head_size=c["h"],
        distances=c["dist"], seq_len=c["seq_len"], groups=c["groups"], split=c["split"],
        scale=c["h"] ** -0.5,
        dropout_rate=c["rate"], has_segment=c["has_segment"], has_mask=c["has_mask"],
        dtype=c["dtype"],
        generation="sm_90", interpret=True, block=block)
    pointers = {x + "_ptr": buffers[x] for x in launch.operands + launch.results}
    launch.kernel[launch.grid](**pointers, **launch.constexprs)
    return launch


def _buffers(c):
    dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[c["dtype"]]
    b, n, s, k, h, t = c["b"], c["n"], c["rows"], c["keys"], c["h"], c["dist"]
    bufs = {x: torch.from_numpy((_rows_major(c[x]) if x in ("q", "k", "v", "d_out") else c[x])
                                .astype(np.float32)).to(dt)
            for x in ("q", "r_w", "r_r", "k", "v", "k_r", "seg", "d_out")}
    bufs.update(row_pos=torch.from_numpy(c["row_pos"]),
                row_order=torch.from_numpy(c["row_order"]), row_seg=torch.from_numpy(c["row_seg"]),
                key_seg=torch.from_numpy(c["key_seg"]),
                blocked_bits=torch.from_numpy(_packed(c["blocked"])),
                k0s=torch.from_numpy(c["k0s"].view(np.int32).copy()),
                k1=torch.from_numpy(c["k1"].view(np.int32).copy()),
                out=torch.full((b, s, n, h), float("nan"), dtype=dt),
                lse=torch.full((b, n, s), float("nan")),
                dq=torch.full((b, s, n, h), float("nan"), dtype=dt),
                d_r_w=torch.full((b, n, h), float("nan")),
                d_r_r=torch.full((b, n, h), float("nan")),
                dk=torch.full((b, k, n, h), float("nan"), dtype=dt),
                dv=torch.full((b, k, n, h), float("nan"), dtype=dt),
                dk_r=torch.full((b, n, t, h), float("nan")),
                d_seg=torch.full((b, n, s, 2), float("nan"), dtype=dt))
    return bufs


def _per_group(c, dk_r):
    """The kernel's per-example dk_r [B,N,T,H] summed over each direction group's examples."""
    return dk_r.reshape((c["groups"], c["b"] // c["groups"]) + dk_r.shape[1:]).sum(axis=1)


@pytest.mark.parametrize("name", ["two_stream", "uni_causal", "finetune", "inference",
                                  "query_only", "two_stream_bf16"])
def test_kernels_match_the_reference(interpreted, name):
    """Output, log-sum-exp and every gradient (q, r_w, r_r, k, v, k_r, the segment scores) of
    the kernels against the float64 reference: both streams with bi_data's two direction
    groups, memory, segments, padding, rows that see nothing and dropout; causal attention
    (T = K + 1: a band past T); fine-tuning and inference shapes; rows whose positions
    spread over more than a tile (more than two k_r panels a key tile)."""
    c = _case(name)
    bf16 = c["dtype"] == "bfloat16"
    # The reference sees the operands the kernel sees (rounded to bf16 in the bf16 case).
    cast = ((lambda a: torch.from_numpy(a.astype(np.float32)).bfloat16().float().numpy())
            if bf16 else (lambda a: a.astype(np.float32)))
    expected = _reference(c, cast)
    bufs = _buffers(c)
    for kernel in flash.KERNEL_NAMES:                   # forward, then the two backward
        _run(interpreted, c, kernel, bufs)
    got_all = {x: bufs[x].float().numpy() for x in bufs}
    for x in ("out", "dq", "dk", "dv"):
        got_all[x] = _rows_major(got_all[x])
    got_all["dk_r"] = _per_group(c, got_all["dk_r"])
    for x in ("d_r_w", "d_r_r"):  # each example's sum over its rows, summed over the examples
        got_all[x] = got_all[x].sum(axis=0)
    for result in ("out", "dq", "d_r_w", "d_r_r", "dk", "dv", "dk_r") + (
            ("d_seg",) if c["has_segment"] else ()):
        got = got_all[result]
        want = expected[result]
        scale = max(1.0, float(np.abs(want).max()))
        tol = 1.25e-2 * scale if bf16 else 1e-5
        assert np.isfinite(got).all(), result
        np.testing.assert_allclose(got, want, atol=tol, rtol=0, err_msg=result)
    # lse: the log-sum-exp of each row's scaled, blocked scores (a dead row's: -1e30 + log K).
    # In bf16 the tolerance of the other results: the interpreter rounds q + r to bf16 toward
    # zero (a GPU, and the reference, to nearest), a unit in the last place of some q_w.
    live = expected["lse"] > -1e29
    np.testing.assert_allclose(bufs["lse"].numpy()[live], expected["lse"][live], rtol=0,
                               atol=1.25e-2 * np.abs(expected["lse"][live]).max() if bf16
                               else 1e-5)
    np.testing.assert_allclose(bufs["lse"].numpy()[~live], expected["lse"][~live], rtol=1e-6)


def test_dropout_drops_what_the_reference_drops(interpreted):
    """With v = identity rows, out = p_drop exactly: zero exactly where the reference's bits
    drop, for both row parts and a threshold above 2**31."""
    for rate, name in ((0.3, "two_stream"), (0.6, "uni_causal")):
        c = _case(name)
        c["rate"] = rate
        c["keys"], c["h"] = 16, 16
        c["k"] = c["k"][:, :, :16]
        c["v"] = np.broadcast_to(np.eye(16), c["k"].shape).copy()
        c["blocked"] = np.zeros((c["b"], c["rows"], 16), bool)
        c["key_seg"] = c["key_seg"][:, :16]
        c["dist"] = 16 + c["seq_len"]
        c["k_r"] = np.zeros((c["groups"], c["n"], c["dist"], c["h"]))
        bufs = _buffers(c)
        _run(interpreted, c, "flash_fwd", bufs)
        got = _rows_major(bufs["out"].numpy())
        keep = _keep(c).numpy()
        assert (got[~keep] == 0).all() and (got[keep] > 0).all()
        assert 0.2 < 1 - keep.mean() < 0.8


def _xlnet_base_source(name, dtype, generation):
    """The launch of kernel `name` at XLNet-Base's attention shape (all flags on) and the
    Triton source to compile it: pointer types, constexprs, 16-byte aligned pointers."""
    from triton.compiler import ASTSource
    launch = flash.launch(
        name, batch=2, heads=12, rows=597, keys=896, head_size=64, distances=1408,
        seq_len=512, groups=2, split=512, scale=0.125, dropout_rate=0.1, has_segment=True,
        has_mask=True, dtype=dtype, generation=generation)
    pointer = {"bfloat16": "*bf16", "float16": "*fp16", "float32": "*fp32"}[dtype]
    kinds = dict(row_pos="*i32", row_order="*i32", row_seg="*i32", key_seg="*i32",
                 blocked_bits="*i32", k0s="*i32", k1="*i32", lse="*fp32", d_r_w="*fp32",
                 d_r_r="*fp32", dk_r="*fp32")
    pointers = launch.operands + launch.results
    signature = {p + "_ptr": kinds.get(p, pointer) for p in pointers}
    signature.update({c: "constexpr" for c in launch.constexprs})
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(pointers))}
    return launch, ASTSource(launch.kernel, signature, launch.constexprs, attrs)


@pytest.mark.parametrize("generation", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_kernels_lower_to_ttir(generation, dtype):
    """Every kernel, all flags on, at XLNet-Base's attention shape, lowers to TTIR whose
    function takes exactly the launch's pointers."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime.jit import JITFunction
    for name in flash.KERNEL_NAMES:
        launch, source = _xlnet_base_source(name, dtype, generation)
        assert isinstance(launch.kernel, JITFunction)
        target = GPUTarget("cuda", int(generation[3:]), 32)
        backend = triton.compiler.make_backend(target)
        options = backend.parse_options({"num_warps": launch.num_warps,
                                         "num_stages": launch.num_stages})
        context = triton._C.libtriton.ir.context()
        triton._C.libtriton.ir.load_dialects(context)
        backend.load_dialects(context)
        codegen = backend.get_codegen_implementation(options)
        module = source.make_ir(target, options, codegen, backend.get_module_map(), context)
        stages = {}
        backend.add_stages(stages, options, source.language)
        ttir = str(stages["ttir"](module, {}))
        assert f"tt.func public @{name}(" in ttir
        header = ttir[ttir.index(f"@{name}("):].split("\n", 1)[0]
        assert header.count("!tt.ptr") == len(launch.operands + launch.results), (name, header)
        assert "tt.dot" in ttir


# The most shared memory one block may use (opt-in): 227 KiB on sm_90, 163 KiB on sm_80.
_SHARED_LIMIT = {"sm_90": 227 * 1024, "sm_80": 163 * 1024}


@pytest.mark.parametrize("generation", ["sm_80", "sm_90"])
def test_kernels_compile_to_ptx_within_shared_memory(generation):
    """At XLNet-Base's attention shape in bf16, with the generation's tiles, every kernel
    compiles to PTX (Triton's own backend, no GPU), with the generation's tensor-core
    instructions and shared memory that fits one block."""
    from triton.backends.compiler import GPUTarget
    for name in flash.KERNEL_NAMES:
        launch, source = _xlnet_base_source(name, "bfloat16", generation)
        kernel = triton.compile(source, target=GPUTarget("cuda", int(generation[3:]), 32),
                                options={"num_warps": launch.num_warps,
                                         "num_stages": launch.num_stages})
        ptx = kernel.asm["ptx"]
        assert ("wgmma.mma_async" if generation == "sm_90" else "mma.sync") in ptx, name
        assert 0 < kernel.metadata.shared <= _SHARED_LIMIT[generation], (name,
                                                                         kernel.metadata.shared)
