"""The settings of the benchmark commands as config trees (xlnet_tf2/config_flags.py): their flags,
help, defaults and checks are written here once.

    DataBenchmarkConfig       benchmarks/benchmark_data.py
    HeldOutReportConfig       benchmarks/heldout_report.py (step 5 of scripts/run_demo.sh)
    ScaleReportConfig         benchmarks/scale_report.py (the pod of benchmarks/tools/scale_costs.py)
    BenchmarkConfig           benchmarks/benchmark.py
    LoopWorkerConfig          benchmarks/benchmark_loop_worker.py (one contender of the loop
                              workload, started by benchmark.py)
    BaseStepBenchmarkConfig   benchmarks/benchmark_base_step.py
    GenerationBenchmarkConfig benchmarks/benchmark_generation.py
    AcceleratorCheckConfig    benchmarks/accelerator_check.py
    AcceleratorCompileConfig  benchmarks/accelerator_compile.py

Importing this module does not import TensorFlow (`--help` stays fast).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from xlnet_tf2.config import TPU_GENERATIONS
from xlnet_tf2.config_flags import (RunConfigError, check_declared, check_non_negative,
                                    check_positive, section, setting, setting_like)
from benchmarks.tools.doc_corpus import SOURCES
from benchmarks.tools.payoff_tasks import TASKS as PAYOFF_TASKS
from xlnet_tf2.tasks.finetune_config import SUMMARY_TYPES
from xlnet_tf2.training.run_config import (PRECISIONS, DistributionConfig, DropoutConfig,
                                           LoopConfig)

WORKLOADS = ("pretrain", "inference", "scaling", "data", "loop")
# Where the data benchmark runs the command (benchmarks/tools/data_throughput.py, runner_args).
DATA_RUNNERS = ("direct", "dask", "dask-local")
LOOP_ROLES = ("real", "bare", "huggingface")


def _check_reuse_len(config) -> None:
    if config.reuse_len > config.seq_len:
        raise RunConfigError(f"--reuse_len={config.reuse_len} must not exceed "
                             f"--seq_len={config.seq_len}.")


@dataclasses.dataclass(frozen=True)
class DataBenchmarkConfig:
    """Data-preparation and input-pipeline throughput on text the tokenizer never saw."""

    workdir: str = setting(
        "/tmp/xlnet_data_benchmark", "Directory for the corpus and its SentencePiece model "
        "(built once, then reused while these settings match) and the prepared data.")
    corpus_bytes: int = setting(
        32_000_000, "Size of the benchmarked text in bytes: documentation prose found on the "
        "machine (man pages, info manuals, /usr/share/doc, installed Python packages), every "
        "paragraph once, never repeated; 32 MB is about 7M tokens with a 16k model.")
    spm_bytes: int = setting(
        8_000_000, "Size in bytes of the held-out text (other documents of the same sources) "
        "the SentencePiece model is trained on.")
    sources: Tuple[str, ...] = setting(
        SOURCES, "Documentation sources of the corpus: man (man pages rendered by groff), "
        "info (GNU info manuals), doc (text files in /usr/share/doc), python (docstrings and "
        ".md/.rst files of the installed packages).")
    vocab_size: int = setting(16_000, "Vocabulary size of the SentencePiece model.")
    workers: int = setting(
        2, "Worker processes of the end-to-end runs: the DirectRunner's (multi_processing) and "
        "the dask cluster's.")
    runners: Tuple[str, ...] = setting(
        ("direct",), "Runners of the end-to-end runs: direct (Beam's DirectRunner), dask (a "
        "dask.distributed cluster of --workers worker processes, started once before the runs, "
        "its start-up timed apart), dask-local (--runner=DaskRunner without an address: the "
        "command starts a local cluster, one worker per core, in every run). With one runner "
        "the runs compare the tokenizer modes on it; with several, the runners in the default "
        "mode.")
    runs: int = setting(
        3, "End-to-end runs of each contender (the tokenizer modes, or the runners), "
        "alternating; the median of each is reported.")
    stages: bool = setting(True, "Also time each preparation stage in one process.")
    scaling: bool = setting(
        True, "Also run the default command --runs times on the corpus's first half: the "
        "line through the half and whole medians gives the fixed cost of a run and the "
        "marginal tokens/s.")
    stage_bytes: int = setting(
        8_000_000, "The stages are timed on the corpus's first this many bytes.")
    seq_len: int = setting(512, "Example length of the prepared data in tokens.")
    reuse_len: int = setting(256, "Reused prefix length of the prepared examples in tokens.")
    num_predict: int = setting(85, "Number of target tokens per prepared example.")
    num_streams: int = setting(16, "Number of token streams the corpus is prepared into.")
    global_batch_size: int = setting(16, "Batch size timed in the input pipeline.")
    pipeline_steps: int = setting(100, "Number of batches timed in the input pipeline.")

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "corpus_bytes", "spm_bytes", "vocab_size", "workers", "runs",
                       "stage_bytes", "seq_len", "reuse_len", "num_predict", "num_streams",
                       "global_batch_size", "pipeline_steps")
        _check_sources(self.sources, "sources")
        _check_reuse_len(self)
        unknown = sorted(set(self.runners) - set(DATA_RUNNERS))
        if unknown or not self.runners or len(set(self.runners)) < len(self.runners):
            raise RunConfigError(f"--runners: {','.join(self.runners)}: choose each at most "
                                 f"once from {', '.join(DATA_RUNNERS)}.")


def _check_sources(sources, name: str) -> None:
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown or not sources:
        raise RunConfigError(f"--{name}: unknown source(s) {unknown}; choose from "
                             f"{', '.join(SOURCES)}.")


@dataclasses.dataclass(frozen=True)
class ScaleReportConfig:
    """The pod and the step of the paper-scale cost report (defaults: the paper's setting)."""

    global_batch: int = setting(8192, "Global batch in sequences per optimizer step.")
    seq_len: int = setting(512, "Sequence length of the pretraining examples in tokens.")
    reuse_len: int = setting(256, "Reused prefix length of the pretraining examples in tokens.")
    mem_len: int = setting(384, "Transformer-XL memory length in positions per layer.")
    num_predict: int = setting(85, "Predicted tokens per sequence (query-stream rows).")
    chips: int = setting(512, "Number of TPU v3 chips of the pod.")
    chips_per_host: int = setting(4, "Number of TPU chips attached to each host.")

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "global_batch", "seq_len", "reuse_len", "num_predict", "chips",
                       "chips_per_host")
        check_non_negative(self, "mem_len")
        _check_reuse_len(self)
        if self.chips % self.chips_per_host:
            raise RunConfigError(f"--chips={self.chips} is not divisible by "
                                 f"--chips_per_host={self.chips_per_host}.")


