"""The Trainer's step as a portable XLA program, for another XLA client (JAX's, on a machine
without TensorFlow) to compile, run and time: the very computation TensorFlow hands to XLA.

`export_step(trainer, outdir, shape, validate)` writes OUTDIR (built beside it, then put in
place whole, so no file of an earlier export lingers):

  step.hlo.pb   the HloModuleProto of `Trainer.first_step`'s step (forward, backward,
                clipping, the optimizer's update). Parameters: the step's explicit arguments
                (the batch's features, the carried state, the step) flattened in tf.nest
                order, then the traced function's captured inputs (the variables: weights,
                optimizer slots and counters) in the concrete function's order. Outputs: the
                new state (one tensor per layer for pretraining's memory), the loss, the
                gradient norm, then the variables' new values, aliased to their parameters
                (the module's input/output aliasing: a runner feeds them back).
  inputs.npz    a0, a1, ...: the explicit arguments, compressed: one real batch of the task's
                input pipeline (its first), the initial carried state, the step.
  meta.json     shape (the caller's), target ("gpu" or "tpu"; for a TPU its tpu_generation),
                precision, n_explicit and explicit (dtype and shape of
                each a<i>), n_captured and captured (the same of each captured input c<i>;
                of the variable, for a variable's handle), trainable_params, flops_per_step
                (the task's count at the shape's batch); with `validate` also tf_loss and
                tf_grad_norm.
  captured.npz  with `validate` or `weights` only: c0, c1, ...: the captured inputs' values
                before the step
                (at XLNet-Base's shape the weights and optimizer slots are over a GB, so a
                timing export leaves them out and a runner fills them at random).

With `validate`, TensorFlow then runs the same first step through `trainer.train()` (the real
loop, from the same weights and batch) and meta.json records its loss and gradient norm, for
a runner to compare with its own.

The step is traced as TensorFlow traces it on the export's target, a GPU or a TPU
(`target`), whatever devices this machine has: every switch of the project between a CPU's
and an accelerator's program (the stored attention-dropout masks, the query stream's shift)
is a property of the step's plan (layers/step_plan.py), which the export traces for the
target (`Trainer.first_step(device=target)`).
"""

from __future__ import annotations

import io
import os
import time
from typing import Dict, List

import numpy as np
import tensorflow as tf
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.compiler.xla.service import hlo_pb2

from xlnet_tf2 import fileio
from xlnet_tf2.training.trainer import Trainer

HLO_FILE = "step.hlo.pb"
INPUTS_FILE = "inputs.npz"
CAPTURED_FILE = "captured.npz"
META_FILE = "meta.json"

_ELEMENT_BYTES = {"PRED": 1, "S8": 1, "U8": 1, "S16": 2, "U16": 2, "F16": 2, "BF16": 2,
                  "S32": 4, "U32": 4, "F32": 4, "S64": 8, "U64": 8, "F64": 8, "C64": 8,
                  "C128": 16}


def hlo_summary(serialized: bytes) -> Dict[str, int]:
    """Sizes of an HloModuleProto: bytes, parameters of the entry computation, and the
    literal constants of all its computations (count, bytes): TensorFlow folds index
    arithmetic of the step into constants that every run of the step reads; conditionals and
    scatters (a CPU's program has them: stored dropout masks, the coordinate gather's
    gradient; an accelerator's has neither)."""
    module = hlo_pb2.HloModuleProto.FromString(serialized)
    constants = constant_bytes = conditionals = scatters = 0
    for computation in module.computations:
        for instruction in computation.instructions:
            if instruction.opcode == "constant":
                constants += 1
                name = xla_data_pb2.PrimitiveType.Name(instruction.shape.element_type)
                constant_bytes += (int(np.prod(instruction.shape.dimensions, dtype=np.int64))
                                   * _ELEMENT_BYTES.get(name, 0))
            elif instruction.opcode == "conditional":
                conditionals += 1
            elif instruction.opcode == "scatter":
                scatters += 1
    return {"bytes": len(serialized), "parameters": len(module.host_program_shape.parameters),
            "constants": constants, "constant_bytes": constant_bytes,
            "conditionals": conditionals, "scatters": scatters}


def _spec(t) -> List:
    return [t.dtype.name, [int(d) for d in t.shape]]


