"""The commands' config trees (xlnet_tf2/config_flags.py): a config built from the command
line equals the one `from_flat` builds from the same settings, the flags keep their names and
defaults, and a bad value is one line naming the flag, exit status 2, no traceback (before
TensorFlow starts)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from absl import flags

from xlnet_tf2.config_flags import (RunConfigError, check_declared, config_from_flags,
                                    define_flags, from_flat, setting)
from xlnet_tf2.conversion.convert_config import ConvertConfig
from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.export.export_config import ExportConfig, ExtractConfig
from xlnet_tf2.prep.prep_config import CorpusConfig, PrepConfig, SentencePieceConfig
from xlnet_tf2.tasks.finetune_config import ClassificationConfig, RaceConfig, SquadConfig
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from xlnet_tf2.tasks.token_classification_config import TokenClassificationConfig
from benchmarks.tools.command_configs import (AcceleratorCheckConfig, BaseStepBenchmarkConfig,
                                              BenchmarkConfig, DataBenchmarkConfig,
                                              GenerationBenchmarkConfig, HeldOutReportConfig,
                                              LoopWorkerConfig, PayoffConfig, ScaleReportConfig)

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "data_prep").is_dir())
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")

# (config class, command line, the same settings for from_flat)
CASES = [
    (PrepConfig, ["--input=a.txt,b/*.txt", "--spm_model=sp.model", "--output_dir=out"],
     dict(input=("a.txt", "b/*.txt"), spm_model="sp.model", output_dir="out")),
    (PrepConfig, ["--tfds_name=wiki", "--tfds_split=train[:1%]", "--output_dir=out",
                  "--seq_len=64", "--reuse_len=32", "--num_predict=10", "--nobi_data",
                  "--num_streams=4", "--num_passes=2", "--seed=7", "--uncased",
                  "--span_mode=word", "--noword_cache", "--eval_fraction=0.1", "--overwrite",
                  "--skip_bad_lines", "--max_span=3", "--mask_alpha=4", "--mask_beta=2"],
     dict(tfds_name="wiki", tfds_split="train[:1%]", output_dir="out", seq_len=64,
          reuse_len=32, num_predict=10, bi_data=False, num_streams=4, num_passes=2, seed=7,
          uncased=True, span_mode="word", word_cache=False, eval_fraction=0.1, overwrite=True,
          skip_bad_lines=True, max_span=3, mask_alpha=4, mask_beta=2)),
    (PrepConfig, ["--input=a.txt", "--output_dir=out", "--eval_input=h.txt", "--seq_len=96",
                  "--reuse_len=48", "--perm_size=16"],
     dict(input=("a.txt",), output_dir="out", eval_input=("h.txt",), seq_len=96, reuse_len=48,
          perm_size=16)),
    (SentencePieceConfig, ["--input=c.txt", "--vocab_size=400", "--model_prefix=o/sp",
                           "--uncased", "--character_coverage=1.0",
                           "--input_sentence_size=1000"],
     dict(input=("c.txt",), vocab_size=400, model_prefix="o/sp", uncased=True,
          character_coverage=1.0, input_sentence_size=1000)),
    (ConvertConfig, ["--source=original", "--checkpoint=r/xlnet_model.ckpt",
                     "--output_dir=converted"],
     dict(source="original", checkpoint="r/xlnet_model.ckpt", output_dir="converted")),
    (ConvertConfig, ["--source=huggingface", "--checkpoint=hf", "--config=c.json",
                     "--spm_model=s.model", "--output_dir=o"],
     dict(source="huggingface", checkpoint="hf", config="c.json", spm_model="s.model",
          output_dir="o")),
    (ExportConfig, ["--model_dir=m", "--kind=features", "--export_dir=e", "--seq_len=128",
                    "--checkpoint=latest", "--version=3"],
     dict(model_dir="m", kind="features", export_dir="e", seq_len=128, checkpoint="latest",
          version=3)),
    (ExtractConfig, ["--model_dir=m", "--input_file=t.txt", "--output_file=f.jsonl",
                     "--batch_size=4", "--precision=mixed_bfloat16", "--strategy=one_device",
                     "--tpu_timeout=5"],
     dict(model_dir="m", input_file="t.txt", output_file="f.jsonl", batch_size=4,
          precision="mixed_bfloat16", strategy="one_device", tpu_timeout=5)),
    (CorpusConfig, ["--output=c.txt", "--min_bytes=10", "--max_bytes=20"],
     dict(output="c.txt", min_bytes=10, max_bytes=20)),
    (DataBenchmarkConfig, ["--workers=1", "--runs=5", "--sources=man,doc", "--nostages",
                           "--seq_len=64", "--reuse_len=32"],
     dict(workers=1, runs=5, sources=("man", "doc"), stages=False, seq_len=64, reuse_len=32)),
    (ScaleReportConfig, ["--chips=256", "--chips_per_host=8", "--global_batch=4096"],
     dict(chips=256, chips_per_host=8, global_batch=4096)),
    (BenchmarkConfig, ["--workloads=pretrain,data", "--seq_len=256", "--reuse_len=128",
                       "--noreference", "--data_workers=1", "--threads=2"],
     dict(workloads=("pretrain", "data"), seq_len=256, reuse_len=128, reference=False,
          data_workers=1, threads=2)),
    (BaseStepBenchmarkConfig, ["--repeats=5", "--output_json=b.json", "--model_config=tiny"],
     dict(repeats=5, output_json="b.json", model_config="tiny")),
    (GenerationBenchmarkConfig, ["--prompt_len=256", "--new_tokens=64", "--jit_compile"],
     dict(prompt_len=256, new_tokens=64, jit_compile=True)),
]


def _from_command_line(cls, argv):
    values = flags.FlagValues()
    define_flags(cls, values)
    values(["command"] + argv)
    return config_from_flags(cls, values)


@pytest.mark.parametrize("cls,argv,flat", CASES,
                         ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_config_from_flags_equals_from_flat(cls, argv, flat):
    assert _from_command_line(cls, argv) == from_flat(cls, flat)


def test_flags_of_a_config_tree_are_key_flags_of_the_program():
    """Defined from another module than the program's (here this test module), they still are
    what the program's --help lists."""
    values = flags.FlagValues()
    define_flags(CorpusConfig, values)
    program = {flag.name for flag in values.get_key_flags_for_module(sys.argv[0])}
    assert program == {"output", "min_bytes", "max_bytes"}


