"""What tracing the training step costs every run at its start: a tiny pretraining Trainer's
step (dropout 0.1 on every site, the paper's setting) traced for the CPU.

Dropout draws call one traced hash per draw's sizes (layers/dropout.py's `_traced_hash`)
instead of building the hash's operations at each site, and the learning-rate schedule is
traced once for the update and once for weight decay, not once per decayed variable
(training/step.py's `XLNetAdamW._apply_weight_decay`). Without the two this step held 7,287
operations; with them 4,150 (BENCHMARKS.md, "The step's trace")."""

import pytest

from fixtures.traced_graphs import CALLS, hash_functions
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.data.pretrain_dataset import DataShape
from xlnet_tf2.tasks.pretraining import PretrainTask
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from xlnet_tf2.training.step import LinearWarmupLinearDecay
from xlnet_tf2.training.trainer import Trainer
from benchmarks.tools.synthetic_data import SyntheticPretrainData

# A budget, not a measurement: 10% over the 4,150 operations measured (2026-12-06).
OPERATIONS_AT_MOST = 4600


@pytest.mark.xla  # Trainer.first_step: the step compiled as one XLA computation
def test_the_traced_step_draws_dropout_through_traced_hashes_and_its_schedule_twice(
        tmp_path, monkeypatch):
    schedule_calls = []
    real_call = LinearWarmupLinearDecay.__call__

    def counted(self, step):
        schedule_calls.append(step)
        return real_call(self, step)

    monkeypatch.setattr(LinearWarmupLinearDecay, "__call__", counted)
    config = PretrainConfig.flat(
        model_dir=str(tmp_path / "run"), data_dir=("synthetic",), model_config="tiny",
        train_batch_size=4, train_steps=1, mem_len=8, warmup_steps=0, jit_compile=True,
        peak_tflops=1.0, dropout=0.1, dropatt=0.1)
    data = SyntheticPretrainData(DataShape(seq_len=16, reuse_len=8, num_predict=4,
                                           bi_data=True), vocab_size=100)
    trainer = Trainer(PretrainTask(config, data=data,
                                   architecture=XLNetConfig.preset("tiny", n_token=100)))
    step_fn, args = trainer.first_step(device="cpu")
    schedule_calls.clear()  # building the Trainer may read the learning rate
    graph = step_fn.get_concrete_function(*args).graph

    # The schedule: once for the update, once for weight decay, however many variables decay.
    optimizer = getattr(trainer.optimizer, "inner_optimizer", trainer.optimizer)
    decayed = [v for v in trainer.model.trainable_variables if optimizer._use_weight_decay(v)]
    assert len(decayed) >= 10
    assert len(schedule_calls) == 2, len(schedule_calls)

    # Dropout: every hash runs inside a traced hash the step calls.
    graph_def = graph.as_graph_def()
    hashes = hash_functions(graph_def)
    assert not any(node.op == "BitwiseXor" for node in graph_def.node)
    hash_calls = [node for node in graph_def.node
                  if node.op in CALLS and node.attr["f"].func.name in hashes]
    assert hashes and len(hash_calls) > len(hashes)  # draws of one size share a traced hash

    operations = len(graph.get_operations())
    assert operations <= OPERATIONS_AT_MOST, (
        f"the tiny step traces {operations} operations (budget {OPERATIONS_AT_MOST}): every "
        "run pays for them at its start")
