"""Bad input to conversion (convert_checkpoint.py): damaged releases and HuggingFace
directories, output directories it must not write into, killed runs and full disks; see
tests/fixtures/battery.py."""

from __future__ import annotations

import json
import os

import pytest

from fixtures.battery import (Case, as_params, bitflip, both, clear, command, copy, edit_json,
                              faults, killed, move, on_small_disk, put, remove, run_case, says,
                              spawn, truncate, works)
from fixtures.battery_artefacts import artefact

CONVERT = "experiments/convert_checkpoint.py"


def original(*argv, output="{ws}/out", checkpoint="{original}/xlnet_model.ckpt", runner=command,
             kill_at=None):
    extra = {"kill_at": kill_at} if kill_at else {}
    return runner(CONVERT, "--source=original", f"--checkpoint={checkpoint}",
                  f"--output_dir={output}", *argv, **extra)


def huggingface(*argv, output="{ws}/out", checkpoint="{hf}"):
    return command(CONVERT, "--source=huggingface", f"--checkpoint={checkpoint}",
                   f"--output_dir={output}", *argv)


def to_huggingface(*argv, output="{ws}/out", checkpoint="{converted}"):
    return command(CONVERT, "--source=xlnet_tf2", "--target=huggingface",
                   f"--checkpoint={checkpoint}", f"--output_dir={output}", *argv)


def loads(directory: str, hf: bool = False):
    """A check: `directory` is a complete conversion that loads, nothing left beside it."""
    def check(ws, result):
        import xlnet_tf2

        path = ws.fmt(directory)
        if hf:
            with open(os.path.join(path, "config.json")) as f:
                assert json.load(f)["architectures"]
            assert os.path.exists(os.path.join(path, "model.safetensors"))
        else:
            model = xlnet_tf2.from_pretrained(path)
            assert model.config.n_layer == 2
        parent = os.path.dirname(path)
        assert not [n for n in os.listdir(parent) if n.startswith(f".{os.path.basename(path)}.")]
    return check




