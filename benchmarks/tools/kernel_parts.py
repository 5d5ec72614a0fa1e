"""What each kernel of the compiled step computes for the model: the one table that maps a
kernel (tools/optimized_hlo.py) to a part of XLNet's step (attention scores, position scores
and their shift, softmax, feed-forward, optimizer, ...) and a direction (forward, backward,
optimizer), for benchmarks/accelerator_compile.py's grouped tables.

The evidence is the TensorFlow op names XLA keeps in each instruction's metadata, e.g.
`xlnet_lm/transformer/layer_3/rel_attn/dropatt/BitwiseXor` or, in the backward pass,
`gradient_tape/xlnet_lm/transformer/layer_3/ff/layer_1/Tensordot/MatMul/MatMul`: the Keras
layer scopes (rel_attn, ff, layer_norm, dropout, dropatt, word_embedding, lm_loss, the
optimizer's xlnet_adamw, clip_by_global_norm) say which layer, and the TensorFlow op
(Softmax, GatherV2, strided_slice, ...) which step of it. Inside the attention the einsums are
numbered in trace order (einsum_4, ...), which any change of the layer renumbers, so there the
sizes decide: a matrix product with an operand or result that has a dimension of T = K + L
encoded positions (or T - 1, the shift's view, or a multiple) computes position scores, and
any other kernel touching such an array shifts them (the rel shift: its slices, its gradient's
pads, the layout copies they read; the query stream's when the array has P rows); a product of
at least B x N x P x K elements (the query stream's scores, the smallest score tensor) works on
attention scores. `StepShape` holds these sizes, from the export's meta.json.

Rules are tried in order; the first that matches names the part. `main` rules look at the
kernel's main op name (its dot's, else its own, else the most-written scoped name inside);
`any` rules at every op name inside it (a softmax fused with the dropout after it is a softmax).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable, Optional, Tuple

from benchmarks.tools.optimized_hlo import PALLAS_KIND, Kernel


@dataclasses.dataclass(frozen=True)
class StepShape:
    """The sizes the rules need: batch B, sequence L, memory M, predictions P, heads N."""
    batch: int
    seq_len: int
    mem_len: int
    num_predict: int
    n_head: int

    @property
    def keys(self) -> int:  # K = M + L
        return self.mem_len + self.seq_len

    @property
    def positions(self) -> int:  # T = K + L (bidirectional relative positions)
        return self.keys + self.seq_len

    def _positions(self, d: int) -> bool:
        t = self.positions
        return d >= t - 1 and (d % t == 0 or d % (t - 1) == 0)

    def position_sized(self, dims) -> bool:
        """Whether an array of `dims` (a kernel's, or its matrix products') has a dimension of
        T positions, T - 1 (the shift's view) or a multiple of either (dimensions merged)."""
        return any(self._positions(d) for shape in dims for d in shape)

    def query_positions(self, dims) -> bool:
        """Whether an array of `dims` holds the query stream's position scores: P rows, then
        T (or T - 1, or merged) positions."""
        return any(a == self.num_predict and self._positions(b) for shape in dims
                   for a, b in zip(shape, shape[1:]))

    def score_sized(self, dims) -> bool:
        """Whether an array of `dims` holds at least the query stream's B x N x P x K scores."""
        smallest = self.batch * self.n_head * min(self.num_predict, self.seq_len) * self.keys
        return max((math.prod(shape) for shape in dims), default=0) >= smallest


ATTENTION = r"/rel_attn(_\d+)?/"


@dataclasses.dataclass(frozen=True)
class Rule:
    part: str
    pattern: str  # a regex searched in the op name(s)
    scope: str = "main"  # "main": the kernel's main op name; "any": any op name inside it
    when: Optional[Callable[[Kernel, StepShape], bool]] = None

    def matches(self, k: Kernel, shape: StepShape) -> bool:
        names = (k.op_name,) if self.scope == "main" else k.op_names
        if not any(re.search(self.pattern, n) for n in names):
            return False
        return self.when is None or self.when(k, shape)


def _softmax_like(k: Kernel, shape: StepShape) -> bool:
    """A score-sized kernel without a matrix product that exponentiates or reduces, and is not
    a layer norm's or the feed-forward's: the softmax or its gradient (whatever it is fused
    with: masks, the dropout of the probabilities)."""
    ops = set(k.opcodes)
    return (not k.has_dot and shape.score_sized(k.dims)
            and ("exponential" in ops or "reduce" in ops)
            and not re.search(r"/(layer_norm|ff)(_\d+)?/", k.op_name))


PARTS: Tuple[Rule, ...] = (
    Rule("attention kernels (Pallas)", r"", when=lambda k, s: k.kind == PALLAS_KIND),
    Rule("gradient clipping", r"global_norm|clip_by|L2Loss"),
    Rule("optimizer (AdamW)", r"(?i)adamw|/Assign(Add|Sub)?VariableOp"),
    Rule("query-stream shift", ATTENTION + r"(.*/)?(GatherV2|take)", scope="any",
         when=lambda k, s: not k.has_dot),
    Rule("position scores (q.r)", ATTENTION,
         when=lambda k, s: k.has_dot and s.position_sized(k.dot_dims)),
    Rule("query-stream shift", ATTENTION,
         when=lambda k, s: not k.has_dot and s.query_positions(k.dims)),
    Rule("rel shift", ATTENTION, when=lambda k, s: not k.has_dot and s.position_sized(k.dims)),
    Rule("softmax", ATTENTION + r"(.*/)?Softmax", scope="any",
         when=lambda k, s: not k.has_dot),
    Rule("softmax", ATTENTION, scope="any", when=_softmax_like),
    Rule("attention dropout", r"/dropatt(_\d+)?/"),
    Rule("hidden dropout", r"/dropout(_\d+)?/"),
    Rule("layer norm", r"/layer_norm(_\d+)?/"),
    Rule("feed-forward", r"/ff(_\d+)?/"),
    Rule("attention scores and values (q.k, p.v)", ATTENTION,
         when=lambda k, s: k.has_dot and s.score_sized(k.dot_dims)),
    Rule("attention projections (q, k, v, r, o)", ATTENTION, when=lambda k, s: k.has_dot),
    Rule("score sums, masks, segment term", ATTENTION, when=lambda k, s: s.score_sized(k.dims)),
    Rule("attention, other", ATTENTION),
    # Ops of a custom gradient lose the layer's scope (e.g. `Cast_16`): an unscoped kernel on
    # scores (both streams' rows joined, [B, N, L + P, K]) is still the attention's.
    Rule("attention, other", r"", when=lambda k, s: s.score_sized(k.dims)
         and any(s.keys in shape for shape in k.dims)),
    Rule("LM head and loss", r"(?i)lm_loss|SparseSoftmaxCrossEntropy|^(gradient_tape/)?"
         r"xlnet_lm(_\d+)?/(einsum|add|BiasAdd)|one_hot"),
    Rule("embedding and position encoding", r"(?i)embedding|transformer(_\d+)?/"),
    Rule("other", r""),
)
PART_NAMES = tuple(dict.fromkeys(rule.part for rule in PARTS))


def part(k: Kernel, shape: StepShape) -> str:
    """The part of the step kernel `k` computes (the first rule of PARTS that matches)."""
    if not k.op_name and not k.op_names:
        return "(no op name)"
    return next(rule.part for rule in PARTS if rule.matches(k, shape))


def direction(k: Kernel) -> str:
    """"bwd" for a kernel of the backward pass (an op name under gradient_tape/), "opt" for
    the optimizer and clipping, else "fwd"."""
    if re.search(r"(?i)adamw|global_norm|clip_by|/Assign(Add|Sub)?VariableOp", k.op_name):
        return "opt"
    if any("gradient_tape/" in n for n in (k.op_name,) + k.op_names):
        return "bwd"
    return "fwd"


def short_op_name(name: str) -> str:
    """An op name without the call wrapper, gradient_tape/, Keras' _N call suffixes of the
    model's scopes and the layer index (layer_N): the same op of every layer reads alike."""
    name = re.sub(r";.*", "", name).replace("gradient_tape/", "")
    name = re.sub(r"\b(xlnet_lm|transformer|rel_attn|ff|layer_norm|dropout|dropatt|"
                  r"word_embedding|lm_loss|layer_1|layer_2)_\d+(?=/)", r"\1", name)
    name = re.sub(r"\blayer_\d+(_\d+)?/(?=(rel_attn|ff)/)", "layer_N/", name)
    return name.replace("xlnet_lm/transformer/", "")
