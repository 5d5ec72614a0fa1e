"""Does pretraining pay off? The stages of benchmarks/pretraining_payoff.py.

    1 tasks      two downstream classification tasks from labeled text installed here
                 (payoff_tasks.py), written once: WORKDIR/tasks/<task>/{train,dev,test}.jsonl
    2 corpus     documentation prose (doc_corpus.py: man pages, info manuals, /usr/share/doc,
                 the installed Python packages) without any document a task reads, and a
                 disjoint slice to train the tokenizer on: WORKDIR/corpus.txt, spm_text.txt
    3 tokenizer  SentencePiece (data_prep/train_sentencepiece.py): WORKDIR/spiece.model
    4 data       pretraining TFRecords with a held-out part (data_prep/create_tfrecords.py
                 --eval_fraction): WORKDIR/data, WORKDIR/data/eval
    5 pretrain   one run per factorization order (experiments/run_pretrain.py
                 --factorization_order=permutation | left_to_right), the same data, model,
                 steps, seed and flags otherwise: WORKDIR/pretrain/<order>
    6 finetune   every task x initialization x seed (experiments/run_classifier.py; the
                 best dev checkpoint is scored on test here):
                 WORKDIR/finetune/<recipe>/<task>/<init>-s<seed>, the recipe naming the
                 fine-tuning flags (steps, batch, learning rate, warmup, pooling)
    7 report     WORKDIR/results.json, results.md (the table) and payoff.png (the figure)

Every stage runs the commands a user runs, as subprocesses, and leaves its output complete or
not at all (a `done.json` marks a finished pretraining or fine-tuning run), so running the
experiment again continues where it stopped. Timings and the machine's load average are
recorded per stage.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional

from benchmarks.tools import doc_corpus, payoff_tasks
from benchmarks.tools.command_configs import PayoffConfig
from benchmarks.tools.loop_benchmark import load_average
from xlnet_tf2 import fileio
from xlnet_tf2.config_flags import RunConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DONE = "done.json"


class PayoffError(RunConfigError):
    """A stage failed or its input is unusable; the message says what to do (cli.run prints
    it without a traceback)."""


def log(message: str) -> None:
    print(f"[payoff {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _read_json(path: str) -> dict:
    """A JSON object a stage wrote; a damaged one is one line naming it (fileio)."""
    return fileio.read_json_object(path, PayoffError,
                                   fix="Delete it and run the command again to redo its stage.")


def _run_command(script: str, flags: Dict[str, object], log_path: Optional[str]) -> None:
    """Runs a checkout command (a path under ROOT) with --name=value flags; its output goes
    to `log_path` (or through). On failure: PayoffError with the log's last lines."""
    argv = [sys.executable, os.path.join(ROOT, script)]
    for name, value in flags.items():
        if isinstance(value, bool):
            argv.append(f"--{name}" if value else f"--no{name}")
        elif isinstance(value, (list, tuple)):
            argv.append(f"--{name}=" + ",".join(str(v) for v in value))
        else:
            argv.append(f"--{name}={value}")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    if log_path is None:
        code = subprocess.run(argv, cwd=ROOT, env=env).returncode
        tail = ""
    else:
        with open(log_path, "w", encoding="utf-8") as out:
            code = subprocess.run(argv, cwd=ROOT, env=env, stdout=out,
                                  stderr=subprocess.STDOUT).returncode
        with open(log_path, encoding="utf-8", errors="replace") as f:
            tail = "".join(f.readlines()[-15:])
    if code:
        where = f" (log: {log_path})" if log_path else ""
        raise PayoffError(f"{script} failed (exit {code}){where}:\n{tail}")