CKPT = "{original}/xlnet_model.ckpt"
CASES = [
    # --- where the output goes
    Case("convert/into-a-pretraining-run", original(output="{pretrain}"),
         clear("--output_dir", "{pretrain}", "training run")),
    Case("convert/into-a-fine-tuning-run", original(output="{finetune}"),
         clear("--output_dir", "{finetune}", "training run")),
    Case("convert/into-prepared-data", original(output="{data}"),
         clear("--output_dir", "{data}", "prepared data")),
    Case("convert/into-a-pretraining-run-with-overwrite", original("--overwrite",
                                                                   output="{pretrain}"),
         clear("{pretrain}", "never writes into one")),
    Case("convert/into-another-conversion", original(output="{converted}"),
         clear("{converted}", "not empty", "--overwrite")),
    Case("convert/over-another-conversion-with-overwrite",
         original("--overwrite", output="{converted}"),
         works(loads("{converted}")), changes=("converted/*",)),
    Case("convert/into-an-empty-directory", original(output="{ws}/empty"),
         works(loads("{ws}/empty")), lambda ws: os.makedirs(ws.fmt("{ws}/empty")),
         changes=("empty/*",)),
    Case("convert/output-is-a-file", original(output="{ws}/file"), clear("{ws}/file", "file"),
         put("{ws}/file", "x")),
    Case("convert/to-huggingface-into-a-training-run", to_huggingface(output="{pretrain}"),
         clear("{pretrain}", "training run")),
    Case("convert/killed-before-swap-then-rerun", original("--overwrite", output="{converted}"),
         works(both(loads("{converted}"),
              says("an incomplete conversion left by a killed run", "stderr"))),
         killed(original("--overwrite", output="{converted}", runner=spawn,
                         kill_at="xlnet_tf2.fileio|replace_directory|1|")),
         changes=("converted/*", ".converted.tmp-*")),
    Case("convert/disk-full", original(output="{ws}/disk/out"),
         clear("{ws}/disk/out", "No space left on device"), on_small_disk("{ws}/disk", 100_000)),
    Case("convert/disk-full-overwrite-keeps-old", original("--overwrite", output="{ws}/disk/c"),
         clear("{ws}/disk/c", "No space left on device"),
         on_small_disk("{ws}/disk", 60_000, [("{converted}", "c")])),
    # --- the original release
    Case("convert/original-prefix-missing", original(checkpoint="{ws}/none/xlnet_model.ckpt"),
         clear("{ws}/none")),
    Case("convert/original-data-truncated", original(), clear(CKPT, "truncated or corrupt"),
         truncate("{original}/xlnet_model.ckpt.data-00000-of-00001")),
    Case("convert/original-index-bitflip", original(), clear(CKPT),
         bitflip("{original}/xlnet_model.ckpt.index", 0.5)),
    Case("convert/original-index-truncated", original(), clear(CKPT),
         truncate("{original}/xlnet_model.ckpt.index")),
    Case("convert/original-config-missing", original(), clear("{original}/xlnet_config.json"),
         remove("{original}/xlnet_config.json")),
    Case("convert/original-config-truncated", original(),
         clear("{original}/xlnet_config.json", "JSON"), truncate("{original}/xlnet_config.json")),
    Case("convert/original-config-fewer-layers", original(), clear("n_layer=1", "layers"),
         edit_json("{original}/xlnet_config.json", lambda c: c.update(n_layer=1))),
    Case("convert/original-config-more-layers", original(), clear(CKPT, "layer_2"),
         edit_json("{original}/xlnet_config.json", lambda c: c.update(n_layer=3))),
    Case("convert/original-config-other-width", original(), clear(CKPT, "shape"),
         edit_json("{original}/xlnet_config.json", lambda c: c.update(d_inner=96))),
    Case("convert/original-config-unknown-activation", original(),
         clear("{original}/xlnet_config.json", "ff_activation", "swish"),
         edit_json("{original}/xlnet_config.json", lambda c: c.update(ff_activation="swish"))),
    Case("convert/spm-missing", original("--spm_model={ws}/none.model"),
         clear("--spm_model", "{ws}/none.model")),
    Case("convert/flag-seq-len-without-task", original("--seq_len=64"), clear("--seq_len",
                                                                              "--kind")),
    Case("convert/flag-seq-len-two", original("--kind=classification", "--seq_len=2",
                                              checkpoint="{ws}/none.ckpt"),
         clear("--seq_len=2", "at least 3")),
    Case("convert/flag-label-list-wrong-length", original("--kind=classification",
                                                          "--label_list=a,b,c"),
         clear("classification")),
    # --- HuggingFace directories
    Case("convert/hf-config-truncated", huggingface(), clear("{hf}/config.json", "JSON"),
         truncate("{hf}/config.json")),
    Case("convert/hf-weights-truncated", huggingface(), clear("{hf}/model.safetensors"),
         truncate("{hf}/model.safetensors")),
    Case("convert/hf-weights-header-bitflip", huggingface(), clear("{hf}/model.safetensors"),
         bitflip("{hf}/model.safetensors", 20, 6)),
    Case("convert/hf-weights-missing", huggingface(), clear("{hf}", "model.safetensors"),
         remove("{hf}/model.safetensors")),
    Case("convert/hf-config-other-layers", huggingface(), clear("{hf}", "n_layer"),
         edit_json("{hf}/config.json", lambda c: c.update(n_layer=1))),
    Case("convert/hf-moved-directory", huggingface(checkpoint="{ws}/moved"),
         works(loads("{ws}/out")), move("{hf}", "{ws}/moved"), changes=("out/*",)),
    # --- ours -> HuggingFace
    Case("convert/ours-checkpoint-truncated", to_huggingface(),
         clear("{converted}", "damaged"), truncate("{converted}/model.ckpt.data-00000-of-00001")),
    Case("convert/ours-config-truncated", to_huggingface(),
         clear("{converted}/xlnet_config.json", "JSON"),
         truncate("{converted}/xlnet_config.json")),
    Case("convert/ours-fine-tuned-run-moved", to_huggingface(checkpoint="{ws}/moved"),
         works(loads("{ws}/out", hf=True)), move("{finetune}", "{ws}/moved"),
         changes=("out/*",)),
    Case("convert/ours-copied-run-without-best", to_huggingface(checkpoint="{ws}/copy"),
         clear("{ws}/copy/best/ckpt-", "best_eval.json"),
         faults(copy("{finetune}", "{ws}/copy"), remove("{ws}/copy/best"))),
]


@pytest.mark.parametrize("case", as_params(CASES))
def test_conversion(case, tmp_path):
    run_case(case, str(tmp_path), artefact)
