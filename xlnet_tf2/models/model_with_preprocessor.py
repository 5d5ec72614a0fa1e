"""`ModelWithPreprocessor`: the base of the keras-hub-style models (XLNetClassifier,
XLNetRegressor, XLNetMultipleChoice, XLNetQuestionAnswerer).

One is a Keras model around a model with a head (`task_model`, a HeadModel, whose backbone is
`backbone`) with a preprocessor attached (a Keras layer of xlnet_tf2.tokenizers, strings in,
token dicts out) and the task's default loss and metrics:

- `fit`, `evaluate`, `predict` take raw strings (in-memory inputs are preprocessed once,
  eagerly, before they are batched; a tf.data.Dataset's elements in its pipeline, as
  keras-hub's tasks do; either way the model's own graph stays numeric and XLA-compilable)
  or token dicts (input_ids, segment_ids or HuggingFace's token_type_ids,
  attention_mask): Python lists, numpy arrays or a tf.data.Dataset of x, (x, y) or
  (x, y, sample_weight) batches. `fit` on lists or arrays iterates one repeated pipeline for
  all its epochs (an epoch is one reshuffled pass, its steps_per_epoch).
- `call` returns the task's main output alone (logits, scores), so `compile(metrics=[...])`
  applies to it; `compile()` with no arguments (done at construction) picks the task's
  loss, metrics and Adam(5e-5).
- `from_preset(preset)` (models/pretrained.py's `load`) and `save_to_preset(dir)`;
  `.keras` files carry the SentencePiece model (XLNetPreprocessor.save_assets) and load after
  `import xlnet_tf2`.
"""

from __future__ import annotations

from typing import Dict

import keras
import tensorflow as tf

from xlnet_tf2 import task_registry, tensorflow_build
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.conversion.to_huggingface import save_huggingface
from xlnet_tf2.models import pretrained, saving
from xlnet_tf2.models.model_inputs import check_input_keys

DEFAULT_BATCH_SIZE = 32
# In-memory inputs are preprocessed this many rows per eager call (bounds the tokenizer's
# intermediate tensors; the result is kept whole).
PREPROCESS_ROWS = 1024
_TOKEN_DTYPE = tf.int32


def resolve_config(config) -> XLNetConfig:
    """An XLNetConfig, its dict, or a preset name ("tiny", "base", "large")."""
    return XLNetConfig.resolve(config) if isinstance(config, str) else XLNetConfig.coerce(config)


def cast_token_inputs(x: dict) -> Dict[str, tf.Tensor]:
    """A token dict in our names: HuggingFace's token_type_ids read as segment_ids; missing
    segment_ids are 0 and a missing attention_mask is all ones (no padding)."""
    if "input_ids" not in x:
        raise ValueError(f"a token dict needs input_ids; got keys {sorted(x)}.")
    inputs = {k: tf.cast(v, _TOKEN_DTYPE) for k, v in x.items()}
    if "token_type_ids" in inputs:
        inputs["segment_ids"] = inputs.pop("token_type_ids")
    ids = inputs["input_ids"]
    inputs.setdefault("segment_ids", tf.zeros_like(ids))
    inputs.setdefault("attention_mask", tf.ones_like(ids))
    return inputs


def head_setting(name: str, held_as: str = "") -> property:
    """A setting of the head (num_choices, summary_type, head_dropout, ...) read from the task
    model, which holds it (as `held_as` where its name there differs): the wrapper echoes it
    in get_config and task.json without keeping a second copy."""
    return property(lambda self: getattr(self.task_model, held_as or name),
                    doc=f"The task model's {held_as or name}.")


