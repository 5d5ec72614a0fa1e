"""Bad input to pretraining (run_pretrain.py): damaged prepared data, damaged or moved run
directories, bad flags, full disks and killed runs; see tests/fixtures/battery.py."""

from __future__ import annotations

import json
import os
import re

import pytest

from fixtures.battery import (Case, as_params, bitflip, both, clear, command, copy, each, edit_json,
                              faults, killed, move, on_small_disk, put, read_only, remove, run_case,
                              run_first, says, spawn, stopped, truncate, works)
from fixtures.battery_artefacts import PRETRAIN_FLAGS, artefact

# Each case runs pretraining end to end; its artefacts are training runs.
pytestmark = pytest.mark.slow

PRETRAIN = "experiments/run_pretrain.py"
SHARD = "pass000-dir0-stream000001.tfrecord"


def pretrain(*argv, data="{data}", model_dir="{ws}/run", steps=2, runner=command, kill_at=None):
    extra = {"kill_at": kill_at} if kill_at else {}
    return runner(PRETRAIN, f"--data_dir={data}", f"--model_dir={model_dir}",
                  f"--train_steps={steps}", *PRETRAIN_FLAGS, *argv, **extra)


def resume(*argv, model_dir="{pretrain}", **kw):
    return pretrain(*argv, model_dir=model_dir, steps=6, **kw)


def finished(model_dir: str, step: int, started: int = None, restored: str = None):
    """A check: the run printed its end at `step` (from `started`), its newest checkpoint is
    ckpt-`step`, and attempts.jsonl's last line restored `restored` (relative)."""
    def check(ws, result):
        found = re.search(r"Finished at step (\d+) \(started at (\d+)\)", result.stdout)
        assert found and int(found.group(1)) == step, result.stdout[-2000:]
        if started is not None:
            assert int(found.group(2)) == started, result.stdout[-2000:]
        path = ws.fmt(model_dir)
        assert os.path.exists(os.path.join(path, f"ckpt-{step}.index"))
        with open(os.path.join(path, "checkpoint")) as f:
            assert f'model_checkpoint_path: "ckpt-{step}"' in f.read()
        with open(os.path.join(path, "attempts.jsonl")) as f:
            last = json.loads(f.read().splitlines()[-1])  # the last line is whole
        if restored is not None:
            assert last["restored_from"] == restored, last
        assert f'"{path}' not in open(os.path.join(path, "run_config.json")).read()
    return check


def same_loss_as_in_place(model_dir: str):
    """A check: the run's last loss equals that of the same resume run in place first."""
    def check(ws, result):
        first = ws.notes["first"][0]
        loss = lambda text: re.search(r"last loss (\S+);", text).group(1)  # noqa: E731
        assert loss(result.stdout) == loss(first.stdout), (result.stdout, first.stdout)
        finished(model_dir, 6, 4, "ckpt-4")(ws, result)
    return check