def test_data_params_from_flags_keep_the_manifest_fields():
    """The flags' defaults are DataParams' own, --perm_size defaults to --reuse_len, and the
    params keep exactly the fields a manifest records."""
    base = ["--input=a.txt", "--output_dir=o"]
    assert _from_command_line(PrepConfig, base).params == DataParams()
    params = _from_command_line(PrepConfig, base + ["--seq_len=64", "--reuse_len=32",
                                                    "--num_predict=10"]).params
    assert params == DataParams(seq_len=64, reuse_len=32, perm_size=32, num_predict=10)
    assert DataParams.from_dict(params.to_dict()) == params
    assert list(params.to_dict()) == ["seq_len", "reuse_len", "num_predict", "mask_alpha",
                                      "mask_beta", "perm_size", "bi_data", "num_streams",
                                      "num_passes", "seed", "uncased", "span_mode", "max_span",
                                      "word_cache"]


def test_flags_keep_their_defaults():
    assert from_flat(BenchmarkConfig).workloads == ("pretrain", "inference", "scaling")
    assert (from_flat(BenchmarkConfig).warmup, from_flat(BenchmarkConfig).repeats) == (2, 7)
    step = from_flat(BaseStepBenchmarkConfig)
    assert (step.batch_size, step.seq_len, step.mem_len, step.warmup, step.repeats) == (
        2, 512, 384, 1, 3)
    generation = from_flat(GenerationBenchmarkConfig)
    assert (generation.n_layer, generation.d_model, generation.d_inner) == (6, 512, 2048)
    data = from_flat(DataBenchmarkConfig)
    assert (data.workers, data.runs, data.corpus_bytes, data.vocab_size) == (
        2, 3, 32_000_000, 16_000)
    assert from_flat(BenchmarkConfig).data_corpus_bytes == data.corpus_bytes
    extract = from_flat(ExtractConfig, model_dir="m", input_file="t", output_file="f.npz")
    assert (extract.precision, extract.distribution.strategy, extract.batch_size) == (
        "float32", "auto", 16)