class ModelWithPreprocessor(keras.Model):
    """A subclass is named by its task's declaration (xlnet_tf2/task_registry.py's
    `keras_hub_model`), which sets its `KIND` when the class is defined; it sets CONFIG_KEYS,
    builds `task_model` in its constructor (then calls `_finish_init`), defines
    `from_task_settings` and `make_preprocessor` (models/pretrained.py's _load_preset_model),
    and may override `main_output`, `task_settings`, `default_loss`, `default_metrics` and
    `prepare_labels`."""

    # The kind of model (its task's name) whose declaration names this class (set by
    # __init_subclass__).
    KIND: str = ""
    # Constructor arguments get_config echoes, besides config; those of the head are
    # `head_setting`s, read from the task model.
    CONFIG_KEYS: tuple = ()
    presets = pretrained.ClassProperty(pretrained.presets)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        path = f"{cls.__module__}.{cls.__qualname__}"
        tasks = tuple(d.name for d in task_registry.declared_tasks()
                      if d.keras_hub_model == path)
        if len(tasks) > 1:
            raise ValueError(f"{path} is the keras_hub_model of several tasks {tasks}; one "
                             "keras-hub-style class serves one task.")
        if tasks:
            cls.KIND = tasks[0]

    def __init__(self, task_model, preprocessor=None, **kwargs):
        # "xlnet_classifier", not Keras' "xl_net_classifier".
        kwargs.setdefault("name", "xlnet_" + _snake(type(self).__name__[len("XLNet"):]))
        super().__init__(**kwargs)
        self.task_model = task_model
        self.preprocessor = preprocessor
        self._step_shapes = {}

    def _finish_init(self):
        self.build()
        self.compile()

    @property
    def backbone(self):
        """The XLNetModel under the head."""
        return self.task_model.transformer

    @property
    def config(self) -> XLNetConfig:
        return self.task_model.config

    def build(self, input_shape=None):
        # Every weight exists once the task model ran on a short dummy batch; the input
        # shapes Keras records do not matter (any length runs).
        if not self.task_model.built:
            self.task_model(self.task_model.dummy_inputs(self.dummy_length()), training=False)
        # Only pretraining's query stream reads mask_emb: no gradient reaches it here.
        self.backbone.mask_emb.trainable = False
        self.built = True

    def dummy_length(self) -> int:
        return 8

    # ------------------------------------------------------------------ the model
    def __call__(self, inputs, *args, **kwargs):
        # The task model's input keys, refused as the task model refuses them, under this
        # class's name and before the tokens are cast (model_inputs.check_input_keys).
        check_input_keys(type(self).__name__, inputs, self.task_model.INPUT_KEYS)
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict):
            raise ValueError(f"{type(self).__name__} is called on token dicts (input_ids, "
                             "segment_ids, attention_mask); raw strings go through fit, "
                             "evaluate and predict, or through self.preprocessor first.")
        return self.main_output(self.task_model(cast_token_inputs(inputs), training=training))

    def main_output(self, outputs: dict):
        return outputs["logits"]

    # ------------------------------------------------------------------ compile
    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """keras.Model.compile; "auto" picks the task's defaults (Adam(5e-5), the task's
        loss and metrics)."""
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(5e-5)
        if loss == "auto":
            loss = self.default_loss()
        if metrics == "auto":
            metrics = self.default_metrics()
        if (kwargs.get("jit_compile", "auto") == "auto" and tensorflow_build.xla_on_cpu_missing()
                and not isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy)):
            # Keras' "auto" compiles with XLA wherever the layers allow it, but TensorFlow's TPU
            # build has XLA only for the TPU: off a TPU strategy, fit would fail at its first
            # step ("could not find registered transfer manager for platform Host").
            kwargs["jit_compile"] = False
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def compile_from_config(self, config):
        # Keras skips a custom compile() when loading a .keras file; ours takes Keras' own
        # arguments, so the saved ones (and the optimizer's state) come back.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    # ------------------------------------------------------------------ data
    def preprocess(self, x):
        """Raw inputs (strings, string pairs or dicts of strings) -> token dicts; token dicts
        pass through."""
        if isinstance(x, dict) and ("input_ids" in x):
            return cast_token_inputs(x)
        if self.preprocessor is None:
            raise ValueError(f"{type(self).__name__} has no preprocessor: pass token dicts "
                             "(input_ids, ...), or give it a preprocessor (from_preset attaches "
                             "one when the preset has a spiece.model).")
        return self.preprocessor(x)

    def prepare_labels(self, x, inputs: dict, y):
        """(model inputs, labels) of a batch from its raw `x`, its model `inputs` and labels
        `y`; SQuAD turns raw answers into positions and moves the gold start into the
        inputs."""
        return inputs, y

    def _element(self, x, y=None, sample_weight=None):
        inputs, y = self.prepare_labels(x, self.preprocess(x), y)
        if y is None:
            return inputs
        return (inputs, y) if sample_weight is None else (inputs, y, sample_weight)

    def _dataset(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False):
        """A batched, preprocessed tf.data pipeline of Keras' (x[, y[, sample_weight]])."""
        if isinstance(x, tf.data.Dataset):
            if y is not None or sample_weight is not None:
                raise ValueError("with a tf.data.Dataset, the labels and weights are in its "
                                 "elements: (x, y) or (x, y, sample_weight).")
            if batch_size is not None:
                raise ValueError("a tf.data.Dataset is batched already; do not pass batch_size.")
            dataset = x.map(lambda *e: self._element(*e), num_parallel_calls=tf.data.AUTOTUNE)
        else:
            # In-memory inputs are preprocessed once, eagerly, a chunk of rows at a time: a
            # per-batch map would be traced and instantiated anew by every fit, evaluate and
            # predict (seconds each for SQuAD's thousands of ops, where tokenizing the rows
            # eagerly takes a tenth of a second). The token dicts are held in memory, as the
            # raw inputs are; a corpus larger than memory comes as a tf.data.Dataset.
            dataset = tf.data.Dataset.from_tensor_slices(
                self._preprocessed(_as_column(x), _as_column(y), _as_column(sample_weight)))
            if shuffle:
                count = int(dataset.cardinality())
                dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
            dataset = dataset.batch(batch_size or DEFAULT_BATCH_SIZE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    def _preprocessed(self, x, y=None, sample_weight=None):
        """`_element` of whole in-memory columns (tensors, arrays, ragged, tuples or dicts of
        them), computed eagerly PREPROCESS_ROWS rows at a time and joined."""
        rows = _row_count(x)
        if rows == 0:
            raise ValueError(f"{type(self).__name__} got no examples (the inputs have 0 rows).")
        parts = []
        for start in range(0, rows, PREPROCESS_ROWS):
            part = tf.nest.map_structure(
                lambda v: None if v is None else v[start:start + PREPROCESS_ROWS],
                (x, y, sample_weight))
            parts.append(self._element(*part))
        if len(parts) == 1:
            return parts[0]
        return tf.nest.map_structure(lambda *pieces: tf.concat(pieces, axis=0), *parts)

    def _static_steps(self, function: str, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """Keras traces its step functions with reduce_retracing=True, which after a second
        input shape generalizes the sequence length to None; the model needs it static
        (relative positions, XLA). So a step function is traced anew when the batches'
        shapes (all but the batch dimension) change."""
        shapes = tuple(tuple(spec.shape[1:]) for spec in tf.nest.flatten(dataset.element_spec))
        if self._step_shapes.get(function) != shapes:
            setattr(self, function, None)
            self._step_shapes[function] = shapes
        return dataset

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, validation_data=None,
            shuffle=True, **kwargs):
        """keras.Model.fit on raw strings or token dicts (module docstring);
        validation_data is (x, y) or a tf.data.Dataset."""
        data = self._static_steps("train_function",
                                  self._dataset(x, y, sample_weight, batch_size, shuffle=shuffle))
        if not isinstance(x, tf.data.Dataset) and kwargs.get("steps_per_epoch") is None:
            # One iterator for every epoch: Keras would make a new one per epoch from a finite
            # dataset, instantiating the pipeline anew. Repeated, the pipeline reshuffles per
            # pass and each epoch is one pass's batches.
            kwargs["steps_per_epoch"] = int(data.cardinality())
            data = data.repeat()
        if validation_data is not None:
            validation_data = self._static_steps(
                "test_function", self._dataset(validation_data)
                if isinstance(validation_data, tf.data.Dataset)
                else self._dataset(*validation_data, batch_size=batch_size))
        # shuffle=False: the pipeline shuffled already (a Dataset cannot be by Keras).
        return super().fit(data, validation_data=validation_data, shuffle=False, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        data = self._dataset(x, y, sample_weight, batch_size)
        return super().evaluate(self._static_steps("test_function", data), **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        data = self._dataset(x, batch_size=batch_size)
        return super().predict(self._static_steps("predict_function", data), **kwargs)

    # ------------------------------------------------------------------ saving
    def task_settings(self) -> dict:
        """task.json of this task (xlnet_tf2/models/saving.py)."""
        settings = {"kind": self.KIND, "layout": "cls_last"}
        if self.preprocessor is not None:
            settings.update(seq_len=self.preprocessor.seq_len, lower=self.preprocessor.lower)
            if hasattr(self.preprocessor, "layout"):  # the text tasks' is chosen
                settings["layout"] = self.preprocessor.layout
        return settings

    def save_to_preset(self, preset_dir: str, format: str = "xlnet_tf2"):
        """Writes a directory `from_preset` reads back: our task directory (task.json,
        checkpoint, xlnet_config.json, spiece.model) or, with format="huggingface", the
        matching transformers class's config.json + model.safetensors + spiece.model."""
        spm = self.preprocessor.spm_model if self.preprocessor is not None else None
        if format == "huggingface":
            return save_huggingface(self.task_model, preset_dir, spm,
                                    self.task_settings().get("label_list"))
        if format != "xlnet_tf2":
            raise ValueError(f"format must be xlnet_tf2 or huggingface, got {format!r}.")
        settings = self.task_settings()
        if "seq_len" not in settings:
            raise ValueError("save_to_preset needs a preprocessor (its seq_len and SentencePiece "
                             "model are part of the preset).")
        return saving.save_task_directory(self.task_model, preset_dir, settings, spm)

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable,
                "preprocessor": (None if self.preprocessor is None else
                                 keras.saving.serialize_keras_object(self.preprocessor)),
                **{key: getattr(self, key) for key in self.CONFIG_KEYS}}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)

    # ------------------------------------------------------------------ presets
    @classmethod
    def from_preset(cls, preset: str, **kwargs):
        """keras-hub's constructor: a task directory (ours, or a HuggingFace one of the
        matching class, converted with its head) gives the fine-tuned task; any backbone
        preset (XLNetLMHeadModel.presets names, hub ids, LM directories) gives a fresh head
        on its weights. models/pretrained.py's `load`, the one loader (its _load_preset_model
        says the arguments)."""
        return pretrained.load(cls, preset, **kwargs)


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() and i else c.lower()
                   for i, c in enumerate(name))


def _as_column(values):
    """A Python list / numpy array / tuple of them / dict of them as tensors and arrays whose
    first axis is the example (None stays None)."""
    if isinstance(values, dict):
        return {k: _as_column(v) for k, v in values.items()}
    if isinstance(values, tuple):
        return tuple(_as_column(v) for v in values)
    return tf.convert_to_tensor(values) if isinstance(values, list) else values


def _row_count(column) -> int:
    """The number of examples in an `_as_column` column (its first leaf's first axis)."""
    first = tf.nest.flatten(column)[0]
    return int(first.shape[0])
