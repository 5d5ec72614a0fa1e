"""The XLNet backbone: embeddings, relative position encoding, masks, memory, N layers.
Letters as layers/xlnet_block.py's (docs/GLOSSARY.md). Inputs are batch-major, memories
included ([B, M, D], unlike HuggingFace's sequence-first [M, B, D]).
"""

from __future__ import annotations

from typing import Dict, List, Optional

import keras
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.kernels import angle_scores
from xlnet_tf2.layers.relative_position import (build_attention_masks,
                                                relative_position_encoding, key_segment_ids,
                                                segment_matrix)
from xlnet_tf2.layers.step_plan import StepPlan, plan_or_default
from xlnet_tf2.layers.xlnet_block import XLNetBlock, normal_initializer
from xlnet_tf2.models import memory, pretrained
from xlnet_tf2.models.model_inputs import ModelInputError, check_input_keys, eager_token_ids

INPUT_KEYS = ("input_ids", "segment_ids", "token_type_ids", "attention_mask", "perm_mask",
              "target_mapping", "mems", "memory_mask")


# Keyword arguments of a model call that are not inputs.
CALL_OPTIONS = ("training", "output_hidden_states", "mask", "plan")

class KeywordInputs:
    """Mixin of the models: `model(**batch)` (HuggingFace's call) means `model(batch)`, gathered
    before Keras sees the call (`call` keeps its one input dict), the keys checked against the
    class's `INPUT_KEYS` before Keras builds or runs anything."""

    INPUT_KEYS: tuple = INPUT_KEYS

    def __call__(self, inputs=None, *args, **kwargs):
        # The keywords that are not CALL_OPTIONS become the input dict (not both).
        keywords = {k: kwargs[k] for k in kwargs if k not in CALL_OPTIONS}
        options = {k: kwargs[k] for k in kwargs if k in CALL_OPTIONS}
        model_name = type(self).__name__
        if keywords and inputs is not None:
            raise ModelInputError(f"{model_name} takes its inputs as one dict (model(batch)) or "
                                  f"as keywords (model(**batch)), not both; got a "
                                  f"{type(inputs).__name__} and {sorted(keywords)}.")
        if inputs is None and not keywords:
            raise ModelInputError(f"{model_name} needs its inputs: a dict (model(batch)) or "
                                  "keywords (model(**batch)) with input_ids.")
        inputs = dict(keywords) if inputs is None else inputs
        if isinstance(inputs, dict) and not set(inputs) <= set(self.INPUT_KEYS):
            check_input_keys(model_name, inputs, self.INPUT_KEYS)  # one line naming them
        return super().__call__(inputs, *args, **options)