@pytest.mark.parametrize("cls,flat,error,message", [
    (PrepConfig, dict(input=("a",), output_dir="o", seq_len=64, reuse_len=32, perm_size=20),
     DataPrepError, "--perm_size=20 must divide"),
    (PrepConfig, dict(input=("a",)), DataPrepError, "--output_dir is required"),
    (PrepConfig, dict(input=("a",), output_dir="o", eval_fraction=1.0), DataPrepError,
     "--eval_fraction must be in [0, 1)"),
    (ConvertConfig, dict(source="tf1", checkpoint="c", output_dir="o"), RunConfigError,
     "--source must be one of original, huggingface"),
    (ConvertConfig, dict(source="original", output_dir="o"), RunConfigError,
     "--checkpoint is required"),
    (ExportConfig, dict(model_dir="m", kind="features", export_dir="e", seq_len=0),
     RunConfigError, "--seq_len must be a positive integer, got 0"),
    (ExportConfig, dict(model_dir="m", kind="features", export_dir="e", seq_len=2),
     RunConfigError, "--seq_len=2 leaves no room for a token beside <sep> and <cls>"),
    (ExtractConfig, dict(model_dir="m", input_file="t", output_file="f.npz", seq_len=1),
     RunConfigError, "--seq_len=1 leaves no room for a token beside <sep> and <cls>"),
    (ConvertConfig, dict(source="original", checkpoint="c", output_dir="o",
                         kind="classification", seq_len=2),
     RunConfigError, "--seq_len=2 leaves no room for a token beside <sep> and <cls>"),
    (SquadConfig, dict(model_dir="m", seq_len=64, max_query_length=61), RunConfigError,
     "--max_query_length=61 leaves no room for the document in --seq_len=64"),
    (RaceConfig, dict(model_dir="m", train_path="t", seq_len=64, max_qa_length=61),
     RunConfigError, "--max_qa_length=61 leaves no room for the article in --seq_len=64"),
    (ExtractConfig, dict(model_dir="m", input_file="t", output_file="f.txt"), RunConfigError,
     "--output_file='f.txt' must end in .npz or .jsonl"),
    (ExtractConfig, dict(model_dir="m", input_file="t", output_file="f.npz",
                         precision="float64"), RunConfigError, "--precision must be one of"),
    (CorpusConfig, dict(output="c.txt", min_bytes=100, max_bytes=50), RunConfigError,
     "--max_bytes=50 is below --min_bytes=100"),
    (SentencePieceConfig, dict(model_prefix="p", vocab_size=9), RunConfigError,
     "--vocab_size=9 leaves no room beside the 9 special pieces"),
    (ScaleReportConfig, dict(chips=510), RunConfigError,
     "--chips=510 is not divisible by --chips_per_host=4"),
    (BenchmarkConfig, dict(workloads=("pretrain", "speed")), RunConfigError,
     "--workloads: unknown workload(s) ['speed']"),
    (DataBenchmarkConfig, dict(sources=("man", "web")), RunConfigError,
     "--sources: unknown source(s) ['web']"),
    (DataBenchmarkConfig, dict(runs=0), RunConfigError, "--runs must be a positive integer"),
    (GenerationBenchmarkConfig, dict(d_model=100, n_head=8), RunConfigError,
     "--d_model=100 must be divisible by --n_head=8"),
])
def test_bad_settings_name_the_flag(cls, flat, error, message):
    with pytest.raises(error) as raised:
        from_flat(cls, flat)
    assert message in str(raised.value)


