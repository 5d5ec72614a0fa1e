"""Flash two-stream relative attention: XLNet's attention of S = L + P query rows (the content
stream, then the query stream) over K = M + L keys as Triton kernels, forward and backward. Every
term of a score is made inside the tile that uses it: no score-sized tensor and no [B, N, S, T]
position-score tensor exists outside the kernels. The formulas are the project's reference
attention (layers/xlnet_block.py's scores and op, `reference_attention`):

    score[s, j] = (q_w[s].k[j] + q_r[s].k_r[L - row_pos[s] + j]
                   + seg[s, row_seg[s] != key_seg[j]]) * scale,  blocked -> -1e30,
    q_w = q + r_w, q_r = q + r_r
    p = softmax(score),  p_drop = p * keep / (1 - rate)  (keep: layers/dropout.py's hash),
    out[s] = sum_j p_drop[s, j] v[j]

(L - row_pos[s] + j indexes the distance M + i - j in k_r's T rows; a row past T reads zero.)

Shapes (GLOSSARY letters; row-major buffers): q [B,S,N,H], r_w, r_r [N,H], k, v [B,K,N,H] (the
layouts the projections write and the output projection reads: no transposed copy is made for
the kernels), k_r [X,N,T,H] (the projected position embedding of each direction group: example
b reads group b // (B / X)), seg [B,N,S,2], row_pos, row_order, row_seg [B,S] int32, key_seg
[B,K] int32, blocked_bits [B,S,W] int32 (W = ceil(K / 32), bit j % 32 of word j // 32 set =
blocked), k0s [2] and k1 [B] 32-bit keys; out [B,S,N,H], lse [B,N,S] float32.

The position scores of a tile (the design). A tile pairs BLOCK_M rows with BLOCK_N keys. Its
rows are taken in the order of their positions (`row_order`: a stable sort of row_pos, which
interleaves the query-stream rows with the content rows), so the rows' first k_r rows,
start[s] = L - row_pos[s], lie in [first, first + spread]; where every position has a content
row, as in the two-stream step, spread <= BLOCK_M - 1. For the key tile at j0 the tile reads
the *band* of k_r rows first + j0 + [0, spread + BLOCK_N) as *panels* of BLOCK_N rows: panel c's
product with the tile's q_r, G_c = q_r . k_r[first + j0 + c * BLOCK_N + u]^T ([BLOCK_M,
BLOCK_N], one tl.dot), holds entry (i, jj) of the tile's position scores at column
start[i] - first + jj - c * BLOCK_N: a shift per row, made by tl.gather along the panel's
columns (two panels when spread < BLOCK_N, more otherwise: the same code). Panel 1 of key tile
j0 is panel 0 of key tile j0 + BLOCK_N, so a loop over the keys makes one new panel per key
tile. The backward shifts the score gradient back (dG_c[i, u] = ds[i, u + c * BLOCK_N -
start[i] + first]): q_r's gradient is dG_c . k_r_panel, k_r's dG_c^T . q_r.

Kernels (separate launches; no atomics: every output element has one writer program):
  flash_fwd       grid (ceil(S / BLOCK_M), B * N): one tile of rows, online softmax over the
                  key tiles; writes out and each row's log-sum-exp.
  flash_bwd_dkdv  grid (ceil(K / BLOCK_N), B * N): one tile of keys, loops over the row tiles
                  (FlashAttention-2: p recomputed from lse); writes dk, dv. Two panels per
                  step (the rows change from step to step: no panel carries over).
  flash_bwd_dq    grid (1, B * N): one (example, head), loops over its row tiles and, for each,
                  over the key tiles; writes dq (through both q_w and q_r) and d_seg of every
                  row, their sums over the rows d_r_w, d_r_r [B,N,H] float32 (the caller sums
                  the examples), and dk_r [B,N,T,H] float32, the example's own gradient of
                  k_r, summed in that buffer:
                  the program zeroes its slice, then adds each finished panel (this step's
                  panel 0 plus the last step's panel 1) by a read, add and store after a
                  barrier. One program owns the slice, so the sum's order is fixed. The caller
                  sums the examples of a direction group.
Both backward kernels compute delta = rowsum(d_out * out) of their rows themselves.

Matrix FLOPs, 2 per multiply-add, per B * N * S * K * H (a row tile's first panel and the dq
kernel's last, 1 / (K / BLOCK_N) more, left out): forward 6 (q.k, a new panel, p.v), dk/dv 12
(q.k, two panels, d_out.v, p^T.d_out, ds^T.q_w), dq 12 (q.k, a new panel, d_out.v, ds.k,
dG.k_r, dG^T.q_r): 30 in all, against 18 for kernels that read the position scores made
outside them, plus the 3 x 2 of the [B, N, S, T] products that made and differentiated them,
and the [B, N, S, T] tensor itself (323 MB a layer at XLNet-Base, written and read forward and
backward). The dq kernel's dk_r costs 4 bytes per element written three times (zeroed, summed
into, stored) and read once: 69 MB a layer at XLNet-Base, batch 16.

ABI: pointer arguments only (operands, then results; parameter `<name>_ptr`), every size and
flag a tl.constexpr: the ABI of XLA's `__gpu$xla.gpu.triton` custom call. A pointer whose flag
is off (seg without HAS_SEGMENT, ...) is passed as None: a constexpr, absent from the compiled
function's arguments. `launch(...)` gives a kernel's Triton function, the pointers it takes in
order, its constexprs, grid, num_warps and num_stages; `kernels(interpret)` the Triton
functions themselves (triton, the `gpu` extra, is imported there, not by this module).

Tiles per GPU generation (`launch`): the forward keeps a [BLOCK_M, H] accumulator and streams
K, V and a k_r panel through shared memory, so the tile's depth of pipelining (num_stages) is
what the shared memory affords: sm_90's 228 KiB holds three stages of 64-key tiles at H = 64
in 16-bit types, sm_80's 164 KiB two. The backward kernels hold two accumulators (dk and dv, or
dq and dq_r) and read five tiles per step, so they keep two stages on both. float32 operands
(tests, and a debugging aid) double every tile: half the tile rows there.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Dict, Optional, Tuple

# The reference's blocked score: finite, so a row whose keys are all blocked gets the
# reference's uniform softmax over its K keys (not a NaN).
BLOCKED_SCORE = -1e30
_GOLDEN = 0x9E3779B9               # layers/dropout.py's counter and key multipliers
_KEY_MULTIPLIER = 0x85EBCA77
# Larger than any row's first k_r row (L - row_pos <= L): the minimum's neutral element.
_FAR = 2 ** 30


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


def _smaller(a, b):
    return tl.minimum(a, b)


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


def _tile_rows(b, row_start, row_order_ptr, row_pos_ptr, S: tl.constexpr, L: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The rows of row tile `row_start` (in position order): their indices `rows` in the
    buffers, which are real (`row_ok`), each row's first k_r row `start` = L - row_pos, the
    tile's smallest `first`, and how many k_r panels of BLOCK_N rows a key tile's band takes
    (2 when the starts spread over fewer than BLOCK_N rows)."""
    sorted_rows = row_start + tl.arange(0, BLOCK_M)
    row_ok = sorted_rows < S
    rows = tl.load(row_order_ptr + b * S + sorted_rows, mask=row_ok, other=0)
    start = L - tl.load(row_pos_ptr + b * S + rows, mask=row_ok, other=0)
    first = tl.reduce(tl.where(row_ok, start, _FAR), 0, _smaller)
    spread = tl.reduce(tl.where(row_ok, start - first, 0), 0, _larger)
    panels = (spread + BLOCK_N - 1) // BLOCK_N + 1
    return rows, row_ok, start, first, panels


