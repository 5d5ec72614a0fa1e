"""Flash two-stream relative attention: XLNet's attention of S = L + P query rows (the content
stream, then the query stream) over K = M + L keys as Triton kernels, forward and backward,
never materializing a score-sized tensor. The formulas are the project's reference attention
(layers/xlnet_block.py's scores and op, `reference_attention`):

    score[s, j] = (q_w[s].k[j] + pos[s, L - row_pos[s] + j] + seg[s, row_seg[s] != key_seg[j]])
                  * scale,  blocked -> -1e30
    p = softmax(score),  p_drop = p * keep / (1 - rate)  (keep: layers/dropout.py's hash),
    out[s] = sum_j p_drop[s, j] v[j]

Shapes (GLOSSARY letters; row-major buffers): q_w [B,N,S,H], k, v [B,N,K,H], pos [B,N,S,T],
seg [B,N,S,2], row_pos, row_seg [B,S] int32, key_seg [B,K] int32, blocked_bits [B,S,W] int32
(W = ceil(K / 32), bit j % 32 of word j // 32 set = blocked), k0s [2] and k1 [B] 32-bit keys;
out [B,N,S,H], lse [B,N,S] float32.

Kernels (separate launches, each output element written by one program, no atomics):
  flash_fwd       grid (ceil(S / BLOCK_M), B * N): one tile of query rows, online softmax over
                  the key tiles; writes out and each row's log-sum-exp.
  flash_bwd_dkdv  grid (ceil(K / BLOCK_N), B * N): one tile of keys, loops over the query tiles
                  (FlashAttention-2: p recomputed from lse); writes dk, dv.
  flash_bwd_dq    grid (ceil(S / BLOCK_M), B * N): one tile of query rows, loops over the key
                  tiles; writes dq_w, d_pos (every column of the row: the score gradient where a
                  key reads it, zero elsewhere) and d_seg.
Both backward kernels compute delta = rowsum(d_out * out) of their rows themselves.

ABI: pointer arguments only (operands, then results; parameter `<name>_ptr`), every size and
flag a tl.constexpr: the ABI of XLA's `__gpu$xla.gpu.triton` custom call. A pointer whose flag
is off (seg without HAS_SEGMENT, ...) is passed as None: a constexpr, absent from the compiled
function's arguments. `launch(...)` gives a kernel's Triton function, the pointers it takes in
order, its constexprs, grid, num_warps and num_stages; `kernels(interpret)` the Triton
functions themselves (triton, the `gpu` extra, is imported there, not by this module).

Tiles per GPU generation (`launch`): the forward keeps a [BLOCK_M, H] accumulator and streams
K, V and the position-score tile through shared memory, so the tile's depth of pipelining
(num_stages) is what the shared memory affords: sm_90's 228 KiB holds three stages of 64-key
tiles at H = 64 in 16-bit types, sm_80's 164 KiB two. The backward kernels hold two
accumulators (dk and dv, or dq plus the row's segment sums) and read five tiles per step, so
they keep two stages on both. float32 operands (tests, and a debugging aid) double every tile:
half the tile rows there.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Dict, Optional, Tuple

# The reference's blocked score: finite, so a row whose keys are all blocked gets the
# reference's uniform softmax over its K keys (not a NaN).
BLOCKED_SCORE = -1e30
_GOLDEN = 0x9E3779B9               # dropout.py's counter and key multipliers
_KEY_MULTIPLIER = 0x85EBCA77


# The kernels' functions below are plain Python until `kernels()` makes them Triton functions
# (triton is an optional dependency: the `gpu` extra); `tl` is triton.language there.
#
# tl.sum, tl.max and tl.zeros are @triton.jit functions of triton.language, decorated when
# triton is imported: Triton's CPU interpreter runs them only if TRITON_INTERPRET was set before
# that import. The kernels use these equivalents (the same tt.reduce), which run under the
# interpreter whatever the environment.
def _add(a, b):
    return a + b


def _larger(a, b):
    return tl.maximum(a, b)


def _row_sum(x, axis):
    return tl.reduce(x, axis, _add)


def _row_max(x, axis):
    return tl.reduce(x, axis, _larger)



def _fmix32(h):
    """MurmurHash3's finalizer on uint32 values (multiplies wrap mod 2**32, shifts logical)."""
    h = h ^ (h >> 16)
    h = h * 0x85EBCA6B
    h = h ^ (h >> 13)
    h = h * 0xC2B2AE35
    return h ^ (h >> 16)


