"""Flash two-stream relative attention for the TPU as Pallas kernels (JAX), forward and
backward: XLNet's attention of the L content rows and the P query-stream rows over K = M + L
keys in one kernel, with the position scores computed and shifted in VMEM. The formulas are
the project's reference attention (layers/xlnet_block.py: RelativeAttention's scores,
`reference_attention`):

    score[s, j] = ((q_w[s] . k[j]) + (q_r[s] . k_r[u(s, j)]) + seg[s, row_seg[s] != key_seg[j]])
                  * scale,  blocked -> -1e30
    p = softmax(score),  p_drop = p * keep / (1 - rate)  (keep: layers/dropout.py's hash),
    out[s] = sum_j p_drop[s, j] v[j]

where q_w = q + r_w, q_r = q + r_r, and k_r = the (dropped-out) position embedding's projection
[T, H] of the row's direction group; row s at position i of the example reads distance
M + i - j, index t = L - i + j of k_r.

Operands (`Geometry` fixes every size; the TF side, kernels/pallas_attention.py, prepares them):
  keys    int32 [4 B] (scalar prefetch, SMEM): per row part (content, query stream) and example
          the dropout hash's key term k0 * 0x85EBCA77 + k1 and key mix fmix32(k1 ^ fmix32(k0)).
  q_w, q_r  [B, N, Sp, H]: the Lp (= L rounded up to BQ) content rows, then the Pp query rows.
  k, v    [B, N, Kp, H] (K rounded up to BK; the keys past K are never attended).
  k_r     [X, N, Tp, H], Tp = Lp + Kp: row u = t + Lp - L (zeros outside the T encoded rows).
  seg     [B, N, 2, Sp] float32: (q + r_s) . seg_embed[c], c = 0 same segment, 1 different.
  rows    int32 [B, 2, Sp]: each row's position in the example (content rows 0 .. Lp - 1) and
          segment id.
  key_seg int32 [B, 1, Kp]: the keys' segment ids (memory keys 0).
  bits    int32 [B, 8 Sp / BQ, Kp]: the blocked mask bit-packed along rows: row 8 k + w of query
          tile t is bit k of word [8 t + w, key] (BQ / 8 <= 32 bits used), so a tile's words are
          one [8, BK] vreg-shaped block, unpacked with a sublane tile and a shift.
Results: forward out [B, N, Sp, H] and lse [B, N, 1, Sp] (float32, each row's log-sum-exp,
lane-dense); backward dq_w, dq_r [B, N, Sp, H], dk, dv [B, N, Kp, H], dk_r [X, N, Tp, H] and
d_seg [B, N, 2, Sp] (float32: the gradients of the scalars above).

Kernels (one pallas_call each; `forward_call`, `backward_call`):
  forward   grid (N, B), both parallel: one program per (head, example). The program's operands
            stay in VMEM (at XLNet-Base: q_w, q_r 80 KB each, k, v 112 KB, k_r 176 KB in bf16,
            double-buffered by the pipeline across programs). Per query tile of BQ rows:
            the position scores of its rows against the band of k_r they need, on the MXU:
            BQ + Kp rows for a content tile (row r needs u0 + BQ - r + j), Lp + Kp for a
            query-stream tile (rows at any positions); then row r shifted left by its offset
            in VMEM: content tiles by BQ - r with one strided rotate
            (`pltpu.roll(stride=1, stride_axis=0)`, TPU v5 and newer), query tiles (and content
            tiles on a v4, `generation`) by lane gathers within each vreg and selects of the
            row's source vreg (`_shift_rows`). The aligned [BQ, Kp] position scores live in a
            VMEM scratch; the T-wide scores never reach HBM. Then the online softmax over key
            tiles of BK: ac = q_w . k on the MXU, + the position scores' tile, + the segment
            scalar of each (row, key) (ids compared), * scale, blocked bits -> -1e30; the
            dropout keep bits hashed from (row, key) exactly as layers/dropout.py's mask over
            [B, N, rows of the part, K]. Writes out and lse.
  backward  grid (N, B), B arbitrary (dk_r of a direction group accumulates over its
            examples in the resident output block). FlashAttention-2's recomputation: per query
            tile the position scores again (product and shift), per key tile the scores and
            p = exp(score - lse), dp = d_out . v, ds = p (dp - delta) (delta = rowsum(d_out *
            out), computed here); dq_w += ds . k, dk += ds^T q_w and dv += p_drop^T d_out in
            VMEM accumulators, the segment scalars' gradients as row sums of ds split by
            segment mismatch; ds of the whole row tile is kept [BQ, Kp] in VMEM, shifted back
            (right, by lane gathers) into the band's columns, and dq_r = ds_band . band,
            dk_r[band] += ds_band^T q_r on the MXU.

FLOPs (`flops`; MXU, 2 per multiply-add) per (example, head) with S = Sp rows in tiles of BQ:
forward 2 H (2 S Kp + sum over tiles of BQ x band); backward 2 H (5 S Kp + 3 sum of
BQ x band). Bytes (`bytes_accessed`): each operand and result once per program, k_r and dk_r
once per (head, example) as read. A row whose keys are all blocked gets the reference's
uniform 1 / K (its lse rounds to -1e30 in float32, which the backward tests for).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Dict, Tuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCKED_SCORE = -1e30   # the reference's blocked score (layers/xlnet_block.py)
# layers/dropout.py's hash multipliers, as int32 (the products wrap as uint32's do).
_GOLDEN = 0x9E3779B9 - 2 ** 32
_MIX_1 = 0x85EBCA6B - 2 ** 32
_MIX_2 = 0xC2B2AE35 - 2 ** 32
_SIGN = -(2 ** 31)
# TPU generations (layers/step_plan.py's TPU_GENERATIONS) whose rotate takes a stride (row r
# by shift + r lanes); v4's has none.
STRIDED_ROTATE_GENERATIONS = ("v5e", "v5p", "v6e")


@dataclasses.dataclass(frozen=True)
class Geometry:
    """The static sizes and settings of one attention.

    batch B, heads N, head_size H, seq_len L (content rows), query_rows P (query-stream rows,
    0 without a query stream), keys K, distances T (k_r's encoded rows), groups X (direction
    groups of the batch: 1, or 2 with bi_data), scale, dropout_rate (0: no dropout),
    has_segment, has_mask, dtype ("bfloat16" or "float32"), generation (a TPU generation),
    block_q BQ and block_k BK (multiples of 128 on a TPU; any size in interpret mode).
    """
    batch: int
    heads: int
    head_size: int
    seq_len: int
    query_rows: int
    keys: int
    distances: int
    groups: int
    scale: float
    dropout_rate: float
    has_segment: bool
    has_mask: bool
    dtype: str = "bfloat16"
    generation: str = "v5e"
    block_q: int = 128
    block_k: int = 128

    def __post_init__(self):
        if self.generation not in STRIDED_ROTATE_GENERATIONS + ("v4",):
            raise ValueError(f"Pallas attention TPU generation {self.generation!r}: one of "
                             f"{', '.join(STRIDED_ROTATE_GENERATIONS)}, v4")
        if self.block_q % 8 or self.block_q // 8 > 32:
            raise ValueError(f"Pallas attention block_q {self.block_q}: a multiple of 8, at "
                             "most 256")
        if self.batch % self.groups:
            raise ValueError(f"{self.groups} direction groups do not split a batch of "
                             f"{self.batch}")
        if not 0.0 <= self.dropout_rate < 1.0:
            raise ValueError(f"Pallas attention dropout rate {self.dropout_rate}: in [0, 1)")

    # padded sizes
    @property
    def content_rows(self) -> int:  # Lp
        return _round_up(self.seq_len, self.block_q)

    @property
    def query_stream_rows(self) -> int:  # Pp
        return _round_up(self.query_rows, self.block_q)

    @property
    def rows(self) -> int:  # Sp
        return self.content_rows + self.query_stream_rows

    @property
    def padded_keys(self) -> int:  # Kp
        return _round_up(self.keys, self.block_k)

    @property
    def padded_distances(self) -> int:  # Tp
        return self.content_rows + self.padded_keys

    @property
    def has_dropout(self) -> bool:
        return self.dropout_rate > 0.0

    @property
    def threshold(self) -> int:
        """layers/dropout.py's keep threshold (bits >= it are kept), as uint32."""
        return min(int(round(self.dropout_rate * 2.0 ** 32)), 2 ** 32 - 1)

    @property
    def content_band(self) -> int:
        return self.block_q + self.padded_keys

    @property
    def query_band(self) -> int:
        return self.padded_distances

    @property
    def lanes(self) -> int:
        """The column width the row shifts gather in: a vreg's 128 lanes on a TPU (the tiles
        are multiples of 128), the tiles' common power-of-two divisor in interpret mode."""
        common = math.gcd(self.block_q, self.block_k, 128)
        return common & -common

    @property
    def jnp_dtype(self):
        return jnp.dtype(self.dtype)


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