def _row_context(b, head, rows, row_ok, seg_ptr, row_seg_ptr, k0s_ptr, k1_ptr,
                 N: tl.constexpr, S: tl.constexpr, K: tl.constexpr, SPLIT: tl.constexpr,
                 HAS_SEGMENT: tl.constexpr, HAS_DROPOUT: tl.constexpr):
    """Per-row values of a tile of rows: the segment scalars and id, and the dropout hash's
    key terms and counter base (of each row's own index: the tile's order is not the hash's)."""
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
    return seg_same, seg_diff, rseg, key_term, key_mix, n_base


def _keep(cols, key_term, key_mix, n_base, THRESHOLD: tl.constexpr):
    """dropout.py's keep mask of a tile: hashed bits of n = n_base[row] + key >= threshold."""
    n = n_base[:, None] + cols[None, :].to(tl.uint32)
    bits = _fmix32(_fmix32(n * _GOLDEN + key_term[:, None]) ^ key_mix[:, None])
    return bits >= THRESHOLD


def _k_r_panel(k_r_base, first_row, T: tl.constexpr, H: tl.constexpr,
               BLOCK_N: tl.constexpr, DOT_F32: tl.constexpr):
    """k_r rows first_row + [0, BLOCK_N) of one (group, head): [BLOCK_N, H], zero past T."""
    t = first_row + tl.arange(0, BLOCK_N)
    hs = tl.arange(0, H)
    panel = tl.load(k_r_base + t[:, None] * H + hs[None, :],
                    mask=((t >= 0) & (t < T))[:, None], other=0)
    if DOT_F32:
        panel = panel.to(tl.float32)
    return panel