def _row_context(b, head, rows, row_ok, row_pos_ptr, seg_ptr, row_seg_ptr, k0s_ptr, k1_ptr,
                 N: tl.constexpr, S: tl.constexpr, K: tl.constexpr, L: tl.constexpr,
                 SPLIT: tl.constexpr, HAS_SEGMENT: tl.constexpr, HAS_DROPOUT: tl.constexpr):
    """Per-row values of a tile of rows: the first position-score column (L - row_pos), the
    segment scalars and id, and the dropout hash's key terms and counter base."""
    shift = L - tl.load(row_pos_ptr + b * S + rows, mask=row_ok, other=0)
    seg_same = tl.full(rows.shape, 0, tl.float32)
    seg_diff = tl.full(rows.shape, 0, tl.float32)
    rseg = tl.full(rows.shape, 0, tl.int32)
    if HAS_SEGMENT:
        seg_row = ((b * N + head) * S + rows) * 2
        seg_same = tl.load(seg_ptr + seg_row, mask=row_ok, other=0).to(tl.float32)
        seg_diff = tl.load(seg_ptr + seg_row + 1, mask=row_ok, other=0).to(tl.float32)
        rseg = tl.load(row_seg_ptr + b * S + rows, mask=row_ok, other=0)
    key_term = tl.full(rows.shape, 0, tl.uint32)
    key_mix = tl.full(rows.shape, 0, tl.uint32)
    n_base = tl.full(rows.shape, 0, tl.uint32)
    if HAS_DROPOUT:
        # Two parts (the Dropout's row_draws=(L, P)): rows >= SPLIT draw with the second k0,
        # counting their rows from 0 within a part of S - SPLIT rows.
        second = rows >= SPLIT
        k0 = tl.load(k0s_ptr + second.to(tl.int32)).to(tl.uint32, bitcast=True)
        k1 = tl.load(k1_ptr + b).to(tl.uint32, bitcast=True)
        local = tl.where(second, rows - SPLIT, rows).to(tl.uint32)
        part_rows = tl.where(second, S - SPLIT, SPLIT).to(tl.uint32)
        n_base = (head.to(tl.uint32) * part_rows + local) * K
        key_term = k0 * _KEY_MULTIPLIER + k1
        key_mix = _fmix32(k1 ^ _fmix32(k0))
    return shift, seg_same, seg_diff, rseg, key_term, key_mix, n_base


def _keep(cols, key_term, key_mix, n_base, THRESHOLD: tl.constexpr):
    """dropout.py's keep mask of a tile: hashed bits of n = n_base[row] + key >= threshold."""
    n = n_base[:, None] + cols[None, :].to(tl.uint32)
    bits = _fmix32(_fmix32(n * _GOLDEN + key_term[:, None]) ^ key_mix[:, None])
    return bits >= THRESHOLD