def check_token_ids(input_ids: tf.Tensor, n_token: int, name: str = "input_ids") -> tf.Tensor:
    """`input_ids` if every id is in [0, n_token) (else it would gather another row, or fail
    deep in the embedding); otherwise eagerly a ModelInputError with the first bad position,
    traced (tf.function, SavedModel) an InvalidArgumentError with the smallest and largest id.
    One min and one max; XLA drops the assertion (a compiled step's ids are prepared data)."""
    if tf.executing_eagerly():
        return eager_token_ids(input_ids, n_token, name)
    low, high = tf.reduce_min(input_ids), tf.reduce_max(input_ids)
    valid = tf.logical_and(low >= 0, high < n_token)
    check = tf.debugging.Assert(valid, [
        f"{name} holds ids outside the vocabulary [0, {n_token}) of this model "
        f"(n_token={n_token}): smallest id", low, "largest id", high], summarize=1)
    with tf.control_dependencies([check]):
        return tf.identity(input_ids)


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetModel(KeywordInputs, pretrained.PretrainedModel, keras.Model):
    """XLNet backbone (no head). Called with a dict (or its entries as keywords):
      input_ids int32 [B, L]; optional: segment_ids int32 [B, L] (only equality matters; or
      HuggingFace's token_type_ids); attention_mask [B, L] (1 = real token, 0 = padding);
      perm_mask [B, L, L] (1 = i may NOT attend to j); target_mapping [B, P, L] (one-hot rows,
      all-zero for unused predictions: the query stream); mems n_layer x [B, M, D] ([] = none,
      so a mem_len 0 model takes its own new_mems); memory_mask [B, M] (0 = an empty slot no
      query sees; without it every entry is visible, as in the original).
    and `output_hidden_states` (a Python bool). Returns a dict:
      hidden (also `last_hidden_state`): the content stream [B, L, D], or the query stream
        [B, P, D] with target_mapping; content_hidden [B, L, D];
      new_mems (also `mems`): n_layer x [B, min(M + R, mem_len), D], gradient stopped ([] when
        mem_len is 0);
      with output_hidden_states: hidden_states, n_layer + 1 x [B, L, D] (each layer's input,
        then the last output, as HuggingFace's), with target_mapping query_hidden_states too.
    """

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "transformer")
        super().__init__(**kwargs)
        self.config = XLNetConfig.coerce(config)
        c = self.config
        init = normal_initializer(c.initializer_range)
        self.word_embedding = keras.layers.Embedding(c.n_token, c.d_model, embeddings_initializer=init,
                                                     name="word_embedding")
        self.dropout = Dropout(c.dropout, name="dropout")
        # One attribute per layer (not a list) so tf.train.Checkpoint tracks every block too.
        for i in range(c.n_layer):
            setattr(self, f"layer_{i}", XLNetBlock(
                c.d_model, c.n_head, c.d_head, c.d_inner, ff_activation=c.ff_activation,
                dropout=c.dropout, dropatt=c.dropatt, initializer_range=c.initializer_range,
                own_biases=c.untie_r, layer_index=i, name=f"layer_{i}"))

    @property
    def blocks(self) -> List[XLNetBlock]:
        return [getattr(self, f"layer_{i}") for i in range(self.config.n_layer)]

    def build(self, input_shape=None):
        c = self.config
        self.word_embedding.build((None, None))
        self.mask_emb = self.add_weight(name="mask_emb", shape=(1, 1, c.d_model),
                                        initializer="glorot_uniform")
        if not c.untie_r:
            init = normal_initializer(c.initializer_range)
            bias_shape = (c.n_head, c.d_head)
            self.r_w_bias = self.add_weight(name="r_w_bias", shape=bias_shape, initializer=init)
            self.r_r_bias = self.add_weight(name="r_r_bias", shape=bias_shape, initializer=init)
            self.r_s_bias = self.add_weight(name="r_s_bias", shape=bias_shape, initializer=init)
        for block in self.blocks:
            block.build()
        self.built = True

    # ------------------------------------------------------------------ HuggingFace's names
    kind = "backbone"  # what the loaders and writers of models/pretrained.py see

    @classmethod
    def from_pretrained(cls, name_or_dir: str, **kwargs) -> "XLNetModel":
        """The backbone of a pretrained or fine-tuned model (a task's head left out), as
        transformers' `XLNetModel.from_pretrained`: models/pretrained.py's `load`."""
        return pretrained.load(cls, name_or_dir, **kwargs)

    # ------------------------------------------------------------------ call
    def call(self, inputs: Dict[str, tf.Tensor], training=None, output_hidden_states=False,
             plan: Optional[StepPlan] = None):
        """`plan`: how the step is traced (layers/step_plan.py); None: this machine's."""
        c = self.config
        plan = plan_or_default(plan)
        if "input_ids" not in inputs:
            raise ModelInputError("XLNetModel needs inputs['input_ids'] (int32 [batch, "
                                  "seq_len]).")
        input_ids = tf.convert_to_tensor(inputs["input_ids"])
        if input_ids.shape.rank != 2:
            raise ModelInputError(f"input_ids must be [batch, seq_len], got shape "
                                  f"{input_ids.shape}.")
        input_ids = check_token_ids(input_ids, c.n_token)
        q_len = input_ids.shape[1]
        if q_len is None:
            raise ModelInputError("XLNetModel needs a static sequence length (pad to a fixed "
                                  "seq_len).")
        batch_size = input_ids.shape[0] if input_ids.shape[0] is not None else tf.shape(input_ids)[0]
        if c.bi_data and isinstance(batch_size, int) and batch_size % 2:
            raise ModelInputError(f"bi_data needs an even batch (forward and backward halves), "
                                  f"got {batch_size}.")

        mems = inputs.get("mems")
        if mems is not None and len(mems) == 0:
            mems = None  # what a model without memory returns as new_mems: no memory
        if mems is not None and len(mems) != c.n_layer:
            raise ModelInputError(f"mems must hold one tensor per layer ({c.n_layer}), got "
                                  f"{len(mems)}.")
        m_len = 0 if mems is None else mems[0].shape[1]
        k_len = m_len + q_len

        memory_mask = inputs.get("memory_mask")
        if memory_mask is not None and mems is None:
            raise ModelInputError("memory_mask was given without mems.")

        content_mask, query_mask = build_attention_masks(
            batch_size=batch_size, q_len=q_len, m_len=m_len, attn_type=c.attn_type,
            same_length=c.same_length, attention_mask=inputs.get("attention_mask"),
            perm_mask=inputs.get("perm_mask"), memory_mask=memory_mask,
            run_time_input=input_ids)

        # HuggingFace's name for the segment ids is token_type_ids (not both).
        segment_ids = inputs.get("token_type_ids", inputs.get("segment_ids"))
        if "token_type_ids" in inputs and "segment_ids" in inputs:
            raise ModelInputError("Give segment_ids or token_type_ids (the same input under "
                                  "HuggingFace's name), not both.")
        segment_mismatch = None if segment_ids is None else segment_matrix(segment_ids, m_len)
        # The keys' ids too: the Triton attention compares ids in its kernel.
        key_segments = None if segment_ids is None else key_segment_ids(segment_ids, m_len)

        # The position scores' form: the plan's, but the shift wherever the angle table is not
        # the embedding the scores read (a clamped distance; dropout on the embedding).
        angles = (plan.angle_position_scores and c.clamp_len <= 0
                  and not (training and c.dropout > 0))
        position_kwargs = {}
        if angles:
            pos_emb = None
            position_kwargs = dict(
                angle_table=angle_scores.angle_table(k_len, c.d_model, run_time_input=input_ids),
                direction_groups=2 if c.bi_data else 1)
        else:
            # Computed in the program from a run-time zero instead of folded into a constant
            # table (layers/relative_position.py).
            pos_emb = relative_position_encoding(q_len, k_len, c.d_model, c.attn_type,
                                                 c.bi_data, c.clamp_len, run_time_input=input_ids)
            pos_emb = self.dropout(tf.cast(pos_emb, self.compute_dtype), training=training,
                                   shared_over_batch=True, plan=plan)  # one mask for every example

        h = self.dropout(self.word_embedding(input_ids), training=training, plan=plan)

        g = None
        query_kwargs = {}
        target_mapping = inputs.get("target_mapping")
        if target_mapping is not None:
            target_mapping = tf.convert_to_tensor(target_mapping)
            n_predict = target_mapping.shape[1]
            query_positions = tf.argmax(target_mapping, axis=-1, output_type=tf.int32)  # [B, P]
            query_weights = tf.reduce_sum(tf.cast(target_mapping, tf.float32), axis=-1)  # [B, P]
            mask_emb = tf.cast(self.mask_emb, self.compute_dtype)
            g = self.dropout(tf.broadcast_to(mask_emb, [batch_size, n_predict, c.d_model]),
                             training=training, plan=plan)
            query_kwargs = dict(
                query_positions=query_positions, query_weights=query_weights,
                query_mask=(None if query_mask is None
                            else tf.gather(query_mask, query_positions, batch_dims=1)),
                query_segment_mismatch=(None if segment_ids is None else segment_matrix(
                    segment_ids, m_len,
                    query_segment_ids=tf.gather(segment_ids, query_positions, batch_dims=1))))

        shared_biases = None if c.untie_r else (self.r_w_bias, self.r_r_bias, self.r_s_bias)
        new_mems = []
        hidden_states, query_hidden_states = [], []
        for i, block in enumerate(self.blocks):
            layer_mems = None if mems is None else mems[i]
            if c.mem_len > 0:
                new_mems.append(next_memory(c, h, layer_mems))
            hidden_states.append(h)
            query_hidden_states.append(g)
            out = block(h, pos_emb, g=g, mems=layer_mems, content_mask=content_mask,
                        segment_mismatch=segment_mismatch, segment_ids=key_segments,
                        biases=shared_biases,
                        training=training, plan=plan, **query_kwargs, **position_kwargs)
            h, g = out if g is not None else (out, None)

        output = self.dropout(h if g is None else g, training=training, plan=plan)
        outputs = {"hidden": output, "last_hidden_state": output, "content_hidden": h,
                   "new_mems": new_mems, "mems": new_mems}
        if output_hidden_states:
            outputs["hidden_states"] = hidden_states + [h]
            if g is not None:
                outputs["query_hidden_states"] = query_hidden_states + [g]
        return outputs

    def initial_memory(self, batch_size: int, dtype=None) -> List[tf.Tensor]:
        """Zero memories [B, mem_len, D] per layer ([] without memory): models/memory.py's
        `initial_memory` in this model's compute dtype."""
        return memory.initial_memory(self.config, batch_size, dtype or self.compute_dtype)


def next_memory(config: XLNetConfig, layer_input: tf.Tensor,
                previous: Optional[tf.Tensor]) -> tf.Tensor:
    """A layer's memory for the next chunk (models/memory.py): the last M of concat(previous,
    the first R positions of its input [B, L, D]), [B, M_new, D], gradient stopped. Only the
    reused prefix: caching the rest would leak the example's B part."""
    current = layer_input if config.reuse_len <= 0 else layer_input[:, :config.reuse_len]
    if previous is not None:
        current = tf.concat([tf.cast(previous, current.dtype), current], axis=1)
    return tf.stop_gradient(current[:, -config.mem_len:])