def _shifted(g, rel, low: tl.constexpr, BLOCK_N: tl.constexpr):
    """Entry (i, jj) of panel product g [BLOCK_M, BLOCK_N] at column rel[i, jj] - low, zero
    where that column is not in the panel."""
    column = rel - low
    inside = (column >= 0) & (column < BLOCK_N)
    return tl.where(inside, tl.gather(g, tl.where(inside, column, 0), 1), 0.0)


def _unshifted(ds, offset, low: tl.constexpr, BLOCK_N: tl.constexpr):
    """The gradient of a panel product from the score gradient ds [BLOCK_M, BLOCK_N]:
    dG[i, u] = ds[i, u + low - offset[i]], zero where that key is not in the tile."""
    key = tl.arange(0, BLOCK_N)[None, :] + low - offset[:, None]
    inside = (key >= 0) & (key < BLOCK_N)
    return tl.where(inside, tl.gather(ds, tl.where(inside, key, 0), 1), 0.0)


def _position_scores(qr, k_r_base, first, key_start, offset, panels, g_low,
                     T: tl.constexpr, H: tl.constexpr, BLOCK_N: tl.constexpr,
                     DOT_F32: tl.constexpr):
    """The position scores [BLOCK_M, BLOCK_N] of the key tile at key_start, from its band:
    panel 0's product `g_low` (made by the previous key tile) and the panels after it.
    Returns them, panel 1's product and panel 1 (the next key tile's panel 0)."""
    rel = offset[:, None] + tl.arange(0, BLOCK_N)[None, :]
    k_r_high = _k_r_panel(k_r_base, first + key_start + BLOCK_N, T, H, BLOCK_N, DOT_F32)
    g_high = tl.dot(qr, tl.trans(k_r_high), input_precision="ieee")
    bd = _shifted(g_low, rel, 0, BLOCK_N) + _shifted(g_high, rel, BLOCK_N, BLOCK_N)
    for c in range(2, panels):  # rows that spread over BLOCK_N positions or more
        panel = _k_r_panel(k_r_base, first + key_start + c * BLOCK_N, T, H, BLOCK_N, DOT_F32)
        g = tl.dot(qr, tl.trans(panel), input_precision="ieee")
        bd += _shifted(g, rel - c * BLOCK_N, 0, BLOCK_N)
    return bd, g_high, k_r_high


def _scores(q, kt, bd, b, rows, row_ok, cols, col_ok, seg_same, seg_diff, rseg,
            key_seg_ptr, blocked_bits_ptr, S: tl.constexpr, K: tl.constexpr,
            W: tl.constexpr, SCALE: tl.constexpr, HAS_SEGMENT: tl.constexpr,
            HAS_MASK: tl.constexpr):
    """The scaled scores of a [BLOCK_M, BLOCK_N] tile with position scores `bd` (blocked
    -1e30, keys past K -inf), the live entries (in range, not blocked: where the score's
    gradient flows) and the entries whose segments differ."""
    score = tl.dot(q, tl.trans(kt), input_precision="ieee") + bd
    inside = row_ok[:, None] & col_ok[None, :]
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
    return score, live, differ


def _row_at(b, head, rows, S: tl.constexpr, N: tl.constexpr, H: tl.constexpr):
    """Where rows `rows` of (example b, `head`) lie in a [B,S,N,H] buffer: [BLOCK_M, H]."""
    return ((b * S + rows) * N + head)[:, None] * H + tl.arange(0, H)[None, :]


def _rows_of(ptr, b, head, rows, row_ok, S: tl.constexpr, N: tl.constexpr, H: tl.constexpr,
             DOT_F32: tl.constexpr):
    """Rows `rows` of (example b, `head`) of a [B,S,N,H] buffer: [BLOCK_M, H]."""
    x = tl.load(ptr + _row_at(b, head, rows, S, N, H), mask=row_ok[:, None], other=0)
    if DOT_F32:  # the CPU interpreter multiplies 16-bit floats' bit patterns in tl.dot (#11584)
        x = x.to(tl.float32)
    return x


def _queries(q_ptr, r_w_ptr, r_r_ptr, b, head, rows, row_ok, S: tl.constexpr, N: tl.constexpr,
             H: tl.constexpr, DOT_F32: tl.constexpr):
    """q + r_w and q + r_r of rows `rows`: [BLOCK_M, H] each, rounded to q's dtype as the
    reference's sums are (added in float32: the CPU interpreter adds 16-bit floats' bits)."""
    q = tl.load(q_ptr + _row_at(b, head, rows, S, N, H), mask=row_ok[:, None], other=0)
    hs = tl.arange(0, H)
    wide = q.to(tl.float32)
    q_w = (wide + tl.load(r_w_ptr + head * H + hs).to(tl.float32)[None, :]).to(q.dtype)
    q_r = (wide + tl.load(r_r_ptr + head * H + hs).to(tl.float32)[None, :]).to(q.dtype)
    if DOT_F32:
        q_w = q_w.to(tl.float32)
        q_r = q_r.to(tl.float32)
    return q_w, q_r