def _one_error_line(args):
    run = subprocess.run([sys.executable] + args, capture_output=True, text=True, cwd=ROOT,
                         env=ENV, timeout=120)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr[-3000:]
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("args,expected", [
    (["data_prep/create_tfrecords.py", "--input=a.txt", "--output_dir=o", "--seq_len=64",
      "--reuse_len=32", "--perm_size=20"],
     "create_tfrecords.py: error: --perm_size=20 must divide both --reuse_len=32"),
    (["data_prep/create_tfrecords.py", "--input=a.txt", "--output_dir=o", "--seq_len=many"],
     "create_tfrecords.py: error: flag --seq_len=many: "),
    (["experiments/convert_checkpoint.py", "--source=tf1", "--checkpoint=c", "--output_dir=o"],
     "convert_checkpoint.py: error: flag --source=tf1: value should be one of "),
    (["experiments/convert_checkpoint.py", "--source=original", "--checkpoint=c"],
     "convert_checkpoint.py: error: flag --output_dir=None: "),
    (["experiments/export_saved_model.py", "--model_dir=m", "--kind=features",
      "--export_dir=e", "--seq_len=0"],
     "export_saved_model.py: error: --seq_len must be a positive integer, got 0."),
    (["experiments/extract_features.py", "--model_dir=m", "--input_file=t",
      "--output_file=f.csv"],
     "extract_features.py: error: --output_file='f.csv' must end in .npz or .jsonl."),
    (["benchmarks/scale_report.py", "--chips=510"],
     "scale_report.py: error: --chips=510 is not divisible by --chips_per_host=4."),
])
def test_a_bad_value_is_one_line_naming_the_flag(args, expected):
    assert _one_error_line(args).startswith(expected)


# Every command's configuration tree (the benchmarks' commands included), with settings it
# accepts as they are.
TREES = {
    PrepConfig: dict(input=("a.txt",), output_dir="o"),
    SentencePieceConfig: dict(input=("c.txt",), model_prefix="p"),
    CorpusConfig: dict(output="c.txt"),
    ConvertConfig: dict(source="original", checkpoint="c", output_dir="o"),
    ExportConfig: dict(model_dir="m", kind="features", export_dir="e"),
    ExtractConfig: dict(model_dir="m", input_file="t", output_file="f.npz"),
    PretrainConfig: dict(data_dir=("d",), model_dir="m"),
    ClassificationConfig: dict(model_dir="m"),
    SquadConfig: dict(model_dir="m"),
    RaceConfig: dict(model_dir="m", train_path="t"),
    TokenClassificationConfig: dict(model_dir="m", train_file="t"),
    AcceleratorCheckConfig: dict(),
    BenchmarkConfig: dict(),
    BaseStepBenchmarkConfig: dict(),
    DataBenchmarkConfig: dict(),
    GenerationBenchmarkConfig: dict(),
    LoopWorkerConfig: dict(role="real", spec="s.json", output="o.json"),
    HeldOutReportConfig: dict(model_dir="m", data_dir="d", eval_dir="e", global_batch_size=8),
    PayoffConfig: dict(),
    ScaleReportConfig: dict(),
}


def _declared_leaves(cls):
    """(flag name, field) of every leaf of a tree that declares `choices` or `required`."""
    for field in dataclasses.fields(cls):
        if "section" in field.metadata:
            yield from _declared_leaves(field.metadata["section"])
        elif field.metadata.get("choices") or field.metadata.get("required"):
            yield field.name, field


def test_every_command_tree_is_listed():
    defined = set()
    for folder in (ROOT / "xlnet_tf2" / "commands", ROOT / "benchmarks"):
        for path in folder.glob("*.py"):
            defined |= set(re.findall(r"^define_flags\((\w+)\)", path.read_text(), re.M))
    assert defined == {tree.__name__ for tree in TREES}


@pytest.mark.parametrize("tree", [t for t in TREES if any(_declared_leaves(t))],
                         ids=lambda tree: tree.__name__)
def test_every_tree_checks_its_declared_choices_at_construction(tree):
    """A library caller (from_flat, the dataclass) gets the command line's check: a value
    outside a setting's choices, or a required setting left out, is an error naming the flag
    when the tree is built, not later in the code that reads it."""
    base = TREES[tree]
    from_flat(tree, base)
    for name, field in _declared_leaves(tree):
        if field.metadata.get("choices"):
            with pytest.raises(ValueError, match=f"--{name}"):
                from_flat(tree, {**base, name: "bogus"})
        if field.metadata.get("required"):
            with pytest.raises(ValueError, match=f"--{name}"):
                from_flat(tree, {**base, name: None})


def test_pretraining_refuses_an_unknown_factorization_order():
    with pytest.raises(RunConfigError, match="--factorization_order must be one of "
                                             "permutation, left_to_right; got 'bogus'"):
        PretrainConfig.flat(data_dir=("d",), model_dir="m", factorization_order="bogus")