@dataclasses.dataclass(frozen=True)
class HeldOutReportConfig:
    """A pretraining run's held-out loss against the context-free unigram baselines."""

    model_dir: str = setting(
        None, "The pretraining model_dir (its steps.jsonl and eval_results.jsonl are read).",
        required=True)
    data_dir: str = setting(None, "The prepared training data of the run.", required=True)
    eval_dir: str = setting(None, "The prepared held-out data of the run.", required=True)
    global_batch_size: int = setting(
        None, "The run's --train_batch_size: the baselines read the same batches.",
        required=True)
    min_margin: float = setting(
        0.3, "Exit 1 unless the last held-out loss is at least this many nats below the "
        "held-out unigram baseline (negative: above it by at most that many, for runs too "
        "short to learn).")
    summary_json: Optional[str] = setting(
        None, "Also write the figures to this JSON file.")

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "global_batch_size")  # min_margin may be negative (a short run)


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    """The side-by-side speed benchmark against HuggingFace's PyTorch XLNet."""

    workloads: Tuple[str, ...] = setting(
        ("pretrain", "inference", "scaling"), "Which workloads to run: pretrain (one full "
        "training step), inference (content-stream features at batch 1 and "
        "--inference_batch_size), scaling (the training step at sequence lengths 128, 256, "
        "512 and several memory lengths), data (data preparation and input-pipeline "
        "throughput), loop (the real pretraining loop of run_pretrain.py on prepared TFRecords "
        "against the bare step and a HuggingFace PyTorch loop, each in a process of its own; "
        "slow: a few minutes per round).")
    n_layer: int = setting(4, "Number of layers of the benchmarked model.")
    d_model: int = setting(256, "Width of the benchmarked model's hidden states.")
    n_head: int = setting(4, "Number of attention heads of every layer.")
    d_head: int = setting(64, "Size of each attention head of the benchmarked model.")
    d_inner: int = setting(1024, "Inner width of the feed-forward layers.")
    vocab_size: int = setting(32000, "Vocabulary size of the model (the LM head's width).")
    batch_size: int = setting(
        8, "Global batch of the pretraining step (with bi_data: half forward, half backward).")
    seq_len: int = setting(128, "Sequence length of the pretraining step in tokens.")
    reuse_len: int = setting(64, "Reused (memory-producing) prefix length of the pretraining "
                             "step.")
    mem_len: int = setting(64, "Memory length of the pretraining step in positions per layer.")
    num_predict: int = setting(21, "Predicted tokens per example (query-stream rows).")
    bi_data: bool = setting(True, "Forward and backward halves in the pretraining batch.")
    inference_batch_size: int = setting(32, "The larger batch of the inference workload.")
    inference_seq_len: int = setting(128, "Sequence length of the inference workload in "
                                     "tokens.")
    inference_vocab_size: int = setting(
        2000, "Vocabulary of the inference workload's model: the SentencePiece model shipped "
        "in the SavedModel is trained with this many pieces on a standard-library corpus. "
        "Features do not touch the LM head, so only the embedding table's size depends on it.")
    saved_model: bool = setting(
        True, "Also time the exported SavedModel (the features export, called through its "
        "serve_token_ids signature) in the inference workload.")
    warmup: int = setting(
        2, "Untimed calls of each workload before timing (compilation included).")
    repeats: int = setting(7, "Timed calls of each workload (the median is reported).")
    threads: Optional[int] = setting(
        None, "CPU threads for both frameworks; default: all cores.")
    reference: bool = setting(
        True, "Also time HuggingFace's PyTorch XLNet (needs requirements-reference.txt) and "
        "report the throughput ratio ours/theirs.")
    output_json: Optional[str] = setting(None, "Optional path to write all rows as JSON.")
    data_seq_len: int = setting(
        512, "Example length of the data workload (reuse_len is half, num_predict 1/6 of it).")
    data_corpus_bytes: int = setting_like(DataBenchmarkConfig, "corpus_bytes")
    data_vocab_size: int = setting_like(DataBenchmarkConfig, "vocab_size")
    data_workdir: str = setting_like(DataBenchmarkConfig, "workdir")
    data_workers: int = setting_like(DataBenchmarkConfig, "workers")
    data_runs: int = setting_like(DataBenchmarkConfig, "runs")
    data_scaling: bool = setting_like(DataBenchmarkConfig, "scaling")
    loop_vocab_size: int = setting(
        16000, "Vocabulary of the loop workload on every side: the SentencePiece model trained "
        "on its corpus has this many pieces, and the models' LM heads as many rows.")
    loop_steps: int = setting(
        100, "Training steps of every contender of the loop workload (the first loop of "
        "--loop_steps_per_loop steps, with compilation, is not timed).")
    loop_steps_per_loop: int = setting(
        20, "Steps per loop of the loop workload: the real loop's --steps_per_loop; the bare "
        "step and the HuggingFace loop are timed over as many steps at a time.")
    loop_repeats: int = setting(
        3, "Rounds of the loop workload: each round runs every contender once, in a rotating "
        "order, each in a fresh process.")
    loop_corpus_bytes: int = setting(
        4_000_000, "Size in bytes of the loop workload's docstring corpus (standard library, "
        "then installed packages); it must hold enough text for a --loop_vocab_size "
        "SentencePiece model.")
    loop_workdir: Optional[str] = setting(
        None, "Directory for the loop workload's corpus, SentencePiece model, prepared "
        "TFRecords and runs, kept and reused by a later run with the same data settings "
        "(default: a temporary directory, deleted at the end).")

    def __post_init__(self):
        check_declared(self)
        unknown = sorted(set(self.workloads) - set(WORKLOADS))
        if unknown or not self.workloads:
            raise RunConfigError(f"--workloads: unknown workload(s) {unknown}; choose from "
                                 f"{', '.join(WORKLOADS)}.")
        check_positive(self, "n_layer", "d_model", "n_head", "d_head", "d_inner", "vocab_size",
                       "batch_size", "seq_len", "reuse_len", "num_predict",
                       "inference_batch_size", "inference_seq_len", "inference_vocab_size",
                       "repeats", "threads", "data_seq_len", "data_corpus_bytes",
                       "data_vocab_size", "data_workers", "data_runs", "loop_vocab_size",
                       "loop_steps", "loop_steps_per_loop", "loop_repeats", "loop_corpus_bytes")
        check_non_negative(self, "mem_len", "warmup")
        _check_reuse_len(self)
        if self.loop_steps < 2 * self.loop_steps_per_loop:
            raise RunConfigError(
                f"--loop_steps={self.loop_steps} must be at least twice --loop_steps_per_loop="
                f"{self.loop_steps_per_loop}: the first loop (compilation) is not timed.")
        if self.bi_data and self.batch_size % 2:
            raise RunConfigError(f"--batch_size={self.batch_size} must be even with --bi_data "
                                 "(forward and backward halves).")


