"""Counter-based random numbers for data preparation: a pure function of (key, tag, index).

Every random choice of an example is `uniform(key, tag, index)` where `key` names the example
(seed, pass, direction, stream, chunk), `tag` names the decision (A/B split, span draws of a
half, top-up candidates, permutation keys) and `index` counts draws of that decision. Nothing
depends on the order examples are built in or how they are batched, so vectorizing over any
number of examples gives bit-identical output.

The mixing function is SplitMix64's finalizer, applied in numpy uint64 arithmetic (wrapping).
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_INV53 = 1.0 / float(1 << 53)

# Decision tags (any distinct constants; changing one changes the prepared data).
TAG_AB = 1
TAG_SPANS_REUSED = 2
TAG_SPANS_NEW = 3
TAG_TOPUP_REUSED = 4
TAG_TOPUP_NEW = 5
TAG_PERM = 6


def mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer of uint64 values (any shape)."""
    x = np.atleast_1d(np.asarray(x, dtype=np.uint64))  # arrays wrap silently, scalars warn
    x = x + _GOLDEN
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


def combine(*parts) -> np.ndarray:
    """uint64 hash of a sequence of integers or integer arrays (broadcast together)."""
    h = np.array([0x584C4E6574], np.uint64)  # "XLNet"
    shape = np.broadcast_shapes(*[np.shape(p) for p in parts])
    for part in parts:
        h = mix(h ^ np.atleast_1d(np.asarray(part).astype(np.uint64)))
    return h.reshape(shape) if shape else h[0]


def example_keys(seed: int, pass_id: int, direction: int, stream_id: int,
                 chunks: np.ndarray) -> np.ndarray:
    """uint64 [C]: the key of each chunk's example."""
    return combine(seed, pass_id, direction, stream_id, np.asarray(chunks, np.int64))


def bits(keys: np.ndarray, tag: int, index) -> np.ndarray:
    """uint64 draws: keys [E] with index [k] (or [E, k]) -> [E, k]; keys [E], index scalar ->
    [E]."""
    keys = np.asarray(keys, np.uint64)
    index = np.asarray(index, np.uint64)
    salt = mix((np.uint64(tag) << np.uint64(32)) ^ index)
    if index.ndim == 0:
        return mix(keys ^ salt[0]).reshape(keys.shape)
    return mix(keys[:, None] ^ salt[None, :])


def uniform(keys: np.ndarray, tag: int, index) -> np.ndarray:
    """float64 in [0, 1), shapes as `bits`."""
    return (bits(keys, tag, index) >> np.uint64(11)).astype(np.float64) * _INV53
