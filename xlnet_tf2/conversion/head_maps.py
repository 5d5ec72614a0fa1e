"""Where each tensor of a fine-tuned checkpoint's task head goes in our task models: the
original's names (`original_head_map`), HuggingFace's (`huggingface_head_map`), and which
sequence summaries map at all (`check_summary_maps`).
"""

from __future__ import annotations

import re
from typing import List, Mapping, Optional

from xlnet_tf2.conversion.weight_maps import WeightMismatchError, WeightSource, transposed

MAPPED_SUMMARIES = ("last", "first")
_SUMMARY_DIFFERENCE = {
    "mean": "the original and HuggingFace average every position, padding included; this "
            "project averages the real tokens only",
    "attn": "the original pools with a learned query bias, bias-free projections and a "
            "LayerNorm, HuggingFace has no attention summary, this project uses Keras' "
            "MultiHeadAttention",
}
ORIGINAL_SUMMARY = "model/sequnece_summary/"


def check_summary_maps(summary_type: str, where: str) -> None:
    """Refuses a summary that does not map: "last" and "first" compute the same in all three.
    "mean" does not: the original and HuggingFace average every position, padding included,
    while ours averages the real tokens. "attn" does not: the original pools with a learned
    query bias, bias-free projections and a LayerNorm (HuggingFace has no attn summary), ours
    with Keras' MultiHeadAttention. Those raise `WeightMismatchError` rather than convert into
    a model whose outputs differ."""
    if summary_type not in MAPPED_SUMMARIES:
        raise WeightMismatchError(
            f"{where}: summary_type {summary_type!r} does not map between this project and "
            f"the original/HuggingFace heads ({_SUMMARY_DIFFERENCE.get(summary_type, 'unknown')}"
            f"); only {MAPPED_SUMMARIES} convert.")


def huggingface_head_map(model) -> List[WeightSource]:
    """HuggingFace state-dict keys of `model`'s head (model: SequenceClassifier,
    MultipleChoiceModel or SquadModel, built). PyTorch `nn.Linear` weights are [out, in]:
    `sequence_summary.summary.*` and `logits_proj.*` (XLNetForSequenceClassification,
    XLNetForMultipleChoice); `start_logits.dense.*`, `end_logits.{dense_0,LayerNorm,dense_1}.*`,
    `answer_class.{dense_0,dense_1}.*` (XLNetForQuestionAnswering)."""
    if hasattr(model, "huggingface_head_map"):  # a head that declares its own names
        return model.huggingface_head_map()
    head = model.head
    if model.kind == "squad":
        return [
            transposed("start_logits.dense.weight", head.start_logit.kernel),
            WeightSource("start_logits.dense.bias", head.start_logit.bias),
            transposed("end_logits.dense_0.weight", head.end_hidden.kernel),
            WeightSource("end_logits.dense_0.bias", head.end_hidden.bias),
            WeightSource("end_logits.LayerNorm.weight", head.end_norm.gamma),
            WeightSource("end_logits.LayerNorm.bias", head.end_norm.beta),
            transposed("end_logits.dense_1.weight", head.end_logit.kernel),
            WeightSource("end_logits.dense_1.bias", head.end_logit.bias),
            transposed("answer_class.dense_0.weight", head.answer_hidden.kernel),
            WeightSource("answer_class.dense_0.bias", head.answer_hidden.bias),
            transposed("answer_class.dense_1.weight", head.answer_logit.kernel),
        ]
    check_summary_maps(head.summary_type, f"the {model.kind} model")
    return [
        transposed("sequence_summary.summary.weight", head.summary.proj.kernel),
        WeightSource("sequence_summary.summary.bias", head.summary.proj.bias),
        transposed("logits_proj.weight", head.logits.kernel),
        WeightSource("logits_proj.bias", head.logits.bias),
    ]