@dataclasses.dataclass(frozen=True)
class LoopWorkerConfig:
    """One contender of benchmark.py's loop workload, in a process of its own."""

    role: str = setting(
        None, "Which contender to run: real (run_pretrain.py's loop), bare (the bare "
        "jit-compiled step) or huggingface (a HuggingFace PyTorch loop).", choices=LOOP_ROLES,
        required=True)
    spec: str = setting(
        None, "The spec.json that benchmark.py wrote: the shape, the run and the directory "
        "of the prepared data.", required=True)
    output: str = setting(None, "The JSON file to write the contender's timings to.",
                          required=True)

    def __post_init__(self):
        check_declared(self)


@dataclasses.dataclass(frozen=True)
class BaseStepBenchmarkConfig:
    """One pretraining step at XLNet-Base's shape, ours against HuggingFace's."""

    model_config: str = setting(
        "base", "Architecture preset name (base, large, tiny) or the path of an "
        "xlnet_config.json file.")
    batch_size: int = setting_like(BenchmarkConfig, "batch_size", default=2)
    seq_len: int = setting_like(BenchmarkConfig, "seq_len", default=512)
    reuse_len: int = setting_like(BenchmarkConfig, "reuse_len", default=256)
    mem_len: int = setting_like(BenchmarkConfig, "mem_len", default=384)
    num_predict: int = setting_like(BenchmarkConfig, "num_predict", default=85)
    warmup: int = setting_like(BenchmarkConfig, "warmup", default=1)
    repeats: int = setting_like(BenchmarkConfig, "repeats", default=3)
    threads: Optional[int] = setting_like(BenchmarkConfig, "threads")
    reference: bool = setting_like(BenchmarkConfig, "reference")
    output_json: Optional[str] = setting_like(BenchmarkConfig, "output_json")

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "batch_size", "seq_len", "reuse_len", "num_predict", "repeats",
                       "threads")
        check_non_negative(self, "mem_len", "warmup")
        _check_reuse_len(self)