CASES = [
    # --- prepared data
    Case("pretrain/data-dir-missing", pretrain(data="{ws}/none"), clear("--data_dir", "{ws}/none")),
    Case("pretrain/data-dir-not-prepared", pretrain(data="{ws}/empty"),
         clear("{ws}/empty", "record_info.json"), put("{ws}/empty/x.txt", "x")),
    Case("pretrain/manifest-truncated", pretrain(), clear("{data}/record_info.json", "JSON"),
         truncate("{data}/record_info.json")),
    Case("pretrain/manifest-not-an-object", pretrain(), clear("{data}/record_info.json", "object"),
         put("{data}/record_info.json", "[1, 2]\n")),
    Case("pretrain/manifest-other-format", pretrain(), clear("{data}/record_info.json", "format"),
         edit_json("{data}/record_info.json", lambda m: m.update(format="v0"))),
    Case("pretrain/manifest-files-not-a-list", pretrain(), clear("{data}/record_info.json"),
         edit_json("{data}/record_info.json", lambda m: m.update(files=None))),
    Case("pretrain/manifest-missing-key", pretrain(), clear("{data}/record_info.json", "params"),
         edit_json("{data}/record_info.json", lambda m: m.pop("params"))),
    Case("pretrain/manifest-bitflip-in-vocab-size", pretrain(),
         clear("{data}/record_info.json", "vocab_size"),
         bitflip("{data}/record_info.json", after=b'"vocab_size": ')),
    Case("pretrain/manifest-bitflip-in-file-size", pretrain(), clear(f"{{data}}/{SHARD}", "bytes"),
         bitflip("{data}/record_info.json", after=f'"{SHARD}": {{\n      "bytes": '.encode())),
    Case("pretrain/manifest-bitflip-breaks-json", pretrain(),
         clear("{data}/record_info.json", "JSON"),
         bitflip("{data}/record_info.json", after=b'"format"', bit=6)),
    Case("pretrain/record-file-truncated", pretrain(), clear(f"{{data}}/{SHARD}"),
         truncate(f"{{data}}/{SHARD}")),
    Case("pretrain/record-file-missing", pretrain(), clear("{data}", SHARD), remove(f"{{data}}/{SHARD}")),
    Case("pretrain/record-files-bitflip", pretrain(), clear("{data}/pass000-dir", "step 1"),
         each("{data}/*.tfrecord", lambda path: bitflip(path, 40)), changes=("run/*",)),
    Case("pretrain/record-files-replaced-by-text", pretrain(), clear("{data}/pass000-dir"),
         each("{data}/*.tfrecord", lambda path: put(path, b"x" * os.path.getsize(path))),
         changes=("run/*",)),
    Case("pretrain/data-spm-bitflip", pretrain(), clear("SentencePiece model", "{data}"),
         faults(bitflip("{data}/spiece.model", 0.5), edit_json(
             "{data}/record_info.json", lambda m: m.update(spm_model="")))),
    Case("pretrain/data-spm-missing-found-by-manifest", pretrain(),
         works(finished("{ws}/run", 2, 0)), remove("{data}/spiece.model"), changes=("run/*",)),
    Case("pretrain/spm-flag-other-model", pretrain("--spm_model={ws}/other.model"),
         clear("--spm_model", "{ws}/other.model"),
         copy("{original}/xlnet_config.json", "{ws}/other.model")),
    Case("pretrain/eval-data-missing", pretrain("--eval_steps=1", "--eval_data_dir={ws}/none"),
         clear("--eval_data_dir", "{ws}/none")),
    Case("pretrain/eval-without-held-out-data", pretrain("--eval_steps=1"),
         clear("--eval_steps=1", "eval/")),
    # --- flags and architecture
    Case("pretrain/flag-seq-len-differs-from-data", pretrain("--seq_len=64"), clear("seq_len")),
    Case("pretrain/flag-batch-not-divisible", pretrain("--train_batch_size=3"),
         clear("--train_batch_size")),
    Case("pretrain/flag-learning-rate-not-a-number", pretrain("--learning_rate=fast"),
         clear("--learning_rate=fast")),
    Case("pretrain/flag-train-steps-negative", pretrain(steps=-1), clear("--train_steps")),
    Case("pretrain/flag-unexpected-argument", pretrain("stray"), clear("stray")),
    Case("pretrain/flag-gpu-only-attention-on-a-cpu",
         pretrain("--attention_implementation=triton"),
         clear("--attention_implementation=triton runs only in a step traced for a GPU")),
    Case("pretrain/model-config-missing", pretrain("--model_config={ws}/none.json"),
         clear("{ws}/none.json")),
    Case("pretrain/model-config-truncated", pretrain("--model_config={ws}/c.json"),
         clear("{ws}/c.json", "JSON"), faults(copy("{pretrain}/xlnet_config.json", "{ws}/c.json"),
                                              truncate("{ws}/c.json"))),
    Case("pretrain/model-config-negative-layers", pretrain("--model_config={ws}/c.json"),
         clear("{ws}/c.json", "n_layer"),
         faults(copy("{pretrain}/xlnet_config.json", "{ws}/c.json"),
                edit_json("{ws}/c.json", lambda c: c.update(n_layer=-2)))),
    Case("pretrain/model-config-unknown-key", pretrain("--model_config={ws}/c.json"),
         clear("{ws}/c.json", "n_layers"),
         faults(copy("{pretrain}/xlnet_config.json", "{ws}/c.json"),
                edit_json("{ws}/c.json", lambda c: c.update(n_layers=3)))),
    Case("pretrain/model-config-other-vocabulary", pretrain("--model_config={ws}/c.json"),
         clear("n_token", "vocabulary"),
         faults(copy("{pretrain}/xlnet_config.json", "{ws}/c.json"),
                edit_json("{ws}/c.json", lambda c: c.update(n_token=700)))),
    Case("pretrain/model-dir-is-a-file", pretrain(model_dir="{ws}/file"), clear("{ws}/file"),
         put("{ws}/file", "x")),
    Case("pretrain/init-checkpoint-missing", pretrain("--init_checkpoint={ws}/none"),
         clear("--init_checkpoint", "{ws}/none")),
    # (A pretraining run of the same architecture: {converted} is another one, which the
    # loader refuses before reading a weight.)
    Case("pretrain/init-checkpoint-truncated", pretrain("--init_checkpoint={pretrain}"),
         clear("--init_checkpoint", "{pretrain}", "damaged"),
         truncate("{pretrain}/ckpt-4.data-00000-of-00001")),
    Case("pretrain/init-checkpoint-other-architecture", pretrain("--init_checkpoint={converted}",
                                                                 "--model_config={ws}/c.json"),
         clear("--init_checkpoint", "another architecture", "n_layer 2 (the run's 3)"),
         faults(copy("{pretrain}/xlnet_config.json", "{ws}/c.json"),
                edit_json("{ws}/c.json", lambda c: c.update(n_layer=3)))),
    # --- resuming a damaged, changed, moved or copied run
    Case("pretrain/resume-newest-checkpoint-truncated", resume(),
         works(both(finished("{pretrain}", 6, 2, "ckpt-2"), says("ckpt-4 is unreadable"))),
         truncate("{pretrain}/ckpt-4.data-00000-of-00001"), changes=("pretrain/*",)),
    Case("pretrain/resume-every-checkpoint-truncated", resume(),
         clear("No checkpoint in {pretrain} could be read", "ckpt-4", "ckpt-2"),
         faults(truncate("{pretrain}/ckpt-4.data-00000-of-00001"),
                truncate("{pretrain}/ckpt-2.data-00000-of-00001"))),
    Case("pretrain/resume-every-index-bitflip", resume(),
         clear("No checkpoint in {pretrain} could be read"),
         faults(bitflip("{pretrain}/ckpt-4.index", 0.5), bitflip("{pretrain}/ckpt-2.index", 0.5))),
    Case("pretrain/resume-state-file-garbage", resume(),
         works(finished("{pretrain}", 6, 4, "ckpt-4")),
         put("{pretrain}/checkpoint", b"\xff\xfe garbage \x00"), changes=("pretrain/*",)),
    Case("pretrain/resume-run-config-truncated", resume(),
         clear("{pretrain}/run_config.json", "JSON"), truncate("{pretrain}/run_config.json")),
    Case("pretrain/resume-changed-fixed-setting", resume("--mem_len=8"), clear("--mem_len")),
    Case("pretrain/resume-other-architecture", resume("--model_config={ws}/c.json"),
         clear("{pretrain}"),
         faults(copy("{pretrain}/xlnet_config.json", "{ws}/c.json"),
                edit_json("{ws}/c.json", lambda c: c.update(d_inner=96)))),
    Case("pretrain/resume-memory-file-truncated", resume(),
         clear("{pretrain}/memory/worker-000/ckpt-4", "damaged"),
         truncate("{pretrain}/memory/worker-000/ckpt-4.data-00000-of-00001")),
    Case("pretrain/resume-attempts-log-cut", resume(),
         works(finished("{pretrain}", 6, 4, "ckpt-4")),
         put("{pretrain}/attempts.jsonl", lambda ws: open(
             ws.fmt("{pretrain}/attempts.jsonl"), "rb").read() + b'{"attempt": 2, "sta'),
         changes=("pretrain/*",)),
    Case("pretrain/resume-moved-run", resume(model_dir="{ws}/moved/run"),
         works(same_loss_as_in_place("{ws}/moved/run")),
         faults(copy("{pretrain}", "{ws}/inplace"), run_first(resume(model_dir="{ws}/inplace")),
                move("{pretrain}", "{ws}/moved/run")),
         changes=("moved/run/*",)),
    Case("pretrain/resume-copied-run-leaves-original", resume(model_dir="{ws}/copy"),
         works(finished("{ws}/copy", 6, 4, "ckpt-4")), copy("{pretrain}", "{ws}/copy"),
         changes=("copy/*",)),
    # --- killed while writing a checkpoint, full disks
    Case("pretrain/killed-writing-checkpoint-state-then-rerun", resume(),
         works(both(finished("{pretrain}", 6, 6), says("names ckpt-4, but ckpt-6 is complete"))),
         killed(resume(runner=spawn, kill_at="tensorflow.python.lib.io.file_io|"
                                             "atomic_write_string_to_file|1|checkpoint"),
                protect=("pretrain/ckpt-*", "pretrain/memory/*")),
         changes=("pretrain/*",)),
    Case("pretrain/killed-writing-memory-then-rerun", resume(),
         works(finished("{pretrain}", 6)),
         killed(resume(runner=spawn, kill_at="xlnet_tf2.models.memory|MemoryState.save|1|"),
                protect=("pretrain/ckpt-*", "pretrain/memory/*")),
         changes=("pretrain/*",)),
    Case("pretrain/disk-full-during-run", pretrain(model_dir="{ws}/disk/run", steps=4),
         clear("{ws}/disk/run", "No space left on device"),
         on_small_disk("{ws}/disk", 1_500_000), changes=("disk/*",)),
    Case("pretrain/disk-full-resume-keeps-checkpoints", resume(model_dir="{ws}/disk/run"),
         clear("{ws}/disk/run", "No space left on device"),
         on_small_disk("{ws}/disk", 200_000, [("{pretrain}", "run")]), changes=("disk/run/*",)),
    Case("pretrain/read-only-model-dir", pretrain(model_dir="{ws}/ro/run"),
         clear("{ws}/ro/run", "Read-only file system"), read_only("{ws}/ro")),
    Case("pretrain/diverged", pretrain("--learning_rate=1e38", "--warmup_steps=0", steps=4),
         stopped("loss", "--learning_rate"), changes=("run/*",)),
]


@pytest.mark.parametrize("case", as_params(CASES))
def test_pretraining(case, tmp_path):
    run_case(case, str(tmp_path), artefact)