def original_head_map(model, scope: Optional[str] = None) -> List[WeightSource]:
    """Original TF1 variable names of `model`'s head; `scope` is the classification or
    regression scope suffix (`original_scope` finds it in a checkpoint).

    The zihangdai/xlnet names (function_builder.py, modeling.py; TF1 dense kernels are
    [in, out] as Keras'; SQuAD's and RACE's heads sit outside the `model/` scope):

      classification  model/sequnece_summary/summary/{kernel,bias}   (sic: "sequnece")
                      model/classification_<scope>/logit/{kernel,bias}   scope = --cls_scope
                                                                  or the task name, lowercased
      regression      model/sequnece_summary/summary/{kernel,bias}
                      model/regression_<task>/logit/{kernel,bias}
      race            model/sequnece_summary/summary/{kernel,bias}, logits/dense/{kernel,bias}
      squad           start_logits/dense/{kernel,bias}, end_logits/dense_0/{kernel,bias},
                      end_logits/LayerNorm/{gamma,beta}, end_logits/dense_1/{kernel,bias},
                      answer_class/dense_0/{kernel,bias}, answer_class/dense_1/kernel (no bias)
    """
    head = model.head
    kind = model.kind
    if kind == "squad":
        def dense(name, layer, bias=True):
            entries = [WeightSource(f"{name}/kernel", layer.kernel)]
            return entries + ([WeightSource(f"{name}/bias", layer.bias)] if bias else [])
        return (dense("start_logits/dense", head.start_logit)
                + dense("end_logits/dense_0", head.end_hidden)
                + [WeightSource("end_logits/LayerNorm/gamma", head.end_norm.gamma),
                   WeightSource("end_logits/LayerNorm/beta", head.end_norm.beta)]
                + dense("end_logits/dense_1", head.end_logit)
                + dense("answer_class/dense_0", head.answer_hidden)
                + dense("answer_class/dense_1", head.answer_logit, bias=False))
    check_summary_maps(head.summary_type, f"the {kind} model")
    logit = "logits/dense/" if kind == "race" else f"model/{kind}_{scope}/logit/"
    return [
        WeightSource(ORIGINAL_SUMMARY + "summary/kernel", head.summary.proj.kernel),
        WeightSource(ORIGINAL_SUMMARY + "summary/bias", head.summary.proj.bias),
        WeightSource(logit + "kernel", head.logits.kernel),
        WeightSource(logit + "bias", head.logits.bias),
    ]


def original_scope(names, kind: str, scope: Optional[str], checkpoint: str) -> Optional[str]:
    """The `<scope>` of `model/{classification,regression}_<scope>/logit/kernel` in a
    checkpoint's variable names: `scope` when given (checked), else the only one there."""
    if kind not in ("classification", "regression"):
        return None
    pattern = re.compile(rf"^model/{kind}_(.+)/logit/kernel$")
    found = sorted(m.group(1) for m in map(pattern.match, names) if m)
    if scope is not None:
        if scope not in found:
            raise WeightMismatchError(
                f"original checkpoint {checkpoint} has no model/{kind}_{scope}/logit/kernel; "
                f"its {kind} heads: {found or 'none'}.")
        return scope
    if len(found) == 1:
        return found[0]
    if not found:
        others = sorted({m.group(0) for m in map(
            re.compile(r"^model/(classification|regression)_[^/]+").match, names) if m})
        raise WeightMismatchError(
            f"original checkpoint {checkpoint} holds no {kind} head "
            f"(model/{kind}_<scope>/logit/kernel)" + (f"; it has {others}" if others else "")
            + ". Check --kind.")
    raise WeightMismatchError(f"original checkpoint {checkpoint} holds {len(found)} {kind} "
                              f"heads {found}; choose one with --cls_scope.")


def original_summary_is_attention(names) -> bool:
    """Whether an original checkpoint was fine-tuned with summary_type=attn (its summary has
    a query bias and attention weights)."""
    markers = (ORIGINAL_SUMMARY + "summary_bias", ORIGINAL_SUMMARY + "abs_attn/")
    return any(n.startswith(markers) for n in names)


def output_count(tensors: Mapping, name: str, axis: int) -> int:
    """Outputs of a head's final layer from the stored tensor's shape."""
    if name not in tensors:
        raise WeightMismatchError(f"missing tensor {name!r} (the head's output layer).")
    return int(tensors[name].shape[axis])