def _key_tile(k_ptr, v_ptr, b, head, cols, col_ok, K: tl.constexpr, N: tl.constexpr,
              H: tl.constexpr, DOT_F32: tl.constexpr):
    """Keys and values of a key tile of ([B,K,N,H]) k and v: [BLOCK_N, H] each."""
    kv_at = _row_at(b, head, cols, K, N, H)
    kt = tl.load(k_ptr + kv_at, mask=col_ok[:, None], other=0)
    vt = tl.load(v_ptr + kv_at, mask=col_ok[:, None], other=0)
    if DOT_F32:
        kt = kt.to(tl.float32)
        vt = vt.to(tl.float32)
    return kt, vt


def _k_r_base(k_r_ptr, b, head, B: tl.constexpr, N: tl.constexpr, T: tl.constexpr,
              H: tl.constexpr, X: tl.constexpr):
    """k_r's [T, H] of example b's direction group and `head`."""
    return k_r_ptr + ((b // (B // X)) * N + head) * T * H


def flash_fwd(q_ptr, r_w_ptr, r_r_ptr, k_ptr, v_ptr, k_r_ptr, row_pos_ptr, row_order_ptr,
              seg_ptr, row_seg_ptr, key_seg_ptr, blocked_bits_ptr, k0s_ptr, k1_ptr, out_ptr,
              lse_ptr,
              B: tl.constexpr, N: tl.constexpr, S: tl.constexpr, K: tl.constexpr,
              H: tl.constexpr, T: tl.constexpr, L: tl.constexpr, X: tl.constexpr,
              SPLIT: tl.constexpr, W: tl.constexpr, SCALE: tl.constexpr,
              THRESHOLD: tl.constexpr, KEEP_SCALE: tl.constexpr, HAS_SEGMENT: tl.constexpr,
              HAS_MASK: tl.constexpr, HAS_DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, DOT_F32: tl.constexpr):
    """out [B,S,N,H] and lse [B,N,S] of one tile of BLOCK_M rows of one (example, head)."""
    bh = tl.program_id(1)
    b = bh // N
    head = bh % N
    rows, row_ok, start, first, panels = _tile_rows(
        b, tl.program_id(0) * BLOCK_M, row_order_ptr, row_pos_ptr, S, L, BLOCK_M, BLOCK_N)
    q, qr = _queries(q_ptr, r_w_ptr, r_r_ptr, b, head, rows, row_ok, S, N, H, DOT_F32)
    seg_same, seg_diff, rseg, key_term, key_mix, n_base = _row_context(
        b, head, rows, row_ok, seg_ptr, row_seg_ptr, k0s_ptr, k1_ptr, N, S, K, SPLIT,
        HAS_SEGMENT, HAS_DROPOUT)
    k_r_base = _k_r_base(k_r_ptr, b, head, B, N, T, H, X)
    offset = start - first
    g_low = tl.dot(qr, tl.trans(_k_r_panel(k_r_base, first, T, H, BLOCK_N, DOT_F32)),
                   input_precision="ieee")
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.full([BLOCK_M], 0, tl.float32)
    acc = tl.full([BLOCK_M, H], 0, tl.float32)
    for key_start in range(0, K, BLOCK_N):
        cols = key_start + tl.arange(0, BLOCK_N)
        col_ok = cols < K
        kt, vt = _key_tile(k_ptr, v_ptr, b, head, cols, col_ok, K, N, H, DOT_F32)
        bd, g_low, _ = _position_scores(qr, k_r_base, first, key_start, offset, panels, g_low,
                                        T, H, BLOCK_N, DOT_F32)
        score, live, differ = _scores(q, kt, bd, b, rows, row_ok, cols, col_ok, seg_same,
                                      seg_diff, rseg, key_seg_ptr, blocked_bits_ptr, S, K, W,
                                      SCALE, HAS_SEGMENT, HAS_MASK)
        m_new = tl.maximum(m_i, _row_max(score, 1))
        p = tl.exp(score - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + _row_sum(p, 1)
        if HAS_DROPOUT:
            p = tl.where(_keep(cols, key_term, key_mix, n_base, THRESHOLD), p, 0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt, input_precision="ieee")
        m_i = m_new
    out = acc * (KEEP_SCALE / l_i)[:, None]
    tl.store(out_ptr + _row_at(b, head, rows, S, N, H), out.to(out_ptr.dtype.element_ty),
             mask=row_ok[:, None])
    tl.store(lse_ptr + bh * S + rows, m_i + tl.log(l_i), mask=row_ok)


def _row_tile(b, head, bh, row_start, q_ptr, r_w_ptr, r_r_ptr, out_ptr, d_out_ptr, lse_ptr,
              row_order_ptr, row_pos_ptr, seg_ptr, row_seg_ptr, k0s_ptr, k1_ptr,
              N: tl.constexpr, S: tl.constexpr, K: tl.constexpr, H: tl.constexpr,
              L: tl.constexpr, SPLIT: tl.constexpr, HAS_SEGMENT: tl.constexpr,
              HAS_DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              DOT_F32: tl.constexpr):
    """What a backward step needs of row tile `row_start`: `_tile_rows`' values, q + r_w,
    q + r_r, d_out, lse, delta = rowsum(d_out * out), and `_row_context`'s values."""
    rows, row_ok, start, first, panels = _tile_rows(b, row_start, row_order_ptr, row_pos_ptr,
                                                    S, L, BLOCK_M, BLOCK_N)
    q, qr = _queries(q_ptr, r_w_ptr, r_r_ptr, b, head, rows, row_ok, S, N, H, DOT_F32)
    d_out = _rows_of(d_out_ptr, b, head, rows, row_ok, S, N, H, False)
    out = _rows_of(out_ptr, b, head, rows, row_ok, S, N, H, False)
    delta = _row_sum(d_out.to(tl.float32) * out.to(tl.float32), 1)
    lse = tl.load(lse_ptr + bh * S + rows, mask=row_ok, other=0)
    if DOT_F32:
        d_out = d_out.to(tl.float32)
    seg_same, seg_diff, rseg, key_term, key_mix, n_base = _row_context(
        b, head, rows, row_ok, seg_ptr, row_seg_ptr, k0s_ptr, k1_ptr, N, S, K, SPLIT,
        HAS_SEGMENT, HAS_DROPOUT)
    return (rows, row_ok, start, first, panels, q, qr, d_out, lse, delta, seg_same, seg_diff,
            rseg, key_term, key_mix, n_base)


def _score_grad(q, kt, vt, bd, d_out, lse, delta, b, rows, row_ok, cols, col_ok, seg_same,
                seg_diff, rseg, key_term, key_mix, n_base, key_seg_ptr, blocked_bits_ptr,
                S: tl.constexpr, K: tl.constexpr, W: tl.constexpr, SCALE: tl.constexpr,
                THRESHOLD: tl.constexpr, KEEP_SCALE: tl.constexpr, HAS_SEGMENT: tl.constexpr,
                HAS_MASK: tl.constexpr, HAS_DROPOUT: tl.constexpr):
    """Recomputed dropped probabilities p_drop and the gradient of the pre-scale score sum
    (ds: d loss / d(ac + bd + ef), zero where blocked) of a tile, with the tile's segment
    mismatch."""
    score, live, differ = _scores(q, kt, bd, b, rows, row_ok, cols, col_ok, seg_same, seg_diff,
                                  rseg, key_seg_ptr, blocked_bits_ptr, S, K, W, SCALE,
                                  HAS_SEGMENT, HAS_MASK)
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
    return p_drop, ds, differ


def flash_bwd_dkdv(q_ptr, r_w_ptr, r_r_ptr, k_ptr, v_ptr, k_r_ptr, row_pos_ptr, row_order_ptr,
                   seg_ptr, row_seg_ptr, key_seg_ptr, blocked_bits_ptr, k0s_ptr, k1_ptr,
                   out_ptr, lse_ptr, d_out_ptr, dk_ptr, dv_ptr,
                   B: tl.constexpr, N: tl.constexpr, S: tl.constexpr, K: tl.constexpr,
                   H: tl.constexpr, T: tl.constexpr, L: tl.constexpr, X: tl.constexpr,
                   SPLIT: tl.constexpr, W: tl.constexpr, SCALE: tl.constexpr,
                   THRESHOLD: tl.constexpr, KEEP_SCALE: tl.constexpr,
                   HAS_SEGMENT: tl.constexpr, HAS_MASK: tl.constexpr,
                   HAS_DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   DOT_F32: tl.constexpr):
    """dk, dv [B,K,N,H] of one tile of BLOCK_N keys of one (example, head), over all S rows."""
    bh = tl.program_id(1)
    b = bh // N
    head = bh % N
    key_start = tl.program_id(0) * BLOCK_N
    cols = key_start + tl.arange(0, BLOCK_N)
    col_ok = cols < K
    kt, vt = _key_tile(k_ptr, v_ptr, b, head, cols, col_ok, K, N, H, DOT_F32)
    k_r_base = _k_r_base(k_r_ptr, b, head, B, N, T, H, X)
    dk = tl.full([BLOCK_N, H], 0, tl.float32)
    dv = tl.full([BLOCK_N, H], 0, tl.float32)
    for row_start in range(0, S, BLOCK_M):
        (rows, row_ok, start, first, panels, q, qr, d_out, lse, delta, seg_same, seg_diff, rseg,
         key_term, key_mix, n_base) = _row_tile(
            b, head, bh, row_start, q_ptr, r_w_ptr, r_r_ptr, out_ptr, d_out_ptr, lse_ptr,
            row_order_ptr, row_pos_ptr, seg_ptr, row_seg_ptr, k0s_ptr, k1_ptr, N, S, K, H, L,
            SPLIT, HAS_SEGMENT, HAS_DROPOUT, BLOCK_M, BLOCK_N, DOT_F32)
        g_low = tl.dot(qr, tl.trans(_k_r_panel(k_r_base, first + key_start, T, H, BLOCK_N,
                                               DOT_F32)), input_precision="ieee")
        bd, _, _ = _position_scores(qr, k_r_base, first, key_start, start - first, panels,
                                    g_low, T, H, BLOCK_N, DOT_F32)
        p_drop, ds, differ = _score_grad(
            q, kt, vt, bd, d_out, lse, delta, b, rows, row_ok, cols, col_ok, seg_same,
            seg_diff, rseg, key_term, key_mix, n_base, key_seg_ptr, blocked_bits_ptr, S, K, W,
            SCALE, THRESHOLD, KEEP_SCALE, HAS_SEGMENT, HAS_MASK, HAS_DROPOUT)
        dv += tl.dot(tl.trans(p_drop.to(d_out.dtype)), d_out, input_precision="ieee")
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision="ieee")
    kv_at = _row_at(b, head, cols, K, N, H)
    tl.store(dk_ptr + kv_at, dk.to(dk_ptr.dtype.element_ty), mask=col_ok[:, None])
    tl.store(dv_ptr + kv_at, dv.to(dv_ptr.dtype.element_ty), mask=col_ok[:, None])


def _add_panel(d_k_r_base, first_row, grad, T: tl.constexpr, H: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """Adds grad [BLOCK_N, H] to rows first_row + [0, BLOCK_N) of a program's own float32
    [T, H] slice (rows past T dropped). The barrier first: the stores before it, by any
    thread of the program, are then what the loads read."""
    t = first_row + tl.arange(0, BLOCK_N)
    hs = tl.arange(0, H)
    at = d_k_r_base + t[:, None] * H + hs[None, :]
    ok = ((t >= 0) & (t < T))[:, None]
    tl.debug_barrier()
    tl.store(at, tl.load(at, mask=ok, other=0) + grad, mask=ok)


def flash_bwd_dq(q_ptr, r_w_ptr, r_r_ptr, k_ptr, v_ptr, k_r_ptr, row_pos_ptr, row_order_ptr,
                 seg_ptr, row_seg_ptr, key_seg_ptr, blocked_bits_ptr, k0s_ptr, k1_ptr, out_ptr,
                 lse_ptr, d_out_ptr, dq_ptr, d_r_w_ptr, d_r_r_ptr, d_seg_ptr, dk_r_ptr,
                 B: tl.constexpr, N: tl.constexpr, S: tl.constexpr, K: tl.constexpr,
                 H: tl.constexpr, T: tl.constexpr, L: tl.constexpr, X: tl.constexpr,
                 SPLIT: tl.constexpr, W: tl.constexpr, SCALE: tl.constexpr,
                 THRESHOLD: tl.constexpr, KEEP_SCALE: tl.constexpr, HAS_SEGMENT: tl.constexpr,
                 HAS_MASK: tl.constexpr, HAS_DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, DOT_F32: tl.constexpr):
    """dq [B,S,N,H] (through q + r_w and q + r_r) and d_seg [B,N,S,2] of every row of one
    (example, head), and its sums over the rows: the gradients of r_w and r_r, d_r_w and
    d_r_r [B,N,H] float32, and of k_r, dk_r [B,N,T,H] float32."""
    bh = tl.program_id(1)
    b = bh // N
    head = bh % N
    hs = tl.arange(0, H)
    k_r_base = _k_r_base(k_r_ptr, b, head, B, N, T, H, X)
    d_k_r_base = dk_r_ptr + bh * T * H
    d_r_w = tl.full([H], 0, tl.float32)
    d_r_r = tl.full([H], 0, tl.float32)
    for t_start in range(0, T, BLOCK_N):
        t = t_start + tl.arange(0, BLOCK_N)
        tl.store(d_k_r_base + t[:, None] * H + hs[None, :],
                 tl.full([BLOCK_N, H], 0, tl.float32), mask=(t < T)[:, None])
    for row_start in range(0, S, BLOCK_M):
        (rows, row_ok, start, first, panels, q, qr, d_out, lse, delta, seg_same, seg_diff, rseg,
         key_term, key_mix, n_base) = _row_tile(
            b, head, bh, row_start, q_ptr, r_w_ptr, r_r_ptr, out_ptr, d_out_ptr, lse_ptr,
            row_order_ptr, row_pos_ptr, seg_ptr, row_seg_ptr, k0s_ptr, k1_ptr, N, S, K, H, L,
            SPLIT, HAS_SEGMENT, HAS_DROPOUT, BLOCK_M, BLOCK_N, DOT_F32)
        offset = start - first
        k_r_low = _k_r_panel(k_r_base, first, T, H, BLOCK_N, DOT_F32)
        g_low = tl.dot(qr, tl.trans(k_r_low), input_precision="ieee")
        dg_carried = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)  # panel 1 of the last step
        dq = tl.full([BLOCK_M, H], 0, tl.float32)
        dq_r = tl.full([BLOCK_M, H], 0, tl.float32)
        d_same = tl.full([BLOCK_M], 0, tl.float32)
        d_diff = tl.full([BLOCK_M], 0, tl.float32)
        for key_start in range(0, K, BLOCK_N):
            cols = key_start + tl.arange(0, BLOCK_N)
            col_ok = cols < K
            kt, vt = _key_tile(k_ptr, v_ptr, b, head, cols, col_ok, K, N, H, DOT_F32)
            bd, g_high, k_r_high = _position_scores(qr, k_r_base, first, key_start, offset,
                                                    panels, g_low, T, H, BLOCK_N, DOT_F32)
            p_drop, ds, differ = _score_grad(
                q, kt, vt, bd, d_out, lse, delta, b, rows, row_ok, cols, col_ok, seg_same,
                seg_diff, rseg, key_term, key_mix, n_base, key_seg_ptr, blocked_bits_ptr, S,
                K, W, SCALE, THRESHOLD, KEEP_SCALE, HAS_SEGMENT, HAS_MASK, HAS_DROPOUT)
            dq += tl.dot(ds.to(kt.dtype), kt, input_precision="ieee")
            if HAS_SEGMENT:
                d_diff += _row_sum(tl.where(differ, ds, 0.0), 1)
                d_same += _row_sum(tl.where(differ, 0.0, ds), 1)
            # Panel 0 is finished: its gradient from this key tile and (as panel 1) the last.
            dg = _unshifted(ds, offset, 0, BLOCK_N) + dg_carried
            dg_carried = _unshifted(ds, offset, BLOCK_N, BLOCK_N)
            dq_r += tl.dot(dg.to(k_r_low.dtype), k_r_low, input_precision="ieee")
            _add_panel(d_k_r_base, first + key_start,
                       tl.dot(tl.trans(dg.to(qr.dtype)), qr, input_precision="ieee"), T, H,
                       BLOCK_N)
            for c in range(2, panels):  # rows that spread over BLOCK_N positions or more
                panel = _k_r_panel(k_r_base, first + key_start + c * BLOCK_N, T, H, BLOCK_N,
                                   DOT_F32)
                dg_c = _unshifted(ds, offset - c * BLOCK_N, 0, BLOCK_N)
                dq_r += tl.dot(dg_c.to(panel.dtype), panel, input_precision="ieee")
                _add_panel(d_k_r_base, first + key_start + c * BLOCK_N,
                           tl.dot(tl.trans(dg_c.to(qr.dtype)), qr, input_precision="ieee"),
                           T, H, BLOCK_N)
            g_low = g_high
            k_r_low = k_r_high
        # The last key tile's panel 1, finished.
        dq_r += tl.dot(dg_carried.to(k_r_low.dtype), k_r_low, input_precision="ieee")
        _add_panel(d_k_r_base, first + ((K + BLOCK_N - 1) // BLOCK_N) * BLOCK_N,
                   tl.dot(tl.trans(dg_carried.to(qr.dtype)), qr, input_precision="ieee"), T, H,
                   BLOCK_N)
        tl.store(dq_ptr + _row_at(b, head, rows, S, N, H),
                 (dq + dq_r).to(dq_ptr.dtype.element_ty), mask=row_ok[:, None])
        d_r_w += _row_sum(dq, 0)
        d_r_r += _row_sum(dq_r, 0)
        if HAS_SEGMENT:
            d_seg_at = (bh * S + rows) * 2
            tl.store(d_seg_ptr + d_seg_at, d_same.to(d_seg_ptr.dtype.element_ty), mask=row_ok)
            tl.store(d_seg_ptr + d_seg_at + 1, d_diff.to(d_seg_ptr.dtype.element_ty),
                     mask=row_ok)
    tl.store(d_r_w_ptr + bh * H + hs, d_r_w)
    tl.store(d_r_r_ptr + bh * H + hs, d_r_r)


KERNEL_NAMES = ("flash_fwd", "flash_bwd_dkdv", "flash_bwd_dq")
_TRITON_FUNCTIONS = (_fmix32, _add, _larger, _smaller, _row_sum, _row_max, _tile_rows,
                     _row_context, _keep, _k_r_panel, _shifted, _unshifted, _position_scores,
                     _scores, _row_at, _rows_of, _queries, _key_tile, _k_r_base, flash_fwd,
                     _row_tile,
                     _score_grad, flash_bwd_dkdv, _add_panel, flash_bwd_dq)
# Matrix FLOPs of each kernel per B * N * S * K * H (the module docstring).
MATRIX_FLOPS = {"flash_fwd": 6, "flash_bwd_dkdv": 12, "flash_bwd_dq": 12}


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
                     _GOLDEN=tl.constexpr(_GOLDEN), _KEY_MULTIPLIER=tl.constexpr(_KEY_MULTIPLIER),
                     _FAR=tl.constexpr(_FAR))
    for fn in _TRITON_FUNCTIONS:
        bound = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__)
        bound.__annotations__ = dict(fn.__annotations__)
        bound.__doc__, bound.__module__, bound.__qualname__ = fn.__doc__, __name__, fn.__qualname__
        namespace[fn.__name__] = InterpretedFunction(bound) if interpret else triton.jit(bound)
    return {name: namespace[name] for name in KERNEL_NAMES}


# Every kernel's pointer parameters in signature order, and the flag that drops each optional
# one (passed as None when its flag is off). The first names are operands, the rest results.
_OPERANDS = ("q", "r_w", "r_r", "k", "v", "k_r", "row_pos", "row_order", "seg", "row_seg",
             "key_seg", "blocked_bits", "k0s", "k1")
_RESULTS = {"flash_fwd": ("out", "lse"),
            "flash_bwd_dkdv": ("dk", "dv"),
            "flash_bwd_dq": ("dq", "d_r_w", "d_r_r", "d_seg", "dk_r")}
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
           distances: int, seq_len: int, groups: int = 1, split: Optional[int] = None,
           scale: float, dropout_rate: float = 0.0, has_segment: bool, has_mask: bool,
           dtype: str, generation: str, interpret: bool = False,
           block: Optional[Tuple[int, int]] = None) -> Launch:
    """The launch of kernel `name` ("flash_fwd", "flash_bwd_dkdv", "flash_bwd_dq") for one
    attention: `batch` B, `heads` N, `rows` S (= L content rows + P query-stream rows),
    `keys` K, `head_size` H (a power of two, >= 16), `distances` T, `seq_len` L, `groups` X
    (k_r's direction groups; B a multiple of X), `split` the rows of the first dropout part
    (None: one part), `dtype` of the float operands, `generation` "sm_80" or "sm_90".
    `interpret`: Triton's CPU interpreter (16-bit dots in float32); `block`: (BLOCK_M,
    BLOCK_N) instead of the generation's (tests)."""
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
    if groups < 1 or batch % groups:
        raise ValueError(f"flash attention: {groups} direction groups do not divide the batch "
                         f"of {batch}")
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
        B=batch, N=heads, S=rows, K=keys, H=head_size, T=distances, L=seq_len, X=groups,
        SPLIT=rows if split is None else split, W=-(-keys // 32), SCALE=float(scale),
        THRESHOLD=dropout_threshold(dropout_rate) if has_dropout else 0,
        KEEP_SCALE=1.0 / (1.0 - dropout_rate), BLOCK_M=block_m, BLOCK_N=block_n,
        DOT_F32=interpret and dtype != "float32", **flags)
    tiles = {"flash_fwd": -(-rows // block_m), "flash_bwd_dkdv": -(-keys // block_n),
             "flash_bwd_dq": 1}[name]
    n_operands = len([p for p in used if p not in _RESULTS[name]])
    return Launch(name=name, kernel=kernels(interpret)[name], operands=used[:n_operands],
                  results=used[n_operands:], constexprs=constexprs,
                  grid=(tiles, batch * heads, 1), num_warps=num_warps, num_stages=num_stages)