class Experiment:
    """The stages over one working directory (see the module docstring)."""

    def __init__(self, config: PayoffConfig):
        self.c = config
        self.workdir = os.path.abspath(config.workdir)
        self.timings: Dict[str, dict] = {}
        self.total_steps = 7

    def path(self, *parts: str) -> str:
        return os.path.join(self.workdir, *parts)

    def stage(self, index: int, name: str, fn):
        log(f"== {index}/{self.total_steps} {name}")
        start, load = time.time(), load_average()
        result = fn()
        seconds = time.time() - start
        self.timings[name] = {"seconds": round(seconds, 1), "load_start": load,
                              "load_end": load_average()}
        log(f"   {name}: {seconds:.0f} s")
        return result

    # ------------------------------------------------------------------ 1 tasks
    def build_tasks(self) -> Dict[str, dict]:
        sizes = payoff_tasks.TaskSizes(
            train=self.c.train_per_label, dev=self.c.dev_per_label, test=self.c.test_per_label,
            max_pages_per_section=self.c.max_pages_per_section)
        infos = {}
        for task in self.c.tasks:
            out = self.path("tasks", task)
            info_path = os.path.join(out, "task_info.json")
            if os.path.exists(info_path):
                infos[task] = _read_json(info_path)
                log(f"   {task}: reusing {out} (written once)")
                continue
            documents = payoff_tasks.labeled_documents(
                task, sizes, man_root=self.c.man_root, python_root=self.c.python_root or None)
            splits, names = payoff_tasks.build_task(documents, sizes)
            for split, rows in splits.items():
                if len({r["label"] for r in rows}) < 2:
                    raise PayoffError(
                        f"task {task}: the {split} split got {len(rows)} examples from "
                        f"{len(names)} documents; is the text it reads installed (README, "
                        "'Does pretraining pay off?')?")
            infos[task] = payoff_tasks.write_task(out, task, splits, names)
            counts = {s: sum(v.values()) for s, v in infos[task]["counts"].items()}
            log(f"   {task}: {len(infos[task]['labels'])} labels, {counts} examples, from "
                f"{len(names)} documents")
        return infos

    def task_documents(self) -> set:
        names = set()
        for task in self.c.tasks:
            with open(self.path("tasks", task, "documents.txt"), encoding="utf-8") as f:
                names.update(line.strip() for line in f if line.strip())
        return names

    # ------------------------------------------------------------------ 2 corpus
    def build_corpus(self) -> dict:
        stats_path = self.path("corpus_stats.json")
        if os.path.exists(stats_path):
            log(f"   reusing {self.path('corpus.txt')}")
            return _read_json(stats_path)
        excluded = self.task_documents()
        roots = {k: v for k, v in (("man", self.c.man_root), ("doc", self.c.doc_root),
                                   ("info", self.c.info_root),
                                   ("python", self.c.python_root)) if v}
        stats = doc_corpus.build_doc_corpus(
            self.path("corpus.txt"), self.path("spm_text.txt"), max_bytes=self.c.max_corpus_bytes,
            spm_fraction=0.1, max_spm_bytes=8_000_000, roots=roots,
            exclude=lambda source, name: name in excluded)
        fileio.write_json_atomically(stats_path, stats)
        log(f"   {stats['bytes']:,} bytes of prose from {stats['documents']:,} documents "
            f"({', '.join(f'{k} {v:,}' for k, v in stats['by_source'].items())}); "
            f"{stats['excluded_documents']:,} task documents left out; tokenizer slice "
            f"{stats['spm_bytes']:,} bytes")
        return stats

    # ------------------------------------------------------------------ 3 tokenizer
    def train_tokenizer(self) -> str:
        model = self.path("spiece.model")
        if not os.path.exists(model):
            _run_command("data_prep/train_sentencepiece.py", {
                "input": self.path("spm_text.txt"), "vocab_size": self.c.vocab_size,
                "model_prefix": self.path("spiece")}, self.path("logs", "spiece.log"))
        return model

    # ------------------------------------------------------------------ 4 data
    def prepare_data(self) -> dict:
        manifest = self.path("data", "record_info.json")
        if not os.path.exists(manifest):
            L = self.c.seq_len
            _run_command("data_prep/create_tfrecords.py", {
                "input": self.path("corpus.txt"), "spm_model": self.path("spiece.model"),
                "output_dir": self.path("data"), "seq_len": L, "reuse_len": L // 2,
                "num_predict": max(1, round(L / 6)),
                "num_streams": self.c.pretrain_batch_size // 2, "bi_data": True,
                "eval_fraction": 0.02, "overwrite": True}, self.path("logs", "data.log"))
        train = _read_json(manifest)
        held_out = _read_json(self.path("data", "eval", "record_info.json"))
        total = train["total_tokens"] + held_out["total_tokens"]
        log(f"   {total:,} tokens: {train['total_tokens']:,} for training, "
            f"{held_out['total_tokens']:,} held out ({held_out['documents']} documents), "
            f"vocabulary {train['vocab_size']:,}")
        if total < self.c.min_tokens:
            raise PayoffError(
                f"the corpus holds {total:,} tokens, fewer than --min_tokens="
                f"{self.c.min_tokens:,}: install more documentation (README, 'Does pretraining "
                f"pay off?': apt-get install linux-doc perl-doc) and delete {self.workdir}/"
                "corpus_stats.json, or lower --min_tokens.")
        return {"train_tokens": train["total_tokens"], "heldout_tokens": held_out["total_tokens"],
                "heldout_documents": held_out["documents"], "vocab_size": train["vocab_size"]}

    # ------------------------------------------------------------------ 5 pretrain
    def model_config_path(self) -> str:
        path = self.path("model_config.json")
        c = self.c
        vocab_size = _read_json(self.path("data", "record_info.json"))["vocab_size"]
        fileio.write_json_atomically(path, {
            "n_layer": c.n_layer, "d_model": c.d_model, "n_head": c.d_model // 32, "d_head": 32,
            "d_inner": 4 * c.d_model, "ff_activation": "gelu", "untie_r": True,
            "n_token": vocab_size})
        return path

    def pretrain(self, order: str) -> dict:
        out = self.path("pretrain", order)
        if not os.path.exists(os.path.join(out, DONE)):
            c = self.c
            log(f"   pretraining, {order} order: {c.pretrain_steps} steps of "
                f"{c.pretrain_batch_size} x {c.seq_len} tokens ({out})")
            start = time.time()
            _run_command("experiments/run_pretrain.py", {
                "data_dir": self.path("data"), "model_dir": out,
                "model_config": self.model_config_path(), "factorization_order": order,
                "train_batch_size": c.pretrain_batch_size, "train_steps": c.pretrain_steps,
                "steps_per_loop": _divisor_at_most(c.pretrain_eval_every, 50),
                "log_steps": c.pretrain_eval_every, "learning_rate": c.pretrain_learning_rate,
                "warmup_steps": max(1, c.pretrain_steps // 10), "weight_decay": 0.01,
                "mem_len": c.seq_len // 2, "dropout": 0.1, "dropatt": 0.1,
                "jit_compile": True, "eval_steps": c.pretrain_eval_every,
                "eval_batches": c.eval_batches, "save_steps": c.pretrain_steps,
                "record_steps": True, "seed": 0}, None)
            fileio.write_json_atomically(os.path.join(out, DONE),
                                         {"seconds": round(time.time() - start, 1)})
        evals = fileio.read_jsonl(os.path.join(out, "eval_results.jsonl"))
        steps = fileio.read_jsonl(os.path.join(out, "steps.jsonl"))
        return {"model_dir": out, "heldout": [{"step": e["step"], "loss": e["loss"]}
                                              for e in evals],
                "train_loss": _smoothed([s["loss"] for s in steps]),
                "seconds": _read_json(os.path.join(out, DONE))["seconds"]}

    # ------------------------------------------------------------------ 6 finetune
    def recipe(self) -> str:
        """The fine-tuning settings as a folder name: another recipe on the same pretraining
        runs gets its own runs (the tasks, corpus, data and pretraining are reused)."""
        c = self.c
        return (f"steps{c.finetune_steps}-batch{c.finetune_batch_size}-"
                f"lr{c.finetune_learning_rate:g}-warmup{c.finetune_warmup_fraction:g}-"
                f"{c.summary_type}")

    def finetune(self, task: str, init: str, seed: int) -> dict:
        out = self.path("finetune", self.recipe(), task, f"{init}-s{seed}")
        done = os.path.join(out, DONE)
        if os.path.exists(done):
            return _read_json(done)
        c = self.c
        task_dir = self.path("tasks", task)
        flags = {"kind": "classification", "train_file": os.path.join(task_dir, "train.jsonl"),
                 "eval_file": os.path.join(task_dir, "dev.jsonl"), "text_a_column": "text",
                 "label_column": "label", "model_dir": out, "seq_len": c.seq_len,
                 "train_steps": c.finetune_steps, "train_batch_size": c.finetune_batch_size,
                 "learning_rate": c.finetune_learning_rate,
                 "warmup_steps": int(c.finetune_warmup_fraction * c.finetune_steps),
                 "eval_every": max(1, c.finetune_steps // 3), "save_steps": c.finetune_steps,
                 "log_steps": max(1, c.finetune_steps // 3), "seed": seed,
                 "summary_type": c.summary_type, "jit_compile": True,
                 "feature_cache_dir": self.path("feature_cache")}
        if init == "random":
            flags.update(model_config=self.model_config_path(),
                         spm_model=self.path("spiece.model"))
        else:
            flags["init_checkpoint"] = self.path("pretrain", init)
        if os.path.exists(out):
            shutil.rmtree(out)  # an unfinished run: start it again from its initialization
        os.makedirs(out)
        start = time.time()
        _run_command("experiments/run_classifier.py", flags, os.path.join(out, "run.log"))
        dev = _read_json(os.path.join(out, "best_eval.json"))
        test = test_accuracy(out, os.path.join(task_dir, "test.jsonl"))
        result = {"task": task, "init": init, "seed": seed, "test_accuracy": test,
                  "dev_accuracy": dev.get("accuracy", dev.get("metrics", {}).get("accuracy")),
                  "seconds": round(time.time() - start, 1)}
        fileio.write_json_atomically(done, result)
        return result

    # ------------------------------------------------------------------ all
    def run(self) -> dict:
        try:  # the figure is the last stage: say it now, not after an hour and a half
            import matplotlib  # noqa: F401
        except ImportError:
            raise PayoffError("the figure (payoff.png) needs matplotlib: EXTRA=test bash "
                              "scripts/setup_env.sh (or pip install -r requirements-test.txt)."
                              ) from None
        os.makedirs(self.path("logs"), exist_ok=True)
        started = time.time()
        c = self.c
        tasks = self.stage(1, "tasks", self.build_tasks)
        corpus = self.stage(2, "corpus", self.build_corpus)
        self.stage(3, "tokenizer", self.train_tokenizer)
        data = self.stage(4, "data", self.prepare_data)
        pretraining = self.stage(5, "pretrain", lambda: {o: self.pretrain(o) for o in c.orders})

        def finetune_all():
            results = []
            runs = [(t, i, s) for t in c.tasks for i in c.inits for s in c.seeds]
            for k, (task, init, seed) in enumerate(runs, 1):
                r = self.finetune(task, init, seed)
                results.append(r)
                log(f"   [{k}/{len(runs)}] {task} {init} seed {seed}: test accuracy "
                    f"{r['test_accuracy']:.4f} (dev {r['dev_accuracy']:.4f}, {r['seconds']:.0f} s)")
            return results

        finetuning = self.stage(6, "finetune", finetune_all)
        from benchmarks.tools import payoff_report
        report = {"config": dataclasses.asdict(c), "tasks": tasks, "corpus": corpus,
                  "data": data, "pretraining": pretraining, "finetuning": finetuning,
                  "timings": self.timings}
        report["heldout_baseline"] = payoff_report.unigram_baseline(
            self.path("data"), self.path("data", "eval"), c.pretrain_batch_size,
            c.pretrain_steps)
        self.stage(7, "report", lambda: payoff_report.write_report(self.workdir, report))
        report["timings"] = self.timings
        report["wall_seconds"] = round(time.time() - started, 1)
        fileio.write_json_atomically(self.path("results.json"), report)
        log(f"done in {report['wall_seconds'] / 60:.1f} min: {self.path('results.md')}, "
            f"{self.path('payoff.png')}")
        return report


def _divisor_at_most(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def _smoothed(losses: List[float], points: int = 50) -> List[dict]:
    """The training loss (one per step) averaged over `points` equal windows:
    [{"step": last step of the window, "loss"}]."""
    if not losses:
        return []
    width = max(1, len(losses) // points)
    return [{"step": start + width, "loss": sum(losses[start:start + width]) /
             len(losses[start:start + width])} for start in range(0, len(losses), width)]


def test_accuracy(model_dir: str, test_file: str) -> float:
    """Accuracy of model_dir's best checkpoint on the test file (never seen in training or
    checkpoint selection)."""
    from xlnet_tf2.tasks import classification, text_readers
    from xlnet_tf2.tasks.finetuned_model import load_task_model
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

    model, spec, spm_model = load_task_model(model_dir, "classification", "best")
    examples = text_readers.read_text_file(test_file, "text", None, "label", False)
    label_ids = {label: i for i, label in enumerate(spec.label_list)}
    features = classification.build_features(
        examples, SentencePieceTokenizer.from_file(spm_model), spec.seq_len, spec.layout,
        [label_ids[e.label] for e in examples])
    metrics = classification.evaluate(model, features, 64, False, len(spec.label_list))
    return float(metrics["accuracy"])