@dataclasses.dataclass(frozen=True)
class GenerationBenchmarkConfig:
    """Generation speed against the model's own work and HuggingFace's generate (random
    weights of this shape)."""

    n_layer: int = setting_like(BenchmarkConfig, "n_layer", default=6)
    d_model: int = setting_like(BenchmarkConfig, "d_model", default=512)
    n_head: int = setting(
        8, "Number of attention heads of every layer (each of size d_model / n_head).")
    d_inner: int = setting_like(BenchmarkConfig, "d_inner", default=2048)
    vocab_size: int = setting_like(BenchmarkConfig, "vocab_size")
    batch_size: int = setting(1, "Number of prompts generated from per call.")
    prompt_len: int = setting(
        128, "Longest prompt; the timed calls use prompts a few tokens shorter, in the same "
        "length bucket (XLNet prompts are long: the padding text alone is about 170 tokens).")
    new_tokens: int = setting(32, "Number of tokens generated per prompt.")
    num_beams: int = setting(4, "Beams of the beam-search rows (0 or 1 skips them).")
    repeats: int = setting(5, "Timed calls per variant, each with another prompt length (the "
                           "median is reported).")
    threads: int = setting(0, "Intra-op threads of TensorFlow and torch alike (0: all cores).")
    jit_compile: bool = setting(False, "Compile our generation loop with XLA (jit_compile).")

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "n_layer", "d_model", "n_head", "d_inner", "vocab_size",
                       "batch_size", "prompt_len", "new_tokens", "repeats")
        check_non_negative(self, "num_beams", "threads")
        if self.new_tokens < 2:
            raise RunConfigError(f"--new_tokens={self.new_tokens} must be at least 2 (the model "
                                 "work is a prefill plus steps).")
        if self.d_model % self.n_head:
            raise RunConfigError(f"--d_model={self.d_model} must be divisible by "
                                 f"--n_head={self.n_head}.")


