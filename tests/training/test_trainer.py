"""The one training loop (xlnet_tf2/training/trainer.py): pretraining and fine-tuning both run
through it; fine-tuning honours steps_per_loop and gives the same result on two replicas as
on one; the evaluation cadence and loop boundaries of a toy regression task."""

import inspect
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2 import config_flags
from xlnet_tf2.training.task import Task
from xlnet_tf2.training.trainer import Trainer, TrainingDivergedError

from fixtures.paths import REPO_ROOT as ROOT
from fixtures.toy_task import toy_trainer as _toy_trainer

# A tiny classifier run; imported by the two-replica subprocess below as well.
FINETUNE_RUN = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf
    from xlnet_tf2.config import XLNetConfig
    from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
    from xlnet_tf2.tasks.losses import classification_loss
    from xlnet_tf2.tasks.finetuning import FinetuneConfig, FinetuneTask
    from xlnet_tf2.training.trainer import Trainer

    def finetune(model_dir, steps_per_loop=1, strategy=None, eval_fn=None, wrap_loop=None):
        # The paper's fine-tuning dropout: masks are keyed by each row's place in the global
        # batch, so one device and two replicas draw the same ones.
        config = XLNetConfig.preset("tiny", n_layer=2, d_model=32, n_head=2, d_head=16,
                                    d_inner=64, n_token=300, dropout=0.1, dropatt=0.1)
        ids = np.random.RandomState(0).randint(9, 300, [32, 16]).astype(np.int32)
        features = {"input_ids": ids, "segment_ids": np.zeros_like(ids),
                    "attention_mask": np.ones_like(ids),
                    "label": (ids[:, 0] > 150).astype(np.int32)}

        def dataset_fn(context):  # no shuffle: replica r of n gets rows r, r+n, ... of a batch
            batch = context.get_per_replica_batch_size(8)
            return tf.data.Dataset.from_tensor_slices(features).repeat().batch(
                batch, drop_remainder=True)

        cfg = FinetuneConfig.flat(model_dir=model_dir, train_steps=4, train_batch_size=8,
                             learning_rate=1e-3, warmup_steps=1, weight_decay=0.01,
                             layer_decay=0.5, eval_every=4, log_steps=2,
                             steps_per_loop=steps_per_loop, best_metric="lsum")
        task = FinetuneTask(cfg, model_fn=lambda: SequenceClassifier(config, 2, head_dropout=0.1),
                            loss_fn=classification_loss, dataset_fn=dataset_fn, eval_fn=eval_fn,
                            seq_len=16)
        trainer = Trainer(task, strategy=strategy)
        if wrap_loop is not None:
            trainer._loop = wrap_loop(trainer._loop)
        return trainer, task.result(trainer.train())