# ------------------------------------------------------------------------------ operands
def operand_names(g: Geometry, backward: bool = False) -> Tuple[str, ...]:
    """The kernel's array operands in order (after the scalar-prefetched `keys`)."""
    names = ["q_w", "q_r", "k", "v", "k_r", "rows"]
    if g.has_segment:
        names += ["seg", "key_seg"]
    if g.has_mask:
        names.append("bits")
    if backward:
        names += ["out", "lse", "d_out"]
    return tuple(names)


def result_names(g: Geometry, backward: bool = False) -> Tuple[str, ...]:
    if not backward:
        return ("out", "lse")
    return ("dq_w", "dq_r", "dk", "dv", "dk_r") + (("d_seg",) if g.has_segment else ())


def shapes(g: Geometry) -> Dict[str, Tuple[Tuple[int, ...], object]]:
    """Every operand's and result's (shape, dtype)."""
    b, n, h, s, k, t = g.batch, g.heads, g.head_size, g.rows, g.padded_keys, g.padded_distances
    x, dt, f32, i32 = g.groups, g.jnp_dtype, jnp.float32, jnp.int32
    return {"keys": ((4 * b,), i32), "q_w": ((b, n, s, h), dt), "q_r": ((b, n, s, h), dt),
            "k": ((b, n, k, h), dt), "v": ((b, n, k, h), dt), "k_r": ((x, n, t, h), dt),
            "rows": ((b, 2, s), i32), "seg": ((b, n, 2, s), f32), "key_seg": ((b, 1, k), i32),
            "bits": ((b, 8 * s // g.block_q, k), i32), "out": ((b, n, s, h), dt),
            "lse": ((b, n, 1, s), f32), "d_out": ((b, n, s, h), dt),
            "dq_w": ((b, n, s, h), dt), "dq_r": ((b, n, s, h), dt), "dk": ((b, n, k, h), dt),
            "dv": ((b, n, k, h), dt), "dk_r": ((x, n, t, h), f32), "d_seg": ((b, n, 2, s), f32)}


def _block_specs(g: Geometry, names):
    """Each array's block: the whole (example, head) slice, indexed by the grid (n, b)."""
    per_group = g.batch // g.groups
    s, k, t, h = g.rows, g.padded_keys, g.padded_distances, g.head_size
    spec = {
        "q_w": ((None, None, s, h), lambda n, b, keys: (b, n, 0, 0)),
        "k": ((None, None, k, h), lambda n, b, keys: (b, n, 0, 0)),
        "k_r": ((None, None, t, h), lambda n, b, keys: (b // per_group, n, 0, 0)),
        "rows": ((None, 2, s), lambda n, b, keys: (b, 0, 0)),
        "seg": ((None, None, 2, s), lambda n, b, keys: (b, n, 0, 0)),
        "key_seg": ((None, 1, k), lambda n, b, keys: (b, 0, 0)),
        "bits": ((None, 8 * s // g.block_q, k), lambda n, b, keys: (b, 0, 0)),
        "lse": ((None, None, 1, s), lambda n, b, keys: (b, n, 0, 0)),
    }
    for alias, like in (("q_r", "q_w"), ("out", "q_w"), ("d_out", "q_w"), ("dq_w", "q_w"),
                        ("dq_r", "q_w"), ("v", "k"), ("dk", "k"), ("dv", "k"),
                        ("dk_r", "k_r"), ("d_seg", "seg")):
        spec[alias] = spec[like]
    return [pl.BlockSpec(*spec[name]) for name in names]


# ------------------------------------------------------------------------------ pieces
def _fmix32(h):
    """MurmurHash3's finalizer on int32 values (uint32 arithmetic: wrapping multiplies,
    logical shifts)."""
    h = h ^ jax.lax.shift_right_logical(h, jnp.int32(16))
    h = h * jnp.int32(_MIX_1)
    h = h ^ jax.lax.shift_right_logical(h, jnp.int32(13))
    h = h * jnp.int32(_MIX_2)
    return h ^ jax.lax.shift_right_logical(h, jnp.int32(16))


def _dot_nt(a, b):
    """a [M, C] . b [N, C]^T -> [M, N] float32 on the MXU."""
    return jax.lax.dot_general(a, b, (((1,), (1,)), ((), ())),
                               preferred_element_type=jnp.float32)


def _dot_tn(a, b):
    """a [C, M]^T . b [C, N] -> [M, N] float32."""
    return jax.lax.dot_general(a, b, (((0,), (0,)), ((), ())),
                               preferred_element_type=jnp.float32)


def _dot(a, b):
    return jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                               preferred_element_type=jnp.float32)


def _columns(*rows):
    """Lane vectors [1, R] (int32 or float32) -> the same values as sublane vectors [R, 1],
    by one transpose on the XLU for all of them (stacked, padded to 128 rows)."""
    width = rows[0].shape[1]
    as_int = [jax.lax.bitcast_convert_type(r, jnp.int32) if r.dtype != jnp.int32 else r
              for r in rows]
    stacked = jnp.concatenate(as_int + [jnp.zeros((128 - len(rows), width), jnp.int32)], axis=0)
    columns = jnp.transpose(stacked)                                      # [R, 128]
    return [columns[:, i:i + 1] if r.dtype == jnp.int32 else
            jax.lax.bitcast_convert_type(columns[:, i:i + 1], r.dtype)
            for i, r in enumerate(rows)]


def _rows(*columns):
    """Sublane vectors [R, 1] (float32) -> lane vectors [1, R], by one transpose."""
    height = columns[0].shape[0]
    stacked = jnp.concatenate(
        list(columns) + [jnp.zeros((height, 128 - len(columns)), jnp.float32)], axis=1)
    rows = jnp.transpose(stacked)                                         # [128, R]
    return [rows[i:i + 1, :] for i in range(len(columns))]


def _shift_rows(x, amount, most: int, width: int, lanes: int, left: bool):
    """Row r of x [R, W] shifted by amount[r] ([R, 1] int32 in [0, most]) lanes: left,
    out[r, c] = x[r, c + amount[r]], or right, out[r, c] = x[r, c - amount[r]] (0 where that
    is outside x), for c < `width`. By lane gathers (`jnp.take_along_axis`, one per vreg, on
    the XLU) inside each column of `lanes` lanes, the row's column chosen by selects: any
    amount per row, on every TPU generation, about one gather and most / lanes + 2 selects per
    vreg of the result (rotates and selects would take log2(most) rotates and selects of the
    whole array)."""
    columns = [x[:, i * lanes:(i + 1) * lanes] for i in range(x.shape[1] // lanes)]
    zero = jnp.zeros_like(columns[0])
    log_lanes = lanes.bit_length() - 1
    whole = jax.lax.shift_right_logical(amount, jnp.int32(log_lanes))       # [R, 1]
    part = amount & jnp.int32(lanes - 1)
    lane = jax.lax.broadcasted_iota(jnp.int32, (1, lanes), 1)
    index = (lane + part if left else lane - part) & jnp.int32(lanes - 1)  # [R, lanes]
    wraps = lane + part >= lanes if left else lane < part
    sign = 1 if left else -1

    def column(c):
        return columns[c] if 0 <= c < len(columns) else zero

    @functools.lru_cache(maxsize=None)
    def gathered(c):
        """Column c + sign * whole[r] of each row r, gathered at `index`."""
        source = column(c)
        for m in range(1, most // lanes + 1):
            source = jnp.where(whole == m, column(c + sign * m), source)
        return jnp.take_along_axis(source, jnp.broadcast_to(index, source.shape), axis=1)

    out = [jnp.where(wraps, gathered(c + sign), gathered(c)) for c in range(width // lanes)]
    return jnp.concatenate(out, axis=1)


# ------------------------------------------------------------------------------ the tiles
class _Tile:
    """What a query tile's rows need, read from the program's refs: its rows, their position
    scores (aligned [BQ, Kp] in the scratch), segment scalars and ids, dropout row terms."""

    def __init__(self, g: Geometry, refs: dict, keys_ref, program, start, query_stream: bool):
        self.g, self.refs, self.start, self.query_stream = g, refs, start, query_stream
        head, b = program
        bq = g.block_q
        self.rows = pl.ds(start, bq)
        # The rows' scalars as columns [BQ, 1], by one transpose: position, and segment id
        # and segment scalars with a segment term, and the lse in the backward kernel.
        wanted = [refs["rows"][0:1, self.rows]]
        if g.has_segment:
            wanted += [refs["rows"][1:2, self.rows], refs["seg"][0:1, self.rows],
                       refs["seg"][1:2, self.rows]]
        if "lse" in refs and "d_out" in refs:
            wanted.append(refs["lse"][:, self.rows])
        columns = _columns(*wanted)
        self.position = columns[0]
        if g.has_segment:
            self.row_seg, self.seg_same, self.seg_diff = columns[1:4]
        self.lse = columns[-1]
        # Row 8 k + w of the tile is bit k of its word w (the `bits` operand).
        self.mask_bit = jax.lax.shift_right_logical(
            jax.lax.broadcasted_iota(jnp.int32, (bq, 1), 0), jnp.int32(3))
        if g.has_dropout:
            part = 1 if query_stream else 0
            part_rows = g.query_rows if query_stream else g.seq_len
            first = start - g.content_rows if query_stream else start
            local = first + jax.lax.broadcasted_iota(jnp.int32, (bq, 1), 0)
            key_term = keys_ref[(2 * part) * g.batch + b]
            self.key_mix = keys_ref[(2 * part + 1) * g.batch + b]
            # n = (head * part_rows + local row) * K + key; n * GOLDEN + key term, by parts.
            self.row_term = ((head * part_rows + local) * g.keys) * jnp.int32(_GOLDEN) + key_term

    def position_band(self):
        """(first k_r row u0, band width W, each row's shift [BQ, 1] int32, the largest
        shift): row r reads k_r rows u0 + shift[r] + j for keys j."""
        g = self.g
        if self.query_stream:  # a row at position p reads u = Lp - p + j
            return 0, g.query_band, g.content_rows - self.position, g.content_rows
        # Row r of the tile (position start + r) reads u = Lp - start - r + j.
        amount = g.block_q - jax.lax.broadcasted_iota(jnp.int32, (g.block_q, 1), 0)
        start = pl.multiple_of(g.content_rows - g.block_q - self.start, g.block_q)
        return start, g.content_band, amount, g.block_q

    def position_scores(self, q_r):
        """The tile's position scores aligned with the keys [BQ, Kp] float32, the band of
        k_r they read [W, H] and each row's shift [BQ, 1]."""
        g = self.g
        start, width, amount, most = self.position_band()
        band = self.refs["k_r"][pl.ds(start, width), :]                    # [W, H]
        full = _dot_nt(q_r, band)                                          # [BQ, W]
        if not self.query_stream and g.generation in STRIDED_ROTATE_GENERATIONS:
            # Row r rotated right by (W - BQ) + r, i.e. left by BQ - r: one strided rotate.
            full = pltpu.roll(full, width - g.block_q, 1, stride=1, stride_axis=0)
            return full[:, :g.padded_keys], band, amount
        return _shift_rows(full, amount, most, g.padded_keys, g.lanes, left=True), band, amount

    def band_gradient(self, ds):
        """The position scores' gradient ds [BQ, Kp] shifted back into the band's columns:
        [BQ, W] (zero where a row reads no key)."""
        _, width, amount, most = self.position_band()
        return _shift_rows(ds, amount, most, width, self.g.lanes, left=False)

    def key_context(self, j0):
        """The tile's [BQ, BK] masks at key tile j0: valid keys, blocked, segment mismatch,
        and the dropout keep mask (None where absent)."""
        g = self.g
        bk, bq = g.block_k, g.block_q
        col = j0 + jax.lax.broadcasted_iota(jnp.int32, (1, bk), 1)          # [1, BK]
        # Keys past K exist only where K is not a whole number of key tiles.
        valid = col < g.keys if g.keys < g.padded_keys else None
        blocked = differ = keep = None
        if g.has_mask:
            first = pl.multiple_of(self.start // (bq // 8), 8)
            words = self.refs["bits"][pl.ds(first, 8), pl.ds(j0, bk)]       # [8, BK]
            words = jnp.concatenate([words] * (bq // 8), axis=0)            # [BQ, BK]
            blocked = (jax.lax.shift_right_logical(words, self.mask_bit) & 1) != 0
        if g.has_segment:
            key_seg = self.refs["key_seg"][:, pl.ds(j0, bk)]                # [1, BK]
            differ = self.row_seg != key_seg
        if g.has_dropout:
            h = _fmix32(self.row_term + col * jnp.int32(_GOLDEN))
            h = _fmix32(h ^ self.key_mix)
            # Unsigned h >= threshold, as signed compares of both with the sign bit flipped.
            keep = (h ^ jnp.int32(_SIGN)) >= jnp.int32(g.threshold + _SIGN)
        return valid, blocked, differ, keep

    def scores(self, q_w, k_tile, bd, context):
        """The scaled, blocked scores [BQ, BK] float32 (keys past K: -inf)."""
        g = self.g
        valid, blocked, differ, _ = context
        s = _dot_nt(q_w, k_tile) + bd
        if g.has_segment:
            s = s + jnp.where(differ, self.seg_diff, self.seg_same)
        s = s * g.scale
        if g.has_mask:
            s = jnp.where(blocked, BLOCKED_SCORE, s)
        return s if valid is None else jnp.where(valid, s, -jnp.inf)


def _tiles(g: Geometry):
    """(first tile, number of tiles, query_stream) of the content and query-stream tiles."""
    parts = [(0, g.content_rows // g.block_q, False)]
    if g.query_rows:
        parts.append((g.content_rows // g.block_q, g.query_stream_rows // g.block_q, True))
    return parts


# ------------------------------------------------------------------------------ forward
def _forward_kernel(g: Geometry, names, keys_ref, *refs):
    named = dict(zip(names, refs))
    out_ref, lse_ref, bd_ref = refs[len(names):]
    bq, bk = g.block_q, g.block_k
    keep_scale = 1.0 / (1.0 - g.dropout_rate)
    # (head, example), read here: the interpreter has them at the kernel's top level only.
    program = (pl.program_id(0), pl.program_id(1))

    for first, count, query_stream in _tiles(g):
        def tile_body(t, carry, first=first, query_stream=query_stream):
            start = pl.multiple_of((first + t) * bq, bq)
            tile = _Tile(g, named, keys_ref, program, start, query_stream)
            q_w = named["q_w"][tile.rows, :]
            bd_ref[...] = tile.position_scores(named["q_r"][tile.rows, :])[0]

            def key_body(kt, state):
                m, l, acc = state
                j0 = pl.multiple_of(kt * bk, bk)
                v_tile = named["v"][pl.ds(j0, bk), :]
                context = tile.key_context(j0)
                s = tile.scores(q_w, named["k"][pl.ds(j0, bk), :], bd_ref[:, pl.ds(j0, bk)],
                                context)
                m_new = jnp.maximum(m, jnp.max(s, axis=1, keepdims=True))
                alpha = jnp.exp(m - m_new)
                p = jnp.exp(s - m_new)
                l = alpha * l + jnp.sum(p, axis=1, keepdims=True)
                if g.has_dropout:
                    p = jnp.where(context[3], p, 0.0)
                return m_new, l, alpha * acc + _dot(p.astype(v_tile.dtype), v_tile)

            init = (jnp.full((bq, 1), -jnp.inf, jnp.float32), jnp.zeros((bq, 1), jnp.float32),
                    jnp.zeros((bq, g.head_size), jnp.float32))
            m, l, acc = jax.lax.fori_loop(0, g.padded_keys // bk, key_body, init)
            out_ref[tile.rows, :] = (acc * (keep_scale / l)).astype(out_ref.dtype)
            lse_ref[:, tile.rows] = _rows(m + jnp.log(l))[0]
            return carry

        jax.lax.fori_loop(0, count, tile_body, 0)


# ------------------------------------------------------------------------------ backward
def _backward_kernel(g: Geometry, names, keys_ref, *refs):
    named = dict(zip(names + result_names(g, backward=True), refs))
    bd_ref, ds_ref, dk_acc, dv_acc = refs[-4:]
    bq, bk, dt = g.block_q, g.block_k, g.jnp_dtype
    keep_scale = 1.0 / (1.0 - g.dropout_rate)
    dk_r_ref = named["dk_r"]
    program = (pl.program_id(0), pl.program_id(1))

    # dk_r of a direction group sums over its examples: zeroed at the group's first.
    @pl.when(program[1] % (g.batch // g.groups) == 0)
    def _():
        dk_r_ref[...] = jnp.zeros(dk_r_ref.shape, jnp.float32)

    dk_acc[...] = jnp.zeros(dk_acc.shape, jnp.float32)
    dv_acc[...] = jnp.zeros(dv_acc.shape, jnp.float32)

    for first, count, query_stream in _tiles(g):
        def tile_body(t, carry, first=first, query_stream=query_stream):
            start = pl.multiple_of((first + t) * bq, bq)
            tile = _Tile(g, named, keys_ref, program, start, query_stream)
            q_w = named["q_w"][tile.rows, :]
            q_r = named["q_r"][tile.rows, :]
            d_out = named["d_out"][tile.rows, :]
            out = named["out"][tile.rows, :]
            lse = tile.lse                                                      # [BQ, 1]
            delta = jnp.sum(d_out.astype(jnp.float32) * out.astype(jnp.float32), axis=1,
                            keepdims=True)
            # A row whose keys are all blocked: lse = -1e30 + log K rounds to -1e30; its
            # probabilities are the reference's uniform 1 / K.
            dead = lse < 0.5 * BLOCKED_SCORE
            bd, band, _ = tile.position_scores(q_r)
            bd_ref[...] = bd

            def key_body(kt, state):
                dq, d_same, d_diff = state
                j0 = pl.multiple_of(kt * bk, bk)
                keys = pl.ds(j0, bk)
                k_tile = named["k"][keys, :]
                v_tile = named["v"][keys, :]
                context = tile.key_context(j0)
                valid, blocked, differ, keep = context
                s = tile.scores(q_w, k_tile, bd_ref[:, keys], context)
                p = jnp.where(dead, 1.0 / g.keys, jnp.exp(s - lse))
                if valid is not None:
                    p = jnp.where(valid, p, 0.0)
                dp = _dot_nt(d_out, v_tile)
                p_drop = p
                if g.has_dropout:
                    p_drop = jnp.where(keep, p * keep_scale, 0.0)
                    dp = jnp.where(keep, dp * keep_scale, 0.0)
                # d loss / d (ac + bd + ef): the softmax's gradient, zero where blocked (and
                # at keys past K, where p is 0).
                ds = p * (dp - delta)
                if blocked is not None:
                    ds = jnp.where(blocked, 0.0, ds)
                ds = ds * g.scale
                dv_acc[keys, :] += _dot_tn(p_drop.astype(dt), d_out)
                dk_acc[keys, :] += _dot_tn(ds.astype(dt), q_w)
                ds_ref[:, keys] = ds
                if g.has_segment:
                    diff = jnp.where(differ, ds, 0.0)
                    d_diff = d_diff + jnp.sum(diff, axis=1, keepdims=True)
                    d_same = d_same + jnp.sum(ds - diff, axis=1, keepdims=True)
                return dq + _dot(ds.astype(dt), k_tile), d_same, d_diff

            zero_column = jnp.zeros((bq, 1), jnp.float32)
            dq, d_same, d_diff = jax.lax.fori_loop(
                0, g.padded_keys // bk, key_body,
                (jnp.zeros((bq, g.head_size), jnp.float32), zero_column, zero_column))
            # The position scores' gradient shifted back into the band's columns.
            start_u, width = tile.position_band()[:2]
            ds_band = tile.band_gradient(ds_ref[...]).astype(dt)
            named["dq_w"][tile.rows, :] = dq.astype(dt)
            named["dq_r"][tile.rows, :] = _dot(ds_band, band).astype(dt)
            dk_r_ref[pl.ds(start_u, width), :] += _dot_tn(ds_band, q_r)
            if g.has_segment:
                named["d_seg"][:, tile.rows] = jnp.concatenate(_rows(d_same, d_diff), axis=0)
            return carry

        jax.lax.fori_loop(0, count, tile_body, 0)

    named["dk"][...] = dk_acc[...].astype(dt)
    named["dv"][...] = dv_acc[...].astype(dt)


# ------------------------------------------------------------------------------ the calls
def band_multiply_adds(g: Geometry) -> int:
    """Multiply-adds of one (example, head)'s position-score products (q_r against the bands)."""
    content_tiles = g.content_rows // g.block_q
    query_tiles = g.query_stream_rows // g.block_q
    return g.block_q * g.head_size * (content_tiles * g.content_band
                                      + query_tiles * g.query_band)


def flops(g: Geometry, backward: bool = False) -> int:
    """MXU FLOPs of one call (module docstring), 2 per multiply-add."""
    score = g.rows * g.padded_keys * g.head_size
    per_program = (5 * score + 3 * band_multiply_adds(g)) if backward else (
        2 * score + band_multiply_adds(g))
    return 2 * per_program * g.batch * g.heads


def bytes_accessed(g: Geometry, backward: bool = False) -> int:
    """HBM bytes of one call: every operand and result once."""
    sh = shapes(g)
    names = ("keys",) + operand_names(g, backward) + result_names(g, backward)
    return sum(math.prod(sh[x][0]) * jnp.dtype(sh[x][1]).itemsize for x in names)


@functools.lru_cache(maxsize=32)
def _call(g: Geometry, backward: bool, interpret: bool):
    names = operand_names(g, backward)
    results = result_names(g, backward)
    sh = shapes(g)
    scratch = [pltpu.VMEM((g.block_q, g.padded_keys), jnp.float32)]
    if backward:
        scratch += [pltpu.VMEM((g.block_q, g.padded_keys), jnp.float32),
                    pltpu.VMEM((g.padded_keys, g.head_size), jnp.float32),
                    pltpu.VMEM((g.padded_keys, g.head_size), jnp.float32)]
    kernel = _backward_kernel if backward else _forward_kernel
    return pl.pallas_call(
        functools.partial(kernel, g, names),
        out_shape=[jax.ShapeDtypeStruct(*sh[r]) for r in results],
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(g.heads, g.batch),
            in_specs=_block_specs(g, names), out_specs=_block_specs(g, results),
            scratch_shapes=scratch),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary" if backward else "parallel")),
        cost_estimate=pl.CostEstimate(
            flops=flops(g, backward), bytes_accessed=bytes_accessed(g, backward),
            transcendentals=g.batch * g.heads * g.rows * g.padded_keys),
        interpret=interpret, name="xlnet_attention_" + ("bwd" if backward else "fwd"))


def forward_call(g: Geometry, interpret: bool = False):
    """The forward: f(keys, *operands in `operand_names(g)` order) -> (out, lse)."""
    return _call(g, False, interpret)


def backward_call(g: Geometry, interpret: bool = False):
    """The backward: f(keys, *operands in `operand_names(g, backward=True)` order) -> the
    gradients in `result_names(g, backward=True)` order."""
    return _call(g, True, interpret)