@dataclasses.dataclass(frozen=True)
class AcceleratorCheckConfig:
    """The first run on a GPU or TPU: the real pretraining path at XLNet-Base's shape under
    --precision with XLA, its first-step loss checked against float32, then timed."""

    model_config: str = setting_like(BaseStepBenchmarkConfig, "model_config")
    batch_size: int = setting(
        16, "Global batch of the run (half forward, half backward: bi_data, as pretraining).")
    seq_len: int = setting_like(BaseStepBenchmarkConfig, "seq_len")
    reuse_len: int = setting_like(BaseStepBenchmarkConfig, "reuse_len")
    mem_len: int = setting_like(BaseStepBenchmarkConfig, "mem_len")
    num_predict: int = setting_like(BaseStepBenchmarkConfig, "num_predict")
    steps: int = setting(
        300, "Training steps of the timed run (the first loop, with compilation, is not "
        "timed).")
    steps_per_loop: int = setting(
        50, "Steps per loop (run_pretrain.py's --steps_per_loop); --steps must hold at least "
        "two loops.")
    precision: str = setting(
        "mixed_bfloat16", "Precision of the timed run; its first-step loss is checked against "
        "a float32 run from the same weights on the same batch.", choices=PRECISIONS[1:])
    dropout: float = setting_like(DropoutConfig, "dropout")
    dropatt: float = setting_like(DropoutConfig, "dropatt")
    attention_implementation: str = setting_like(LoopConfig, "attention_implementation")
    position_scores: str = setting_like(LoopConfig, "position_scores")
    loss_tolerance: float = setting(
        0.01, "Largest accepted |first-step loss (--precision) - first-step loss (float32)| "
        "relative to the float32 loss (benchmarks/tools/accelerator_check.py says why 1%).")
    vocab_size: int = setting(
        32000, "Most pieces of the SentencePiece model trained on the docstring corpus (Base's "
        "vocabulary size); where the corpus gives fewer, the model has fewer and one line "
        "says how many.")
    corpus_bytes: int = setting(
        8_000_000, "Size in bytes of the docstring corpus the data is prepared from; more text "
        "lets SentencePiece make more pieces, up to --vocab_size.")
    seed: int = setting(0, "Seed of the initial weights, dropout and data order.")
    workdir: Optional[str] = setting(
        None, "Directory for the prepared data, the initial checkpoint and both runs, kept "
        "and its data reused by a later run with the same settings (default: a temporary "
        "directory, deleted at the end).")
    cpu_dry_run: bool = setting(
        False, "Run everything on the CPU at a tiny shape (2 layers, width 64, batch 4, seq "
        "32, 6 steps; the shape flags are ignored): tests this command where no accelerator "
        "is.")
    output_json: Optional[str] = setting(None, "Optional path to write the report as JSON.")
    export_step: Optional[str] = setting(
        None, "Instead of the check, write the step of its timed run (the real Trainer at "
        "this shape and --precision; with --cpu_dry_run the tiny shape) to this directory as "
        "a portable XLA program, for another XLA client such as JAX's to compile and time: "
        "step.hlo.pb (the HLO module), inputs.npz (one real batch, the initial memory and "
        "the step) and meta.json (parameter order, shape, FLOPs per step); with "
        "--cpu_dry_run also captured.npz (the initial weights and optimizer state) and "
        "TensorFlow's first-step loss and gradient norm in meta.json, for validation. Needs "
        "no accelerator (benchmarks/tools/step_export.py says what is written).")
    export_target: str = setting(
        "gpu", "The device --export_step traces the step for: its program as TensorFlow "
        "would hand it to XLA on a GPU or on a TPU, whatever devices this machine has.",
        choices=("gpu", "tpu"))
    tpu_generation: str = setting(
        "v5e", "The TPU generation a step exported for a TPU (--export_target=tpu) is traced "
        "for: its Pallas attention kernels rotate rows with one strided rotate on v5e and "
        "newer and with rotates and selects on v4 (libtpu refuses the strided one on a v4: "
        "export with v4 to compile for --target=tpu_v4).", choices=TPU_GENERATIONS)
    gpu_bundle: Optional[str] = setting(
        None, "Instead of the check, write to this directory what benchmarks/gpu/"
        "step_comparison.py measures on a GPU machine without TensorFlow: this shape's step "
        "exported for a GPU with the Triton kernels and with the reference attention, and the "
        "tiny shape's two with their weights (--attention_implementation and --cpu_dry_run "
        "are set for each; needs no accelerator).")
    distribution: DistributionConfig = section(DistributionConfig)

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "batch_size", "seq_len", "reuse_len", "num_predict", "steps",
                       "steps_per_loop", "vocab_size", "corpus_bytes")
        check_non_negative(self, "mem_len", "seed")
        _check_reuse_len(self)
        if self.batch_size % 2:
            raise RunConfigError(f"--batch_size={self.batch_size} must be even (bi_data: "
                                 "forward and backward halves).")
        if self.steps < 2 * self.steps_per_loop:
            raise RunConfigError(
                f"--steps={self.steps} must be at least twice --steps_per_loop="
                f"{self.steps_per_loop}: the first loop (compilation) is not timed.")
        if not 0 < self.loss_tolerance < 1:
            raise RunConfigError(f"--loss_tolerance must be in (0, 1), got "
                                 f"{self.loss_tolerance}.")