# ---------------------------------------------------------------------------- renamed flags
# --task became --kind (xlnet-classify, xlnet-convert, xlnet-export): the old name is read.
RENAMED = [
    (ExportConfig, ["--model_dir=m", "--export_dir=e"], "features"),
    (ConvertConfig, ["--source=original", "--checkpoint=c", "--output_dir=o"], "race"),
    (ClassificationConfig, ["--model_dir=m"], "regression"),
]


@pytest.mark.parametrize("cls,argv,kind", RENAMED, ids=[c.__name__ for c, _, _ in RENAMED])
def test_an_old_flag_name_still_reads_and_says_the_new_one(cls, argv, kind, capsys):
    old = _from_command_line(cls, argv + [f"--task={kind}"])
    assert old == _from_command_line(cls, argv + [f"--kind={kind}"])
    assert old.kind == kind
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["--task is deprecated: use --kind (the same values)."]
    # Both names, the same value: read; different values: one line naming both.
    assert _from_command_line(cls, argv + [f"--task={kind}", f"--kind={kind}"]).kind == kind
    other = "classification"
    with pytest.raises(RunConfigError, match=r"--task is the old name of --kind, and the two "
                                             rf"say '{kind}' and '{other}'"):
        _from_command_line(cls, argv + [f"--task={kind}", f"--kind={other}"])


def test_an_old_setting_name_reads_in_from_flat_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="'task' is now 'kind'"):
        config = from_flat(ExportConfig, model_dir="m", task="features", export_dir="e")
    assert config == from_flat(ExportConfig, model_dir="m", kind="features", export_dir="e")
    with pytest.warns(DeprecationWarning), pytest.raises(RunConfigError, match="give 'kind'"):
        from_flat(ExportConfig, model_dir="m", task="features", kind="race", export_dir="e")


def test_a_stored_run_configuration_with_an_old_name_is_compared_under_it():
    """A run started before the rename stored `task`: resuming compares it as --kind."""
    from xlnet_tf2.config_flags import changed_settings

    config = from_flat(ClassificationConfig, model_dir="m", kind="regression")
    assert changed_settings(ClassificationConfig, {"task": "regression"}, config) == []
    (change,) = changed_settings(ClassificationConfig, {"task": "classification"}, config)
    assert (change.name, change.old, change.new) == ("kind", "classification", "regression")


@dataclasses.dataclass(frozen=True)
class _RenamedAndRequired:
    """A required setting with an old name (xlnet-export's --kind was one, until it was read
    from task.json)."""

    kind: str = setting(None, "What the model is.", required=True, old_names=("task",))

    def __post_init__(self):
        check_declared(self)


def test_a_required_renamed_flag_missing_names_the_new_name():
    with pytest.raises(RunConfigError, match="--kind is required"):
        _from_command_line(_RenamedAndRequired, [])
    assert _from_command_line(_RenamedAndRequired, ["--task=race"]).kind == "race"


def test_export_kind_is_optional_and_checked_against_its_choices():
    """xlnet-export reads the kind from the model_dir's task.json (tests/export/
    test_export_kind.py); --kind, given, is one of the declared kinds or features."""
    assert _from_command_line(ExportConfig, ["--model_dir=m", "--export_dir=e"]).kind is None
    with pytest.raises(flags.IllegalFlagValueError, match="--kind=ner"):
        _from_command_line(ExportConfig, ["--model_dir=m", "--export_dir=e", "--kind=ner"])


@pytest.mark.slow
def test_a_command_given_the_old_flag_says_the_new_one_and_runs_on(tmp_path):
    """xlnet-export --task=features (the old name): one deprecation line, then the command
    goes on as with --kind (here to the missing model_dir's one-line error)."""
    run = subprocess.run([sys.executable, "experiments/export_saved_model.py",
                          f"--model_dir={tmp_path}/missing", "--task=features",
                          f"--export_dir={tmp_path}/export"],
                         capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    lines = run.stderr.strip().splitlines()
    assert lines[0] == "--task is deprecated: use --kind (the same values).", run.stderr
    assert len(lines) == 2 and f"{tmp_path}/missing" in lines[1], run.stderr
