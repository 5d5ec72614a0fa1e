"""Bad input to export (export_saved_model.py) and feature extraction (extract_features.py):
damaged, copied and moved model directories, flags, killed runs and full disks; see
tests/fixtures/battery.py."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from fixtures.battery import (Case, as_params, bitflip, both, clear, command, copy, edit_json,
                              faults, killed, move, on_small_disk, put, remove, run_case, run_first,
                              says, spawn, truncate, works)
from fixtures.battery_artefacts import artefact

pytestmark = pytest.mark.slow  # its artefacts are fine-tuning runs, each case a command run

EXPORT, EXTRACT = "experiments/export_saved_model.py", "experiments/extract_features.py"
TEXTS = ["Return the sum of two numbers.", "Parse an email message from a file.",
         "Run the event loop until the future is done."]


def export(*argv, model_dir="{finetune}", kind="classification", export_dir="{ws}/export",
           runner=command, kill_at=None):
    extra = {"kill_at": kill_at} if kill_at else {}
    return runner(EXPORT, f"--model_dir={model_dir}", f"--kind={kind}",
                  f"--export_dir={export_dir}", *argv, **extra)


def extract(*argv, model_dir="{pretrain}", inputs="{ws}/texts.txt", output="{ws}/f.npz",
            runner=command, kill_at=None):
    extra = {"kill_at": kill_at} if kill_at else {}
    return runner(EXTRACT, f"--model_dir={model_dir}", f"--input_file={inputs}",
                  f"--output_file={output}", "--batch_size=2", *argv, **extra)


TEXT_FILE = put("{ws}/texts.txt", "\n".join(TEXTS) + "\n")


def probabilities(export_dir: str):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - the SentencePiece op

    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    return serve(text=tf.constant(TEXTS))["probabilities"].numpy()


def serves_as_artefact(version_dir: str):
    """A check: the new export answers exactly as the artefact export of the run in place."""
    def check(ws, result):
        path = ws.fmt(version_dir)
        assert os.path.exists(os.path.join(path, "saved_model.pb"))
        np.testing.assert_array_equal(probabilities(path),
                                      probabilities(os.path.join(artefact("export"), "1")))
        assert not [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".")]
    return check


def exported(version_dir: str, seq_len: int = None):
    def check(ws, result):
        path = ws.fmt(version_dir)
        assert os.path.exists(os.path.join(path, "saved_model.pb"))
        with open(os.path.join(path, "assets.extra", "task.json")) as f:
            info = json.load(f)
        if seq_len is not None:
            assert info["seq_len"] == seq_len, info
        assert not [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".")]
    return check


def features(path: str, reference: str = None):
    """A check: the feature file holds every text (and equals `reference`'s features)."""
    def check(ws, result):
        out = np.load(ws.fmt(path))
        assert list(out["texts"]) == TEXTS and out["pooled"].shape[0] == len(TEXTS)
        if reference is not None:
            np.testing.assert_array_equal(out["pooled"], np.load(ws.fmt(reference))["pooled"])
        assert not [n for n in os.listdir(os.path.dirname(ws.fmt(path))) if ".tmp-" in n]
    return check




CASES = [
    # --- flags
    Case("export/flag-seq-len-zero", export("--seq_len=0", kind="features"), clear("--seq_len")),
    Case("export/flag-seq-len-two", export("--seq_len=2", kind="features",
                                           model_dir="{ws}/none"),
         clear("--seq_len=2", "at least 3")),
    Case("export/flag-seq-len-not-for-this-task", export("--seq_len=64"),
         clear("--seq_len", "--kind=features")),
    Case("export/flag-kind-unknown", export(kind="ner"), clear("--kind")),
    Case("export/flag-kind-differs-from-task-json", export(kind="race"),
         clear("--kind=race", "task.json", "classification")),
    Case("export/flag-version-negative", export("--version=-1"), clear("--version")),
    Case("export/model-dir-missing", export(model_dir="{ws}/none"),
         clear("--model_dir", "{ws}/none")),
    Case("export/model-dir-not-a-model", export(model_dir="{ws}/empty"),
         clear("{ws}/empty", "xlnet_config.json"), put("{ws}/empty/x", "x")),
    Case("export/export-dir-is-a-file", export(export_dir="{ws}/file"), clear("{ws}/file"),
         put("{ws}/file", "x")),
    # --- damaged, copied and moved runs
    Case("export/best-truncated", export(), clear("{finetune}/best/ckpt-2", "damaged"),
         truncate("{finetune}/best/ckpt-2.data-00000-of-00001")),
    Case("export/best-index-bitflip", export(), clear("{finetune}/best/ckpt-2"),
         bitflip("{finetune}/best/ckpt-2.index", 0.5)),
    Case("export/copied-run-best-deleted", export(model_dir="{ws}/copy"),
         clear("{ws}/copy/best/ckpt-2.index", "best_eval.json", "--checkpoint=latest"),
         faults(copy("{finetune}", "{ws}/copy"), remove("{ws}/copy/best"))),
    Case("export/copied-run-best-truncated", export(model_dir="{ws}/copy"),
         clear("{ws}/copy/best/ckpt-2", "damaged"),
         faults(copy("{finetune}", "{ws}/copy"),
                truncate("{ws}/copy/best/ckpt-2.data-00000-of-00001"))),
    Case("export/latest-truncated", export("--checkpoint=latest"),
         clear("{finetune}/ckpt-4", "damaged"), truncate("{finetune}/ckpt-4.data-00000-of-00001")),
    Case("export/best-eval-truncated-without-state-file", export(),
         clear("{finetune}/best_eval.json", "JSON"),
         faults(remove("{finetune}/best/checkpoint"), truncate("{finetune}/best_eval.json"))),
    Case("export/moved-run", export(model_dir="{ws}/moved/run"),
         works(serves_as_artefact("{ws}/export/1")), move("{finetune}", "{ws}/moved/run"),
         changes=("export/*",)),
    Case("export/old-format-run-reads-its-own-best", export(),
         works(serves_as_artefact("{ws}/export/1")),
         faults(remove("{finetune}/best/checkpoint"),
                edit_json("{finetune}/best_eval.json", lambda b: b.update(
                    checkpoint="/elsewhere/finetune/best/ckpt-2"))),
         changes=("export/*",)),
    Case("export/task-json-truncated", export(), clear("{finetune}/task.json", "JSON"),
         truncate("{finetune}/task.json")),
    Case("export/task-json-unknown-key", export(), clear("{finetune}/task.json", "labels"),
         edit_json("{finetune}/task.json", lambda t: t.update(labels=["a"]))),
    Case("export/task-json-seq-len-not-a-number", export(), clear("{finetune}/task.json",
                                                                 "seq_len"),
         edit_json("{finetune}/task.json", lambda t: t.update(seq_len="long"))),
    Case("export/task-json-one-label", export(), clear("{finetune}/task.json", "label_list"),
         edit_json("{finetune}/task.json", lambda t: t.update(label_list=["only"]))),
    Case("export/config-truncated", export(), clear("{finetune}/xlnet_config.json", "JSON"),
         truncate("{finetune}/xlnet_config.json")),
    Case("export/config-other-width", export(), clear("{finetune}/best/ckpt-2"),
         edit_json("{finetune}/xlnet_config.json", lambda c: c.update(d_inner=96))),
    Case("export/spm-missing", export(), clear("{finetune}/spiece.model"),
         remove("{finetune}/spiece.model")),
    Case("export/spm-truncated", export(), clear("{finetune}/spiece.model"),
         truncate("{finetune}/spiece.model")),
    # --- versions, kills, full disks
    Case("export/next-version-beside-existing", export(export_dir="{ws}/base"),
         works(exported("{ws}/base/2")), copy("{export}", "{ws}/base"),
         changes=("base/2/*",)),
    Case("export/version-exists", export("--version=1", export_dir="{ws}/base"),
         clear("{ws}/base/1", "exists"), copy("{export}", "{ws}/base")),
    Case("export/killed-then-rerun", export(),
         works(both(exported("{ws}/export/1"),
                    says("an incomplete export left by a killed run"))),
         killed(export(runner=spawn, kill_at="xlnet_tf2.fileio|replace_directory|1|")),
         changes=("export/*",)),
    Case("export/disk-full", export(export_dir="{ws}/disk/export"),
         clear("{ws}/disk/export/1", "No space left on device"),
         on_small_disk("{ws}/disk", 400_000)),
    Case("export/disk-full-keeps-earlier-versions", export(export_dir="{ws}/disk/base"),
         clear("{ws}/disk/base/2", "No space left on device"),
         on_small_disk("{ws}/disk", 300_000, [("{export}", "base")])),
    # --- features
    Case("export/features-from-pretraining-latest-truncated",
         export(model_dir="{pretrain}", kind="features"),
         clear("{pretrain}/ckpt-4", "damaged"), truncate("{pretrain}/ckpt-4.data-00000-of-00001")),
    Case("export/features-seq-len", export("--seq_len=16", model_dir="{converted}",
                                           kind="features"),
         works(exported("{ws}/export/1", seq_len=16)), changes=("export/*",)),
    Case("export/features-run-config-truncated", export(model_dir="{pretrain}", kind="features"),
         clear("{pretrain}/run_config.json", "JSON"), truncate("{pretrain}/run_config.json")),
    # --- extract_features
    Case("extract/input-empty", extract(), clear("{ws}/texts.txt", "empty"),
         put("{ws}/texts.txt", "")),
    Case("extract/input-not-utf8", extract(), clear("{ws}/texts.txt", "line 2", "UTF-8"),
         put("{ws}/texts.txt", b"good\ncaf\xe9\n")),
    Case("extract/input-missing", extract(inputs="{ws}/none.txt"),
         clear("--input_file", "{ws}/none.txt")),
    Case("extract/input-is-a-directory", extract(inputs="{ws}/adir"), clear("{ws}/adir"),
         put("{ws}/adir/x", "x")),
    Case("extract/output-extension", extract(output="{ws}/f.txt"), clear("--output_file", ".npz")),
    Case("extract/output-in-a-new-directory", extract(output="{ws}/new/f.npz"),
         works(features("{ws}/new/f.npz")), TEXT_FILE, changes=("new/*",)),
    Case("extract/output-is-a-directory", extract(output="{ws}/adir.npz"),
         clear("{ws}/adir.npz"), faults(TEXT_FILE, put("{ws}/adir.npz/x", "x"))),
    Case("extract/flag-batch-size-not-a-number", extract("--batch_size=some"),
         clear("--batch_size=some")),
    Case("extract/flag-seq-len-zero", extract("--seq_len=0"), clear("--seq_len")),
    # A length below <sep> + <cls> + one token is refused before any file is read.
    Case("extract/flag-seq-len-one", extract("--seq_len=1", model_dir="{ws}/none",
                                             inputs="{ws}/none.txt"),
         clear("--seq_len=1", "at least 3")),
    Case("extract/flag-seq-len-two", extract("--seq_len=2", model_dir="{ws}/none"),
         clear("--seq_len=2", "at least 3"), TEXT_FILE),
    Case("extract/model-dir-missing", extract(model_dir="{ws}/none"),
         clear("--model_dir", "{ws}/none"), TEXT_FILE),
    Case("extract/checkpoint-truncated", extract(), clear("{pretrain}/ckpt-4", "damaged"),
         faults(TEXT_FILE, truncate("{pretrain}/ckpt-4.data-00000-of-00001"))),
    Case("extract/spm-truncated", extract(), clear("{pretrain}/spiece.model"),
         faults(TEXT_FILE, truncate("{pretrain}/spiece.model"))),
    Case("extract/replaces-an-earlier-output", extract(), works(features("{ws}/f.npz")),
         faults(TEXT_FILE, put("{ws}/f.npz", b"an earlier output")), changes=("f.npz",)),
    Case("extract/killed-then-rerun", extract(),
         works(both(features("{ws}/f.npz"),
                    says("an incomplete output left by a killed run", "stderr"))),
         faults(TEXT_FILE, put("{ws}/f.npz", b"an earlier output"),
                killed(extract(runner=spawn, kill_at="xlnet_tf2.fileio|rename|1|f.npz"))),
         changes=("f.npz", "f.npz.tmp-*")),
    Case("extract/disk-full", extract(output="{ws}/disk/f.npz"),
         clear("{ws}/disk/f.npz", "No space left on device"),
         faults(TEXT_FILE, on_small_disk("{ws}/disk", 4_000))),
    Case("extract/moved-run", extract(model_dir="{ws}/moved"),
         works(features("{ws}/f.npz", "{ws}/inplace.npz")),
         faults(TEXT_FILE, run_first(extract(output="{ws}/inplace.npz")),
                move("{pretrain}", "{ws}/moved")), changes=("f.npz",)),
]


@pytest.mark.parametrize("case", as_params(CASES))
def test_export_and_extraction(case, tmp_path):
    run_case(case, str(tmp_path), artefact)