def _scores(q, kt, b, bh, rows, row_ok, cols, col_ok, shift, seg_same, seg_diff, rseg,
            pos_ptr, key_seg_ptr, blocked_bits_ptr,
            S: tl.constexpr, K: tl.constexpr, T: tl.constexpr, W: tl.constexpr,
            SCALE: tl.constexpr, HAS_SEGMENT: tl.constexpr, HAS_MASK: tl.constexpr):
    """The scaled scores of a [BLOCK_M, BLOCK_N] tile (blocked -1e30, keys past K -inf), the
    live entries (in range, not blocked: where the score's gradient flows), the entries whose
    segments differ, and the position-score columns they read."""
    ac = tl.dot(q, tl.trans(kt), input_precision="ieee")
    col = shift[:, None] + cols[None, :]
    inside = row_ok[:, None] & col_ok[None, :]
    reads = inside & (col >= 0) & (col < T)
    bd = tl.load(pos_ptr + (bh * S + rows)[:, None] * T + col, mask=reads, other=0)
    score = ac + bd.to(tl.float32)
    differ = inside
    if HAS_SEGMENT:
        kseg = tl.load(key_seg_ptr + b * K + cols, mask=col_ok, other=0)
        differ = rseg[:, None] != kseg[None, :]
        score += tl.where(differ, seg_diff[:, None], seg_same[:, None])
    score = score * SCALE
    live = inside
    if HAS_MASK:
        word = tl.load(blocked_bits_ptr + (b * S + rows)[:, None] * W + (cols // 32)[None, :],
                       mask=inside, other=0)
        blocked = ((word >> (cols % 32)[None, :]) & 1) != 0
        score = tl.where(blocked, BLOCKED_SCORE, score)
        live = live & (~blocked)
    score = tl.where(col_ok[None, :], score, float("-inf"))
    return score, live, differ, col, reads


def flash_fwd(q_w_ptr, k_ptr, v_ptr, pos_ptr, row_pos_ptr, seg_ptr, row_seg_ptr, key_seg_ptr,
              blocked_bits_ptr, k0s_ptr, k1_ptr, out_ptr, lse_ptr,
              B: tl.constexpr, N: tl.constexpr, S: tl.constexpr, K: tl.constexpr,
              H: tl.constexpr, T: tl.constexpr, L: tl.constexpr, SPLIT: tl.constexpr,
              W: tl.constexpr, SCALE: tl.constexpr, THRESHOLD: tl.constexpr,
              KEEP_SCALE: tl.constexpr, HAS_SEGMENT: tl.constexpr, HAS_MASK: tl.constexpr,
              HAS_DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              DOT_F32: tl.constexpr):
    """out [B,N,S,H] and lse [B,N,S] of one tile of BLOCK_M query rows of one (example, head)."""
    bh = tl.program_id(1)
    b = bh // N
    head = bh % N
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < S
    hs = tl.arange(0, H)
    q = tl.load(q_w_ptr + (bh * S + rows)[:, None] * H + hs[None, :], mask=row_ok[:, None],
                other=0)
    if DOT_F32:  # the CPU interpreter multiplies 16-bit floats' bit patterns in tl.dot (#11584)
        q = q.to(tl.float32)
    shift, seg_same, seg_diff, rseg, key_term, key_mix, n_base = _row_context(
        b, head, rows, row_ok, row_pos_ptr, seg_ptr, row_seg_ptr, k0s_ptr, k1_ptr,
        N, S, K, L, SPLIT, HAS_SEGMENT, HAS_DROPOUT)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.full([BLOCK_M], 0, tl.float32)
    acc = tl.full([BLOCK_M, H], 0, tl.float32)
    for start in range(0, K, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_ok = cols < K
        kv_at = (bh * K + cols)[:, None] * H + hs[None, :]
        kt = tl.load(k_ptr + kv_at, mask=col_ok[:, None], other=0)
        vt = tl.load(v_ptr + kv_at, mask=col_ok[:, None], other=0)
        if DOT_F32:
            kt = kt.to(tl.float32)
            vt = vt.to(tl.float32)
        score, live, differ, col, reads = _scores(
            q, kt, b, bh, rows, row_ok, cols, col_ok, shift, seg_same, seg_diff, rseg,
            pos_ptr, key_seg_ptr, blocked_bits_ptr, S, K, T, W, SCALE, HAS_SEGMENT, HAS_MASK)
        m_new = tl.maximum(m_i, _row_max(score, 1))
        p = tl.exp(score - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + _row_sum(p, 1)
        if HAS_DROPOUT:
            p = tl.where(_keep(cols, key_term, key_mix, n_base, THRESHOLD), p, 0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt, input_precision="ieee")
        m_i = m_new
    out = acc * (KEEP_SCALE / l_i)[:, None]
    tl.store(out_ptr + (bh * S + rows)[:, None] * H + hs[None, :],
             out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
    tl.store(lse_ptr + bh * S + rows, m_i + tl.log(l_i), mask=row_ok)


def _row_tile(q_w_ptr, out_ptr, d_out_ptr, lse_ptr, bh, rows, row_ok, hs,
              S: tl.constexpr, H: tl.constexpr, DOT_F32: tl.constexpr):
    """q_w, d_out, lse and delta = rowsum(d_out * out) of a tile of rows."""
    at = (bh * S + rows)[:, None] * H + hs[None, :]
    q = tl.load(q_w_ptr + at, mask=row_ok[:, None], other=0)
    d_out = tl.load(d_out_ptr + at, mask=row_ok[:, None], other=0)
    out = tl.load(out_ptr + at, mask=row_ok[:, None], other=0)
    delta = _row_sum(d_out.to(tl.float32) * out.to(tl.float32), 1)
    lse = tl.load(lse_ptr + bh * S + rows, mask=row_ok, other=0)
    if DOT_F32:
        q = q.to(tl.float32)
        d_out = d_out.to(tl.float32)
    return q, d_out, lse, delta


def _score_grad(q, kt, vt, d_out, lse, delta, b, bh, head, rows, row_ok, cols, col_ok,
                row_pos_ptr, seg_ptr, row_seg_ptr, key_seg_ptr, blocked_bits_ptr, k0s_ptr, k1_ptr,
                pos_ptr, N: tl.constexpr, S: tl.constexpr, K: tl.constexpr, T: tl.constexpr,
                L: tl.constexpr, SPLIT: tl.constexpr, W: tl.constexpr, SCALE: tl.constexpr,
                THRESHOLD: tl.constexpr, KEEP_SCALE: tl.constexpr, HAS_SEGMENT: tl.constexpr,
                HAS_MASK: tl.constexpr, HAS_DROPOUT: tl.constexpr):
    """Recomputed dropped probabilities p_drop and the gradient of the pre-scale score sum
    (ds: d loss / d(ac + bd + ef), zero where blocked) of a tile, with the tile's segment
    mismatch and the position-score columns it reads."""
    shift, seg_same, seg_diff, rseg, key_term, key_mix, n_base = _row_context(
        b, head, rows, row_ok, row_pos_ptr, seg_ptr, row_seg_ptr, k0s_ptr, k1_ptr,
        N, S, K, L, SPLIT, HAS_SEGMENT, HAS_DROPOUT)
    score, live, differ, col, reads = _scores(
        q, kt, b, bh, rows, row_ok, cols, col_ok, shift, seg_same, seg_diff, rseg,
        pos_ptr, key_seg_ptr, blocked_bits_ptr, S, K, T, W, SCALE, HAS_SEGMENT, HAS_MASK)
    # A row whose keys are all blocked has lse = -1e30 + log(K), which rounds to -1e30 in
    # float32: its probabilities, the reference's uniform 1 / K, come from that test instead.
    dead = lse < 0.5 * BLOCKED_SCORE
    p = tl.where(dead[:, None], 1.0 / K, tl.exp(score - lse[:, None]))
    p = tl.where(row_ok[:, None] & col_ok[None, :], p, 0.0)
    dp = tl.dot(d_out, tl.trans(vt), input_precision="ieee")
    p_drop = p
    if HAS_DROPOUT:
        keep = _keep(cols, key_term, key_mix, n_base, THRESHOLD)
        p_drop = tl.where(keep, p * KEEP_SCALE, 0.0)
        dp = tl.where(keep, dp * KEEP_SCALE, 0.0)
    ds = tl.where(live, p * (dp - delta[:, None]), 0.0) * SCALE
    return p_drop, ds, differ, col, reads


def flash_bwd_dkdv(q_w_ptr, k_ptr, v_ptr, pos_ptr, row_pos_ptr, seg_ptr, row_seg_ptr, key_seg_ptr,
                   blocked_bits_ptr, k0s_ptr, k1_ptr, out_ptr, lse_ptr, d_out_ptr, dk_ptr, dv_ptr,
                   B: tl.constexpr, N: tl.constexpr, S: tl.constexpr, K: tl.constexpr,
                   H: tl.constexpr, T: tl.constexpr, L: tl.constexpr, SPLIT: tl.constexpr,
                   W: tl.constexpr, SCALE: tl.constexpr, THRESHOLD: tl.constexpr,
                   KEEP_SCALE: tl.constexpr, HAS_SEGMENT: tl.constexpr, HAS_MASK: tl.constexpr,
                   HAS_DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   DOT_F32: tl.constexpr):
    """dk, dv [B,N,K,H] of one tile of BLOCK_N keys of one (example, head), over all S rows."""
    bh = tl.program_id(1)
    b = bh // N
    head = bh % N
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < K
    hs = tl.arange(0, H)
    kv_at = (bh * K + cols)[:, None] * H + hs[None, :]
    kt = tl.load(k_ptr + kv_at, mask=col_ok[:, None], other=0)
    vt = tl.load(v_ptr + kv_at, mask=col_ok[:, None], other=0)
    if DOT_F32:
        kt = kt.to(tl.float32)
        vt = vt.to(tl.float32)
    dk = tl.full([BLOCK_N, H], 0, tl.float32)
    dv = tl.full([BLOCK_N, H], 0, tl.float32)
    for start in range(0, S, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        row_ok = rows < S
        q, d_out, lse, delta = _row_tile(q_w_ptr, out_ptr, d_out_ptr, lse_ptr, bh, rows, row_ok,
                                         hs, S, H, DOT_F32)
        p_drop, ds, differ, col, reads = _score_grad(
            q, kt, vt, d_out, lse, delta, b, bh, head, rows, row_ok, cols, col_ok,
            row_pos_ptr, seg_ptr, row_seg_ptr, key_seg_ptr, blocked_bits_ptr, k0s_ptr, k1_ptr,
            pos_ptr, N, S, K, T, L, SPLIT, W, SCALE, THRESHOLD, KEEP_SCALE, HAS_SEGMENT, HAS_MASK,
            HAS_DROPOUT)
        dv += tl.dot(tl.trans(p_drop.to(d_out.dtype)), d_out, input_precision="ieee")
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision="ieee")
    tl.store(dk_ptr + kv_at, dk.to(dk_ptr.dtype.element_ty), mask=col_ok[:, None])
    tl.store(dv_ptr + kv_at, dv.to(dv_ptr.dtype.element_ty), mask=col_ok[:, None])


def flash_bwd_dq(q_w_ptr, k_ptr, v_ptr, pos_ptr, row_pos_ptr, seg_ptr, row_seg_ptr, key_seg_ptr,
                 blocked_bits_ptr, k0s_ptr, k1_ptr, out_ptr, lse_ptr, d_out_ptr, dq_w_ptr,
                 d_pos_ptr, d_seg_ptr,
                 B: tl.constexpr, N: tl.constexpr, S: tl.constexpr, K: tl.constexpr,
                 H: tl.constexpr, T: tl.constexpr, L: tl.constexpr, SPLIT: tl.constexpr,
                 W: tl.constexpr, SCALE: tl.constexpr, THRESHOLD: tl.constexpr,
                 KEEP_SCALE: tl.constexpr, HAS_SEGMENT: tl.constexpr, HAS_MASK: tl.constexpr,
                 HAS_DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 DOT_F32: tl.constexpr):
    """dq_w [B,N,S,H], d_pos [B,N,S,T] and d_seg [B,N,S,2] of one tile of BLOCK_M rows."""
    bh = tl.program_id(1)
    b = bh // N
    head = bh % N
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < S
    hs = tl.arange(0, H)
    q, d_out, lse, delta = _row_tile(q_w_ptr, out_ptr, d_out_ptr, lse_ptr, bh, rows, row_ok, hs,
                                     S, H, DOT_F32)
    dq = tl.full([BLOCK_M, H], 0, tl.float32)
    d_same = tl.full([BLOCK_M], 0, tl.float32)
    d_diff = tl.full([BLOCK_M], 0, tl.float32)
    for start in range(0, K, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_ok = cols < K
        kv_at = (bh * K + cols)[:, None] * H + hs[None, :]
        kt = tl.load(k_ptr + kv_at, mask=col_ok[:, None], other=0)
        vt = tl.load(v_ptr + kv_at, mask=col_ok[:, None], other=0)
        if DOT_F32:
            kt = kt.to(tl.float32)
            vt = vt.to(tl.float32)
        p_drop, ds, differ, col, reads = _score_grad(
            q, kt, vt, d_out, lse, delta, b, bh, head, rows, row_ok, cols, col_ok,
            row_pos_ptr, seg_ptr, row_seg_ptr, key_seg_ptr, blocked_bits_ptr, k0s_ptr, k1_ptr,
            pos_ptr, N, S, K, T, L, SPLIT, W, SCALE, THRESHOLD, KEEP_SCALE, HAS_SEGMENT, HAS_MASK,
            HAS_DROPOUT)
        dq += tl.dot(ds.to(kt.dtype), kt, input_precision="ieee")
        # Each (row, key) reads its own column (L - row_pos + key: distinct keys, distinct
        # columns), so the score gradient is stored, not accumulated.
        tl.store(d_pos_ptr + (bh * S + rows)[:, None] * T + col,
                 ds.to(d_pos_ptr.dtype.element_ty), mask=reads)
        if HAS_SEGMENT:
            d_diff += _row_sum(tl.where(differ, ds, 0.0), 1)
            d_same += _row_sum(tl.where(differ, 0.0, ds), 1)
    # The columns no key of the row reads: zero, so every element of d_pos is written once.
    shift = L - tl.load(row_pos_ptr + b * S + rows, mask=row_ok, other=0)
    for start in range(0, T, BLOCK_N):
        col = start + tl.arange(0, BLOCK_N)
        unread = (col[None, :] < shift[:, None]) | (col[None, :] >= shift[:, None] + K)
        tl.store(d_pos_ptr + (bh * S + rows)[:, None] * T + col[None, :],
                 tl.full([BLOCK_M, BLOCK_N], 0, d_pos_ptr.dtype.element_ty),
                 mask=row_ok[:, None] & (col < T)[None, :] & unread)
    row_at = (bh * S + rows)[:, None] * H + hs[None, :]
    tl.store(dq_w_ptr + row_at, dq.to(dq_w_ptr.dtype.element_ty), mask=row_ok[:, None])
    if HAS_SEGMENT:
        d_seg_at = (bh * S + rows) * 2
        tl.store(d_seg_ptr + d_seg_at, d_same.to(d_seg_ptr.dtype.element_ty), mask=row_ok)
        tl.store(d_seg_ptr + d_seg_at + 1, d_diff.to(d_seg_ptr.dtype.element_ty), mask=row_ok)


KERNEL_NAMES = ("flash_fwd", "flash_bwd_dkdv", "flash_bwd_dq")
_TRITON_FUNCTIONS = (_fmix32, _add, _larger, _row_sum, _row_max, _row_context, _keep, _scores,
                     flash_fwd, _row_tile, _score_grad, flash_bwd_dkdv, flash_bwd_dq)


@functools.lru_cache(maxsize=None)
def kernels(interpret: bool = False) -> Dict[str, object]:
    """The kernels by name, as @triton.jit functions (`interpret`: as functions of Triton's CPU
    interpreter, whatever TRITON_INTERPRET says). Each function gets a namespace of this
    module's names with `tl` (triton.language), the constants as tl.constexpr (a Triton function
    reads only constexpr globals) and the other functions as Triton functions."""
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    namespace = dict(globals())
    namespace.update(tl=tl, BLOCKED_SCORE=tl.constexpr(BLOCKED_SCORE),
                     _GOLDEN=tl.constexpr(_GOLDEN), _KEY_MULTIPLIER=tl.constexpr(_KEY_MULTIPLIER))
    for fn in _TRITON_FUNCTIONS:
        bound = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__)
        bound.__annotations__ = dict(fn.__annotations__)
        bound.__doc__, bound.__module__, bound.__qualname__ = fn.__doc__, __name__, fn.__qualname__
        namespace[fn.__name__] = InterpretedFunction(bound) if interpret else triton.jit(bound)
    return {name: namespace[name] for name in KERNEL_NAMES}


# Every kernel's pointer parameters in signature order, and the flag that drops each optional
# one (passed as None when its flag is off). The first names are operands, the rest results.
_OPERANDS = ("q_w", "k", "v", "pos", "row_pos", "seg", "row_seg", "key_seg", "blocked_bits",
             "k0s", "k1")
_RESULTS = {"flash_fwd": ("out", "lse"),
            "flash_bwd_dkdv": ("dk", "dv"),
            "flash_bwd_dq": ("dq_w", "d_pos", "d_seg")}
_BACKWARD_OPERANDS = ("out", "lse", "d_out")
_FLAG_OF = {"seg": "HAS_SEGMENT", "row_seg": "HAS_SEGMENT", "key_seg": "HAS_SEGMENT",
            "d_seg": "HAS_SEGMENT", "blocked_bits": "HAS_MASK", "k0s": "HAS_DROPOUT",
            "k1": "HAS_DROPOUT"}

# (BLOCK_M, BLOCK_N, num_warps, num_stages) per (GPU generation, forward or backward), for
# 16-bit operands; the module docstring says why.
_TILES = {("sm_90", "fwd"): (64, 64, 4, 3), ("sm_90", "bwd"): (64, 64, 4, 2),
          ("sm_80", "fwd"): (64, 64, 4, 2), ("sm_80", "bwd"): (64, 64, 4, 2)}
DTYPES = ("bfloat16", "float16", "float32")


@dataclasses.dataclass(frozen=True)
class Launch:
    """One kernel's launch: `kernel` (the @triton.jit function), its `operands` and `results`
    (the pointer parameters it takes, in order: what the custom call passes; parameter
    `<name>_ptr`), `constexprs` (every other parameter, by name; the pointers it does not
    take are None there), `grid` (x, y, z),
    `num_warps`, `num_stages`."""
    name: str
    kernel: object
    operands: Tuple[str, ...]
    results: Tuple[str, ...]
    constexprs: Dict[str, object]
    grid: Tuple[int, int, int]
    num_warps: int
    num_stages: int


def dropout_threshold(rate: float) -> int:
    """layers/dropout.py's keep threshold: bits >= it are kept."""
    return min(int(round(rate * 2.0 ** 32)), 2 ** 32 - 1)


def launch(name: str, *, batch: int, heads: int, rows: int, keys: int, head_size: int,
           distances: int, seq_len: int, split: Optional[int] = None, scale: float,
           dropout_rate: float = 0.0, has_segment: bool, has_mask: bool, dtype: str,
           generation: str, interpret: bool = False, block: Optional[Tuple[int, int]] = None
           ) -> Launch:
    """The launch of kernel `name` ("flash_fwd", "flash_bwd_dkdv", "flash_bwd_dq") for one
    attention: `batch` B, `heads` N, `rows` S (= L content rows + P query-stream rows),
    `keys` K, `head_size` H (a power of two, >= 16), `distances` T, `seq_len` L, `split` the
    rows of the first dropout part (None: one part), `dtype` of the float operands,
    `generation` "sm_80" or "sm_90". `interpret`: Triton's CPU interpreter (16-bit dots in
    float32); `block`: (BLOCK_M, BLOCK_N) instead of the generation's (tests)."""
    if name not in KERNEL_NAMES:
        raise ValueError(f"unknown flash kernel {name!r}: one of {KERNEL_NAMES}")
    if dtype not in DTYPES:
        raise ValueError(f"flash attention dtype {dtype!r}: one of {DTYPES}")
    if generation not in ("sm_80", "sm_90"):
        raise ValueError(f"flash attention GPU generation {generation!r}: sm_80 or sm_90")
    if head_size < 16 or head_size & (head_size - 1):
        raise ValueError(f"flash attention head size {head_size}: a power of two >= 16")
    if not 0.0 <= dropout_rate < 1.0:
        raise ValueError(f"flash attention dropout rate {dropout_rate}: in [0, 1)")
    block_m, block_n, num_warps, num_stages = _TILES[generation, "fwd" if name == "flash_fwd"
                                                      else "bwd"]
    if dtype == "float32":
        block_m //= 2
    if block is not None:
        block_m, block_n = block
    has_dropout = dropout_rate > 0.0
    flags = {"HAS_SEGMENT": has_segment, "HAS_MASK": has_mask, "HAS_DROPOUT": has_dropout}
    params = _OPERANDS + (_BACKWARD_OPERANDS if name != "flash_fwd" else ()) + _RESULTS[name]
    used = tuple(p for p in params if flags.get(_FLAG_OF.get(p), True))
    constexprs: Dict[str, object] = {p + "_ptr": None for p in params if p not in used}
    constexprs.update(
        B=batch, N=heads, S=rows, K=keys, H=head_size, T=distances, L=seq_len,
        SPLIT=rows if split is None else split, W=-(-keys // 32), SCALE=float(scale),
        THRESHOLD=dropout_threshold(dropout_rate) if has_dropout else 0,
        KEEP_SCALE=1.0 / (1.0 - dropout_rate), BLOCK_M=block_m, BLOCK_N=block_n,
        DOT_F32=interpret and dtype != "float32", **flags)
    tiles = -(-keys // block_n) if name == "flash_bwd_dkdv" else -(-rows // block_m)
    n_operands = len([p for p in used if p not in _RESULTS[name]])
    return Launch(name=name, kernel=kernels(interpret)[name], operands=used[:n_operands],
                  results=used[n_operands:], constexprs=constexprs,
                  grid=(tiles, batch * heads, 1), num_warps=num_warps, num_stages=num_stages)