ACCELERATOR_TARGETS = ("h100", "tpu_v5e", "tpu_v4", "tpu_v5p")


@dataclasses.dataclass(frozen=True)
class AcceleratorCompileConfig:
    """An exported step compiled for an accelerator this machine does not have, and what the
    compiled program says (benchmarks/accelerator_compile.py)."""

    step_dir: str = setting(
        None, "The directory benchmarks/accelerator_check.py --export_step wrote (step.hlo.pb "
        "and meta.json), given as the command's one argument.", required=True)
    target: str = setting(
        "h100", "The accelerator to compile for: h100 (one NVIDIA H100 SXM, JAX's CUDA plugin; "
        "the calibrated time proxy) or tpu_v5e, tpu_v4, tpu_v5p (one Cloud TPU chip, libtpu; "
        "the HBM fit and libtpu's cost estimates).", choices=ACCELERATOR_TARGETS)
    venv: Optional[str] = setting(
        None, "The venv whose Python compiles for the target (default: "
        "$XLNET_TF2_AOT_GPU_VENV or $XLNET_TF2_AOT_TPU_VENV, else .venv-aot-gpu or "
        ".venv-aot-tpu in the checkout, as scripts/setup_accelerator_compile.sh makes them; "
        "for a TPU target also this Python when it has libtpu).")
    json: Optional[str] = setting(
        None, "Also write every figure of the report, machine-readable, to this JSON file.")
    save_hlo: Optional[str] = setting(
        None, "Also write the optimized program (the HLO text the target's compiler "
        "produced) to this file.")
    top: int = setting(15, "Rows of the table of the most expensive kernel classes.")

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "top")


PAYOFF_INITS = ("permutation", "left_to_right", "random")