""")
exec(FINETUNE_RUN)


def test_pretraining_and_finetuning_are_tasks_of_one_trainer(tmp_path):
    from xlnet_tf2.tasks.finetuning import FinetuneTask
    from xlnet_tf2.tasks.pretraining import PretrainTask

    # The loop takes a task, its loop settings, a strategy and the device to trace the step
    # for (layers/step_plan.py); nothing else.
    assert list(inspect.signature(Trainer).parameters) == ["task", "loop_config", "strategy",
                                                           "device"]
    assert issubclass(PretrainTask, Task) and issubclass(FinetuneTask, Task)
    trainer, _ = finetune(str(tmp_path / "x"), eval_fn=lambda m: {"lsum": 0.0})
    assert type(trainer) is Trainer and type(trainer.task) is FinetuneTask


def test_finetuning_honours_steps_per_loop(tmp_path):
    """Four steps as one loop (one call of the loop's tf.function) give the same evaluations
    and weights as four single-step loops."""
    results = {}
    for steps_per_loop in (1, 4):
        calls = []

        def eval_fn(model, calls=calls):
            logits = model({"input_ids": tf.fill([2, 16], 11),
                            "segment_ids": tf.zeros([2, 16], tf.int32),
                            "attention_mask": tf.ones([2, 16], tf.int32)})["logits"]
            return {"lsum": float(tf.reduce_sum(logits))}

        def counted(original):
            def loop(*args):
                calls.append(int(args[-1]))
                return original(*args)
            return loop

        trainer, result = finetune(str(tmp_path / f"spl{steps_per_loop}"), steps_per_loop,
                                   eval_fn=eval_fn, wrap_loop=counted)
        results[steps_per_loop] = (calls, result, [v.numpy() for v in trainer.model.variables])
    # steps_per_loop=1: a loop per step; 4 with log_steps=2: loops end at the log step.
    assert results[1][0] == [1, 1, 1, 1] and results[4][0] == [2, 2]
    one, four = results[1][1], results[4][1]
    assert one.final_step == four.final_step == 4
    assert [e["step"] for e in four.evaluations] == [4]
    assert four.evaluations[0]["lsum"] == pytest.approx(one.evaluations[0]["lsum"], abs=1e-5)
    assert four.last_log["train/loss"] == pytest.approx(one.last_log["train/loss"], abs=1e-6)
    for a, b in zip(results[1][2], results[4][2]):
        np.testing.assert_allclose(a, b, atol=1e-6)


MIRRORED_FINETUNE = FINETUNE_RUN + textwrap.dedent("""
    import json, sys
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    out = {}
    for name, strategy in (("one", tf.distribute.OneDeviceStrategy("/cpu:0")),
                           ("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
        trainer, result = finetune(sys.argv[1] + "/" + name, steps_per_loop=2, strategy=strategy)
        out[name] = {"replicas": strategy.num_replicas_in_sync,
                     "loss": result.last_log["train/loss"],
                     "weights": float(sum(np.abs(v.numpy()).sum()
                                          for v in trainer.model.trainable_variables))}
    print("RESULT" + json.dumps(out))
""")


@pytest.mark.slow
def test_finetuning_on_two_replicas_matches_one_device(tmp_path):
    proc = subprocess.run([sys.executable, "-c", MIRRORED_FINETUNE, str(tmp_path)], cwd=ROOT,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=""),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert out["mirrored"]["replicas"] == 2
    assert out["mirrored"]["loss"] == pytest.approx(out["one"]["loss"], abs=1e-5)
    assert out["mirrored"]["weights"] == pytest.approx(out["one"]["weights"], rel=1e-5)


def test_toy_regression_evaluations_loop_boundaries_and_nan_stop(tmp_path):
    called = []
    trainer = _toy_trainer(tmp_path / "a", evaluated=called)
    lengths = []
    loop = trainer._loop
    trainer._loop = lambda *args: (lengths.append(int(args[-1])), loop(*args))[1]
    result = trainer.train()
    assert called == [3, 6, 9, 10]  # every eval_every steps and at the end
    assert result.evaluations == [{"step": s} for s in called]
    assert lengths == [3, 2, 1, 3, 1]  # loops end at evaluation (3, 6, 9) and log (5, 10) steps
    losses = [s["loss"] for s in result.steps]
    assert losses[-1] < 0.5 * losses[0]  # it learns
    assert tf.train.latest_checkpoint(str(tmp_path / "a")).endswith("ckpt-10")

    bad = _toy_trainer(tmp_path / "b", learning_rate=float("inf"))
    # Step 1's loss is computed before its (non-finite) update, step 2's after it.
    with pytest.raises(FloatingPointError, match="at step 2"):
        bad.train()
    assert issubclass(TrainingDivergedError, FloatingPointError)


@pytest.mark.xla
def test_first_step_is_the_step_train_runs_first(tmp_path):
    """Trainer.first_step: the compiled step and its arguments for the first batch; running it
    gives the loss and gradient norm of train()'s first step from the same weights."""
    exported = _toy_trainer(tmp_path / "a", jit_compile=True, train_steps=1)
    step_fn, (features, state, step) = exported.first_step()
    assert exported.whole_step_compiled and step_fn is exported._step_fn
    task = exported.task
    np.testing.assert_array_equal(features["x"].numpy(), task.x[:8])  # the pipeline's first batch
    assert state == [] and int(step) == 0
    assert exported.optimizer.built  # its slots exist before any trace
    weights = [v.numpy() for v in exported.model.weights]
    _, loss, grad_norm = step_fn(features, state, step)
    assert int(exported.optimizer.iterations.numpy()) == 1  # it updated the variables

    trained = _toy_trainer(tmp_path / "b", jit_compile=True, train_steps=1)
    for variable, value in zip(trained.model.weights, weights):
        variable.assign(value)  # fresh trainers are seeded alike; made certain here
    first = trained.train().steps[0]
    assert float(loss) == pytest.approx(first["loss"], rel=1e-6)
    assert float(grad_norm) == pytest.approx(first["grad_norm"], rel=1e-6)

    eager = _toy_trainer(tmp_path / "c", jit_compile=False)
    with pytest.raises(config_flags.RunConfigError, match="one XLA computation only with "
                                                          "--jit_compile and one replica"):
        eager.first_step()
