"""Fine-tuning's data position: batches are a function of the step, so a resumed run trains on
exactly what the uninterrupted run did (dropout 0.1 included), and every topology reads the
same global batches."""

import numpy as np
import tensorflow as tf

from xlnet_tf2.data.finetune_batches import global_batches_fn
from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
from xlnet_tf2.tasks.losses import classification_loss
from xlnet_tf2.tasks.finetuning import FinetuneConfig, FinetuneTask
from xlnet_tf2.training.trainer import Trainer

from fixtures.tiny_finetune import CONFIG, FEATURES, IDS


def _run(model_dir, stop_at):
    """A 6-step schedule, stopped after step `stop_at` (a resume continues it)."""
    cfg = FinetuneConfig.flat(model_dir=str(model_dir), train_steps=6, train_batch_size=8,
                              learning_rate=1e-3, warmup_steps=1, eval_every=100, log_steps=1,
                              save_steps=2, keep_checkpoints=5, best_metric="accuracy")
    task = FinetuneTask(cfg, model_fn=lambda: SequenceClassifier(CONFIG, 2, head_dropout=0.1),
                        loss_fn=classification_loss,
                        dataset_fn=global_batches_fn(FEATURES, 8, seed=5), eval_fn=None,
                        seq_len=16)
    runner = Trainer(task)
    if stop_at < 6:  # kill the run after the checkpoint of step `stop_at`
        loop = runner.save_checkpoint

        def save_then_stop(step, state):
            path = loop(step, state)
            if step == stop_at:
                raise KeyboardInterrupt
            return path

        runner.save_checkpoint = save_then_stop
        try:
            runner.train()
        except KeyboardInterrupt:
            pass
        return runner, None
    return runner, task.result(runner.train())


def test_resumed_finetuning_equals_the_uninterrupted_run(tmp_path):
    runner, result = _run(tmp_path / "straight", 6)
    straight = [s["loss"] for s in result.steps]
    _run(tmp_path / "resumed", 4)  # stops after the checkpoint of step 4
    runner2, result2 = _run(tmp_path / "resumed", 6)
    assert result2.start_step == 4
    assert [s["loss"] for s in result2.steps] == straight[4:]  # bit for bit
    for a, b in zip(runner.model.variables, runner2.model.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_global_batches_are_the_same_on_any_topology():
    make = global_batches_fn(FEATURES, 8, seed=5)

    def rows(context, start_step, steps):
        per_replica = list(make(context, start_step).take(steps * 2 if context else steps))
        return np.concatenate([b["input_ids"] for b in per_replica])

    one = rows(None, 0, 12)  # 12 steps of 8: more than two epochs of 40
    two = rows(tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                          num_replicas_in_sync=2), 0, 12)
    np.testing.assert_array_equal(one, two)
    # Two hosts: each pipeline yields its replica's half of every global batch.
    hosts = [list(make(tf.distribute.InputContext(2, p, 2), 0).take(12)) for p in (0, 1)]
    interleaved = np.concatenate([np.concatenate([hosts[0][s]["input_ids"],
                                                  hosts[1][s]["input_ids"]])
                                  for s in range(12)])
    np.testing.assert_array_equal(one, interleaved)
    # Each epoch is a permutation of the examples; the epochs differ.
    epoch0, epoch1 = one[:40], one[40:80]
    assert sorted(map(tuple, epoch0)) == sorted(map(tuple, IDS))
    assert not np.array_equal(epoch0, epoch1)
    # Resuming at step 7 reads what the straight run read from step 7 on.
    np.testing.assert_array_equal(rows(None, 7, 5), one[56:96])