@dataclasses.dataclass(frozen=True)
class PayoffConfig:
    """Does pretraining pay off? Pretrain twice (permutation, left-to-right), fine-tune three
    initializations on two tasks at several seeds (benchmarks/pretraining_payoff.py)."""

    workdir: str = setting(
        "runs/payoff", "Where every stage writes (corpus, tokenizer, data, tasks, runs, report); "
        "a stage whose output is complete there is reused, so an interrupted experiment "
        "continues where it stopped.")
    min_tokens: int = setting(
        20_000_000, "Fail unless the prepared pretraining corpus holds at least this many "
        "tokens (the README's apt line installs documentation that gives enough).")
    max_corpus_bytes: int = setting(
        100_000_000, "Stop collecting pretraining text after this many bytes.")
    vocab_size: int = setting(8000, "SentencePiece pieces (an upper bound, see "
                              "data_prep/train_sentencepiece.py).")
    seq_len: int = setting(128, "Pretraining and fine-tuning sequence length L.")
    n_layer: int = setting(4, "Transformer layers of the model.")
    d_model: int = setting(128, "Hidden size D (heads of 32 dimensions, feed-forward 4 D).")
    pretrain_steps: int = setting(
        6000, "Steps of each pretraining run (the same for both orders: the same tokens).")
    pretrain_batch_size: int = setting(32, "Pretraining batch (half forward, half backward "
                                       "with bi_data).")
    pretrain_learning_rate: float = setting(5e-4, "Peak learning rate of each pretraining run.")
    pretrain_eval_every: int = setting(
        500, "Held-out loss of the pretraining runs every this many steps (the curves).")
    eval_batches: int = setting(20, "Batches of each held-out loss evaluation.")
    orders: Tuple[str, ...] = setting(
        ("permutation", "left_to_right"), "Which pretraining objectives to run "
        "(--factorization_order of experiments/run_pretrain.py).")
    tasks: Tuple[str, ...] = setting(
        PAYOFF_TASKS, "Downstream classification tasks to fine-tune on "
        "(benchmarks/tools/payoff_tasks.py).")
    inits: Tuple[str, ...] = setting(
        PAYOFF_INITS, "Initializations to fine-tune: the pretraining runs by order, and random.")
    seeds: Tuple[int, ...] = setting(
        (1, 2, 3), "Fine-tuning seeds (each init and task); the report gives every seed's "
        "figure, and with a single seed no sd and no 'clearly better' verdict.")
    train_per_label: int = setting(600, "Training examples per label of each task.")
    dev_per_label: int = setting(100, "Dev examples per label (picks the best checkpoint).")
    test_per_label: int = setting(200, "Test examples per label (the reported accuracy).")
    finetune_steps: int = setting(
        600, "Fine-tuning steps (8 epochs at the defaults; at 300 random initialization was "
        "still improving).")
    finetune_batch_size: int = setting(32, "Examples in each fine-tuning batch.")
    finetune_learning_rate: float = setting(
        2e-4, "Peak fine-tuning learning rate (the same for every initialization).")
    finetune_warmup_fraction: float = setting(0.1, "Warmup, as a fraction of the steps.")
    summary_type: str = setting("last", "Pooling of the classifier (--summary_type).",
                                choices=SUMMARY_TYPES)
    max_pages_per_section: int = setting(
        1500, "At most this many man pages per section for the man_section task.")
    man_root: str = setting("/usr/share/man", "Where the man pages are (corpus and the "
                            "man_section task).")
    doc_root: str = setting("/usr/share/doc", "Where the packages' documentation is (corpus).")
    info_root: str = setting("/usr/share/info", "Where the info manuals are (corpus).")
    python_root: str = setting(
        "", "The site-packages whose packages' docstrings are read (corpus and the "
        "python_package task); default: this interpreter's.")

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "vocab_size", "seq_len", "n_layer", "d_model", "pretrain_steps",
                       "pretrain_batch_size", "pretrain_eval_every", "eval_batches",
                       "train_per_label", "dev_per_label", "test_per_label", "finetune_steps",
                       "finetune_batch_size", "max_pages_per_section", "max_corpus_bytes")
        check_non_negative(self, "min_tokens")
        if self.d_model % 32:
            raise RunConfigError(f"--d_model={self.d_model} must be a multiple of 32 (heads of "
                                 "32 dimensions).")
        if self.seq_len % 2 or self.seq_len < 16:
            raise RunConfigError(f"--seq_len={self.seq_len} must be even and >= 16 (the reused "
                                 "half is seq_len / 2).")
        bad = set(self.orders) - {"permutation", "left_to_right"}
        if bad:
            raise RunConfigError(f"--orders: unknown {sorted(bad)}; use permutation, "
                                 "left_to_right.")
        bad = set(self.inits) - set(PAYOFF_INITS)
        if bad:
            raise RunConfigError(f"--inits: unknown {sorted(bad)}; use {', '.join(PAYOFF_INITS)}.")
        missing = [i for i in self.inits if i != "random" and i not in self.orders]
        if missing:
            raise RunConfigError(f"--inits names {missing} but --orders does not pretrain them.")
        bad = set(self.tasks) - set(PAYOFF_TASKS)
        if bad:
            raise RunConfigError(f"--tasks: unknown {sorted(bad)}; use "
                                 f"{', '.join(PAYOFF_TASKS)}.")
        if not 0.0 <= self.finetune_warmup_fraction < 1.0:
            raise RunConfigError("--finetune_warmup_fraction must be in [0, 1).")
        if self.pretrain_batch_size % 2:
            raise RunConfigError("--pretrain_batch_size must be even (bi_data).")