def _captured(concrete) -> list:
    """The concrete function's captured inputs in order, each as what it stands for: a
    variable (for a resource handle) or the captured tensor itself."""
    by_handle = {id(v.handle): v for v in concrete.variables}
    captured = []
    for i, t in enumerate(concrete.captured_inputs):
        if t.dtype == tf.resource:
            if id(t) not in by_handle:
                raise RuntimeError(f"Captured input {i} of the step is a resource that is none "
                                   "of its variables; the export cannot say what it holds.")
            captured.append(by_handle[id(t)])
        else:
            captured.append(t)
    return captured


def _save_npz(path: str, arrays: Dict[str, np.ndarray]) -> None:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    fileio.write_atomically(path, buffer.getvalue())


def export_step(trainer: Trainer, outdir: str, shape: dict, validate: bool = False,
                target: str = "gpu", tpu_generation: str = "v5e", weights: bool = False) -> dict:
    """Writes OUTDIR as the module docstring says, the step traced for `target` ("gpu" or
    "tpu"; a TPU of `tpu_generation`, which the Pallas kernels are written for); returns
    meta.json's values plus `hlo` (the module's `hlo_summary`) and `trace_s` (seconds to
    trace and lower the step). `weights`: captured.npz without TensorFlow's step (a step this
    machine cannot run, whose runner compares it with another's).

    `trainer` must be fresh (its step not traced yet: the trace made here is the one kept) and,
    with `validate`, set to train one step (train_steps 1) in a model_dir without checkpoints.
    """
    if validate and trainer.loop_config.train_steps != 1:
        raise ValueError(f"validate runs one step of the Trainer; its train_steps is "
                         f"{trainer.loop_config.train_steps}.")
    if target not in ("gpu", "tpu"):
        raise ValueError(f"export_step traces for an accelerator, 'gpu' or 'tpu'; got {target!r}.")
    # A step function of its own, traced with the target's plan; the validation run below
    # traces the Trainer's own step for this machine (a GPU's program can hold calls only a
    # GPU runs: layers/kernels/cudnn.py's attention).
    step_fn, args = trainer.first_step(
        device=target, tpu_generation=tpu_generation if target == "tpu" else None)
    start = time.perf_counter()
    concrete = step_fn.get_concrete_function(*args)
    hlo = step_fn.experimental_get_compiler_ir(*args)(stage="hlo_serialized")
    trace_s = time.perf_counter() - start
    summary = hlo_summary(hlo)
    explicit = tf.nest.flatten(args)
    captured = _captured(concrete)
    if summary["parameters"] != len(explicit) + len(captured):
        raise RuntimeError(f"The step's XLA program has {summary['parameters']} parameters, not "
                           f"the {len(explicit)} arguments + {len(captured)} captured inputs "
                           "of its function: the parameter order would be wrong.")
    task = trainer.task
    meta = {
        "shape": shape, "target": target, "precision": trainer.loop_config.precision,
        **({"tpu_generation": tpu_generation} if target == "tpu" else {}),
        "n_explicit": len(explicit), "explicit": [_spec(t) for t in explicit],
        "n_captured": len(captured), "captured": [_spec(t) for t in captured],
        "trainable_params": int(sum(np.prod(v.shape) for v in
                                    task.trainable_variables(trainer.model))),
        "flops_per_step": float(task.flops_per_step(trainer.loop_config.train_batch_size,
                                                    trainer.num_replicas))}
    staging = fileio.staging_directory(outdir)
    try:
        fileio.write_atomically(os.path.join(staging, HLO_FILE), hlo)
        _save_npz(os.path.join(staging, INPUTS_FILE),
                  {f"a{i}": t.numpy() for i, t in enumerate(explicit)})
        if validate or weights:  # the values before the step
            _save_npz(os.path.join(staging, CAPTURED_FILE),
                      {f"c{i}": t.numpy() for i, t in enumerate(captured)})
        if validate:  # then the step in TensorFlow
            first = trainer.train().steps[0]
            meta.update(tf_loss=first["loss"], tf_grad_norm=first["grad_norm"])
        fileio.write_json_atomically(os.path.join(staging, META_FILE), meta)
        fileio.replace_directory(staging, outdir)
    finally:
        fileio.rmtree(staging)  # gone already when it was put in place
    return dict(meta, hlo=summary, trace_s=trace_s)
