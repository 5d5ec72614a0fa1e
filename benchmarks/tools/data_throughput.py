"""Data-preparation and input-pipeline throughput on text the tokenizer never saw.

The corpus is documentation prose found on the machine (`doc_corpus.build_doc_corpus`: man
pages, info manuals, /usr/share/doc, docstrings of the installed Python packages), every
paragraph once, never repeated. The SentencePiece model is trained on a held-out slice of
the same sources (other documents), so the benchmarked text is new to it, as a user's corpus
is. Corpus and model are built once per work directory and reused while their settings
match (`prepare_corpus`).

Measured:
* `measure_stages`: every stage of preparation in this process, on one thread, on the first
  `stage_bytes` of the corpus (tokens/s of that text per stage, the SentencePiece-only
  ceiling, and each tokenizer mode);
* `measure_end_to_end`: the whole command `data_prep/create_tfrecords.py`, as a user runs
  it, with the default settings and with `--noword_cache` (line mode), alternating, several
  runs each; the machine's load (/proc/loadavg) is read before every run, and the two modes'
  outputs are compared byte for byte. Or, given several runners (`runner_args`: Beam's
  DirectRunner, a dask.distributed cluster started once, `DaskCluster`, or the command's own
  local dask cluster), the command in the default mode on each, alternating, the same way;
* the input pipeline (`build_pretrain_dataset`, examples/s) on the prepared data.

Every rate is corpus tokens per second; with bi_data each token is in two rows (forward and
backward), and each row token in L / R = 2 examples.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from xlnet_tf2 import fileio
from xlnet_tf2.data import records
from xlnet_tf2.data.params import DataParams
from xlnet_tf2.data.pretrain_dataset import build_pretrain_dataset
from xlnet_tf2.data.objective_sampling import start_piece_table
from xlnet_tf2.prep import streams, text_sources
from xlnet_tf2.prep.beam_pipeline import BATCH_CHARS
from xlnet_tf2.prep.encode import BatchEncoder, normalize
from xlnet_tf2.prep.examples import row_example_batches
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import (SentencePieceTokenizer,
                                                          train_sentencepiece)
from benchmarks.tools.doc_corpus import SOURCES, build_doc_corpus

CORPUS_FILE = "corpus.txt"
SPM_TEXT_FILE = "spm_text.txt"
CORPUS_INFO = "corpus.json"
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CREATE_TFRECORDS = os.path.join(_ROOT, "data_prep", "create_tfrecords.py")


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_average() -> str:
    """The 1, 5 and 15 minute load averages of /proc/loadavg ("" where there is none)."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return ""


def prepare_corpus(workdir: str, *, corpus_bytes: int, spm_bytes: int, vocab_size: int,
                   sources: Sequence[str] = SOURCES, log=print) -> dict:
    """Builds (or reuses) the benchmark corpus and its SentencePiece model in `workdir`.

    Returns:
      {"path", "spm_model", "bytes", "documents", "sentences", "by_source", "spm_bytes",
       "vocab_size", "sha256", "settings"}; reused from workdir/corpus.json when the
      settings match and the files are unchanged.
    """
    os.makedirs(workdir, exist_ok=True)
    settings = {"corpus_bytes": corpus_bytes, "spm_bytes": spm_bytes,
                "vocab_size": vocab_size, "sources": list(sources)}
    info_path = os.path.join(workdir, CORPUS_INFO)
    corpus = os.path.join(workdir, CORPUS_FILE)
    if os.path.exists(info_path):
        with open(info_path) as f:
            info = json.load(f)
        if (info.get("settings") == settings and os.path.exists(corpus)
                and os.path.exists(info["spm_model"]) and _sha256(corpus) == info["sha256"]):
            log(f"corpus: reusing {corpus} (built earlier with the same settings)")
            return info
    log(f"corpus: building {corpus_bytes:,} bytes of documentation prose from "
        f"{', '.join(sources)} (once per work directory; rendering man pages takes a while)")
    start = time.time()
    stats = build_doc_corpus(corpus, os.path.join(workdir, SPM_TEXT_FILE),
                             max_bytes=corpus_bytes, max_spm_bytes=spm_bytes,
                             sources=sources, min_bytes=corpus_bytes // 2)
    log(f"corpus: built in {time.time() - start:.0f}s; training a {vocab_size}-piece "
        "SentencePiece model on the held-out slice")
    spm = train_sentencepiece([stats["spm_path"]], vocab_size=vocab_size,
                              model_prefix=os.path.join(workdir, f"sp{vocab_size}"))
    info = {"path": corpus, "spm_model": spm, "bytes": stats["bytes"],
            "documents": stats["documents"], "sentences": stats["sentences"],
            "by_source": stats["by_source"], "spm_bytes": stats["spm_bytes"],
            "duplicate_paragraphs": stats["duplicate_paragraphs"], "vocab_size": vocab_size,
            "sha256": _sha256(corpus), "settings": settings}
    with open(info_path, "w") as f:
        json.dump(info, f, indent=2)
    return info


def _best_of(fn, repeats: int):
    """(result, best wall-clock seconds of `repeats` runs): the machine may be shared."""
    best, out = None, None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    return out, best


def _worker_batches(lines: List[str]) -> List[List[str]]:
    """The lines cut into batches of about BATCH_CHARS characters, as the reader cuts them."""
    batches, size, start = [], 0, 0
    for k, line in enumerate(lines):
        size += len(line) + 1
        if size >= BATCH_CHARS or k == len(lines) - 1:
            batches.append(lines[start:k + 1])
            size, start = 0, k + 1
    return batches


def measure_stages(corpus: str, spm_model: str, params: DataParams, *,
                   stage_bytes: int = 8_000_000, repeats: int = 2) -> Dict[str, object]:
    """Times each stage of preparation in this process, on one thread.

    The stages run on the corpus's first `stage_bytes` (whole lines), best of `repeats`.
    Tokenizing runs batch by batch as a worker does: line mode, the default (the word cache
    where `CachePolicy` finds it pays), the word cache on every batch, and the word cache on
    a second pass over the same text (every word known: what it gives on repeated text).

    Returns:
      {"bytes", "tokens", "stages": [{"stage", "seconds", "tokens_per_s"}],
       "default_cache_batches": "used/batches"}.
    """
    tok = SentencePieceTokenizer.from_file(spm_model, lower=params.uncased)
    rows = []

    def add(stage, seconds, tokens):
        rows.append({"stage": stage, "seconds": seconds, "tokens_per_s": tokens / seconds})

    def read():
        lines, size = [], 0
        for line in text_sources.read_lines(corpus, skip_bad_lines=False, fix=""):
            lines.append(line)
            size += len(line) + 1
            if size >= stage_bytes:
                break
        return lines

    lines, t_read = _best_of(read, repeats)
    batches = _worker_batches(lines)
    normalized, t_norm = _best_of(lambda: [normalize(line, lower=tok.lower,
                                                     keep_accents=tok.keep_accents)
                                           for line in lines], repeats)
    line_encoder = BatchEncoder(tok)
    _, t_sp = _best_of(lambda: line_encoder._encode_normalized(normalized), repeats)

    def tokenize(**kwargs):
        encoder = BatchEncoder(tok, **kwargs)
        return encoder, [encoder.encode_lines(batch) for batch in batches]

    (_, encoded), t_line = _best_of(lambda: tokenize(), repeats)
    tokens = int(sum(ids.shape[0] for ids, _ in encoded))
    (default, _), t_default = _best_of(lambda: tokenize(word_cache=True), repeats)
    (cached, _), t_cache = _best_of(lambda: tokenize(word_cache=True, adaptive=False), repeats)
    _, t_warm = _best_of(lambda: [cached.encode_lines(batch) for batch in batches], repeats)
    add("read lines", t_read, tokens)
    add("normalize (preprocess_text)", t_norm, tokens)
    add("SentencePiece only (ceiling)", t_sp, tokens)
    add("tokenize, line mode (--noword_cache)", t_line, tokens)
    add(f"tokenize, default (word cache on {default.counts['cache_batches']} of "
        f"{default.counts['batches']} batches)", t_default, tokens)
    add("tokenize, word cache on every batch", t_cache, tokens)
    add("tokenize, word cache on every batch, text seen before", t_warm, tokens)

    ids = np.concatenate([ids for ids, _ in encoded])
    per_line = np.concatenate([per for _, per in encoded])
    sent = np.repeat(np.arange(per_line.shape[0]), per_line)
    row_len = tokens // params.num_streams

    def layout():
        return [streams.assemble_row([(0, ids[s * row_len:(s + 1) * row_len],
                                       sent[s * row_len:(s + 1) * row_len])], row_len)
                for s in range(params.num_streams)]

    row_data, t_layout = _best_of(layout, repeats)
    add("layout (rows)", t_layout, tokens)
    starts = start_piece_table(tok)

    def examples():
        out = []
        for stream, (row, row_sent) in enumerate(row_data):
            for direction in range(params.num_directions):
                for batch in row_example_batches(row, row_sent, params=params,
                                                 starts_word=starts, stream_id=stream,
                                                 pass_id=0, direction=direction):
                    num = batch["chunk_index"].shape[0]
                    batch["stream_id"] = np.full(num, stream, np.int32)
                    batch["direction"] = np.full(num, direction, np.int32)
                    batch["pass_id"] = np.zeros(num, np.int32)
                    out.append(batch)
        return out

    example_batches, t_ex = _best_of(examples, repeats)
    add("examples (A/B, spans, orders)", t_ex, tokens)
    # As TFRecordFileWriter.write_batch: the framed bytes of a batch, then one file write.
    framed, t_ser = _best_of(lambda: [records.framed_batch(b) for b in example_batches],
                             repeats)
    add("serialize (tf.train.Example bytes, TFRecord framing)", t_ser, tokens)
    path = os.path.join(os.path.dirname(os.path.abspath(corpus)), "stage_write.tfrecord")

    def write():
        with open(path, "wb") as f:
            for data in framed:
                f.write(data)

    _, t_write = _best_of(write, repeats)
    add("write (file)", t_write, tokens)
    os.remove(path)
    add("sum of the stages preparation runs (tokenizing in line mode)",
        t_read + t_line + t_layout + t_ex + t_ser + t_write, tokens)
    return {"bytes": sum(len(line) + 1 for line in lines), "tokens": tokens, "stages": rows}


def runner_args(runner: str, workers: int, cluster_address: Optional[str] = None) -> List[str]:
    """The Beam options that put the command on `runner` (command_configs.DATA_RUNNERS)."""
    if runner == "direct":
        return [f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"]
    if runner == "dask":
        return ["--runner=DaskRunner", f"--dask_client_address={cluster_address}"]
    if runner == "dask-local":
        return ["--runner=DaskRunner"]
    raise ValueError(f"unknown runner {runner!r}")


def create_tfrecords_command(corpus: str, spm_model: str, output_dir: str,
                             params: DataParams, beam_args: Sequence[str],
                             word_cache: bool) -> List[str]:
    """The whole data-preparation command a user runs, for these settings (the default
    tokenizer mode, or line mode with --noword_cache) and Beam options (`runner_args`)."""
    return [sys.executable, CREATE_TFRECORDS, f"--input={corpus}", f"--spm_model={spm_model}",
            f"--output_dir={output_dir}", "--overwrite", f"--seq_len={params.seq_len}",
            f"--reuse_len={params.reuse_len}", f"--num_predict={params.num_predict}",
            f"--num_streams={params.num_streams}",
            "--bi_data" if params.bi_data else "--nobi_data", *beam_args] + (
                [] if word_cache else ["--noword_cache"])


def _command_env() -> Dict[str, str]:
    """The environment of the commands (and the cluster's processes): this checkout first on
    the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
    return env


def _import_pipeline() -> None:
    import xlnet_tf2.prep.beam_pipeline  # noqa: F401 - Beam, numpy, the pipeline's modules


class DaskCluster:
    """A dask.distributed cluster run as on real hosts: a `dask scheduler` process and a
    `dask worker` process with `workers` worker processes (one thread each), here all on this
    machine, over TCP on 127.0.0.1, with the dask configuration docs/DATA.md#runners gives
    the workers (dask_runner.WORKER_CONFIG_YAML, in workdir/dask-config). `start_seconds`:
    from starting the scheduler to every worker connected; `warm_seconds`: until every worker
    has also imported the pipeline's modules, as those of a cluster that ran before have.
    Logs go to workdir/dask-scheduler.log and dask-worker.log."""

    def __init__(self, workdir: str, workers: int, timeout: float = 300.0):
        import distributed
        from xlnet_tf2.prep.dask_runner import WORKER_CONFIG_YAML

        self._config = os.path.join(workdir, "dask-config")
        os.makedirs(self._config, exist_ok=True)
        with open(os.path.join(self._config, "xlnet-prep.yaml"), "w") as f:
            f.write(WORKER_CONFIG_YAML)
        scheduler_file = os.path.join(workdir, "dask-scheduler.json")
        if os.path.exists(scheduler_file):
            os.remove(scheduler_file)
        self._procs: List[subprocess.Popen] = []
        start = time.perf_counter()
        try:
            self._start(workdir, "scheduler", "--host", "127.0.0.1", "--port", "0",
                        "--scheduler-file", scheduler_file)
            while not os.path.exists(scheduler_file):
                if time.perf_counter() - start > timeout or self._procs[0].poll() is not None:
                    raise RuntimeError(f"the dask scheduler did not start: see {workdir}/"
                                       "dask-scheduler.log")
                time.sleep(0.05)
            self._start(workdir, "worker", "--scheduler-file", scheduler_file, "--nworkers",
                        str(workers), "--nthreads", "1", "--local-directory",
                        os.path.join(workdir, "dask-worker-space"))
            with distributed.Client(scheduler_file=scheduler_file, timeout=timeout) as client:
                client.wait_for_workers(workers, timeout=timeout)
                self.address = client.scheduler.address
                self.start_seconds = time.perf_counter() - start
                # What a long-running cluster's workers have done before: import the pipeline.
                client.run(_import_pipeline)
            self.warm_seconds = time.perf_counter() - start
        except BaseException:
            self.close()
            raise

    def _start(self, workdir: str, role: str, *args: str) -> None:
        with open(os.path.join(workdir, f"dask-{role}.log"), "w") as log:
            self._procs.append(subprocess.Popen(
                [sys.executable, "-m", f"distributed.cli.dask_{role}", "--no-dashboard", *args],
                cwd=_ROOT, env=dict(_command_env(), DASK_CONFIG=self._config), stdout=log,
                stderr=subprocess.STDOUT))

    def cpu_seconds(self) -> float:
        """User + system CPU seconds so far of the scheduler, the workers and their nannies."""
        import psutil

        total = 0.0
        for proc in self._procs:
            try:
                root = psutil.Process(proc.pid)
                for p in [root] + root.children(recursive=True):
                    times = p.cpu_times()
                    total += times.user + times.system
            except psutil.NoSuchProcess:
                continue
        return total

    def close(self) -> None:
        for proc in reversed(self._procs):  # workers first, then the scheduler
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self._procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _timed_run(command: List[str], output_dir: str,
               cluster: Optional[DaskCluster] = None) -> Dict[str, object]:
    """Runs one data-preparation command; its wall clock, CPU (of the command and its Beam
    workers, and of `cluster`'s processes when it runs there), the tokens it prepared (its
    manifest) and the load before it."""
    load = load_average()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    used_cluster = cluster.cpu_seconds() if cluster else 0.0
    start = time.perf_counter()
    # From the repository root: Beam's worker processes put their working directory first on
    # sys.path, so elsewhere they could import another checkout's package.
    done = subprocess.run(command, env=_command_env(), cwd=_ROOT, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    # CPU of the command and its Beam workers (the command waits for them): on a shared
    # machine it moves less than the wall clock.
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime
    if cluster:
        cpu += cluster.cpu_seconds() - used_cluster
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    with open(os.path.join(output_dir, "record_info.json")) as f:
        tokens = json.load(f)["total_tokens"]
    return {"seconds": seconds, "cpu_seconds": cpu, "tokens": tokens,
            "tokens_per_s": tokens / seconds, "load": load}


def _contenders(runners: Sequence[str]) -> Dict[str, tuple]:
    """{name: (runner, word_cache)}: both tokenizer modes on one runner, or every runner in
    the default mode."""
    if len(runners) == 1:
        return {"default": (runners[0], True), "line mode": (runners[0], False)}
    return {runner: (runner, True) for runner in runners}


def _same_files(first: str, other: str, names: Sequence[str]) -> bool:
    match, mismatch, errors = filecmp.cmpfiles(first, other, names, shallow=False)
    return not mismatch and not errors and len(match) > 0


def measure_end_to_end(corpus: str, spm_model: str, params: DataParams, workdir: str, *,
                       workers: int = 2, runs: int = 3, runners: Sequence[str] = ("direct",),
                       log=print) -> Dict[str, object]:
    """Runs the whole command for every contender, alternating (in order in even rounds,
    reversed in odd ones), `runs` times each. The contenders are the default settings and
    --noword_cache on one runner, or, with several `runners`, each runner in the default
    mode; "dask" runs on a `DaskCluster` started before the first run (its start-up timed
    apart) and stopped after the last.

    Returns:
      {"runs": [{"mode", "seconds", "cpu_seconds", "tokens", "tokens_per_s", "load"}] ("mode":
       the contender), "median": {contender: {"seconds", "tokens_per_s", "cpu_seconds"}},
       "ratios": {contender: its median tokens/s / the first contender's} (the others),
       "ratio": default / line-mode tokens/s (one runner only),
       "identical": whether every contender's prepared files are byte for byte the first's
       (the records only when the modes differ: the manifest records the mode),
       "cluster_start_seconds", "cluster_warm_seconds" (with "dask": `DaskCluster`),
       "contenders", "runners", "workers", "data_dir" (the first contender's output),
       "command": the first contender's command}.
    """
    contenders = _contenders(runners)
    names = list(contenders)
    outputs = {name: os.path.join(workdir, f"prepared_{name.replace(' ', '_')}")
               for name in names}
    order = []
    for k in range(runs):
        order += names if k % 2 == 0 else names[::-1]
    cluster = None
    result: Dict[str, object] = {}
    try:
        if "dask" in runners:
            cluster = DaskCluster(workdir, workers)
            result["cluster_start_seconds"] = cluster.start_seconds
            result["cluster_warm_seconds"] = cluster.warm_seconds
            log(f"  dask cluster: scheduler and {workers} worker{'s' * (workers != 1)} up in "
                f"{cluster.start_seconds:.2f}s, the pipeline imported in them at "
                f"{cluster.warm_seconds:.2f}s (load {load_average()})")
        commands = {name: create_tfrecords_command(
            corpus, spm_model, outputs[name], params,
            runner_args(runner, workers, cluster.address if cluster else None), word_cache)
            for name, (runner, word_cache) in contenders.items()}
        result_runs = []
        for name in order:
            on_cluster = cluster if contenders[name][0] == "dask" else None
            row = dict(mode=name, **_timed_run(commands[name], outputs[name], on_cluster))
            result_runs.append(row)
            log(f"  {name:10s} {row['seconds']:6.2f}s {row['tokens_per_s']:12,.0f} tokens/s  "
                f"CPU {row['cpu_seconds']:6.2f}s  load before: {row['load']}")
    finally:
        if cluster:
            cluster.close()
    modes_differ = len(runners) == 1
    files = sorted(n for n in os.listdir(outputs[names[0]])
                   if n.endswith(".tfrecord") or not modes_differ)
    median = {}
    for name in names:
        seconds = statistics.median(r["seconds"] for r in result_runs if r["mode"] == name)
        median[name] = {"seconds": seconds,
                        "tokens_per_s": result_runs[0]["tokens"] / seconds,
                        "cpu_seconds": statistics.median(r["cpu_seconds"] for r in result_runs
                                                         if r["mode"] == name)}
    ratios = {name: median[name]["tokens_per_s"] / median[names[0]]["tokens_per_s"]
              for name in names[1:]}
    result.update(
        runs=result_runs, median=median, ratios=ratios,
        identical=all(_same_files(outputs[names[0]], outputs[name], files)
                      for name in names[1:]),
        contenders=names, runners=list(runners), workers=workers,
        data_dir=outputs[names[0]], command=" ".join(commands[names[0]]))
    if modes_differ:
        result["ratio"] = 1 / ratios["line mode"]
    return result


def first_half(corpus: str, path: str) -> str:
    """Writes the corpus's first half, cut at a document end, to `path` (once)."""
    if not os.path.exists(path):
        with open(corpus, "rb") as f:
            data = f.read()
        cut = data.find(b"\n\n", len(data) // 2)
        fileio.write_atomically(path, data[:cut + 2 if cut >= 0 else len(data)])
    return path


def measure_scaling(corpus: str, spm_model: str, params: DataParams, workdir: str, *,
                    workers: int = 2, runs: int = 3, log=print) -> Dict[str, object]:
    """The default command on the corpus's first half and on the whole corpus, alternating,
    `runs` times each: the line through the two medians splits the wall clock into a fixed
    cost (what does not grow with the text: start-up, Beam's workers, the last steps) and a
    marginal rate (tokens/s of each added token).

    Returns:
      {"runs": [{"corpus", "seconds", "tokens", ...}], "median": {"half", "whole": seconds},
       "tokens": {"half", "whole"}, "fixed_seconds", "marginal_tokens_per_s"}.
    """
    inputs = {"whole": corpus, "half": first_half(corpus, os.path.join(workdir, "half.txt"))}
    outputs = {name: os.path.join(workdir, f"prepared_{name}") for name in inputs}
    rows = []
    for k in range(runs):
        for name in (("whole", "half") if k % 2 == 0 else ("half", "whole")):
            command = create_tfrecords_command(inputs[name], spm_model, outputs[name], params,
                                               runner_args("direct", workers), word_cache=True)
            row = dict(corpus=name, **_timed_run(command, outputs[name]))
            rows.append(row)
            log(f"  {name:5s} {row['seconds']:6.2f}s {row['tokens']:>10,} tokens  "
                f"load before: {row['load']}")
    median = {name: statistics.median(r["seconds"] for r in rows if r["corpus"] == name)
              for name in inputs}
    tokens = {name: next(r["tokens"] for r in rows if r["corpus"] == name) for name in inputs}
    return {"runs": rows, "median": median, "tokens": tokens, **scaling_line(tokens, median)}


def scaling_line(tokens: Dict[str, int], seconds: Dict[str, float]) -> Dict[str, object]:
    """The line seconds = fixed + tokens / marginal through the "half" and "whole" points.

    Returns {"fixed_seconds", "marginal_tokens_per_s"}, both None when the whole corpus did
    not take longer than its half: on a corpus that small the timing noise is larger than the
    work, and a line through the points would report a meaningless (negative or huge) rate.
    """
    added_seconds = seconds["whole"] - seconds["half"]
    if added_seconds <= 0 or tokens["whole"] <= tokens["half"]:
        return {"fixed_seconds": None, "marginal_tokens_per_s": None}
    marginal = (tokens["whole"] - tokens["half"]) / added_seconds
    return {"fixed_seconds": seconds["whole"] - tokens["whole"] / marginal,
            "marginal_tokens_per_s": marginal}


def measure_input_pipeline(data_dir: str, params: DataParams, vocab_size: int, *,
                           global_batch_size: int = 16, steps: int = 100) -> Dict[str, float]:
    """Examples/s of `build_pretrain_dataset` reading prepared data (after 5 warm-up
    batches)."""
    dataset = build_pretrain_dataset(data_dir, seq_len=params.seq_len,
                                     reuse_len=params.reuse_len,
                                     num_predict=params.num_predict, bi_data=params.bi_data,
                                     vocab_size=vocab_size,
                                     global_batch_size=global_batch_size)
    iterator = iter(dataset)
    for _ in range(5):
        next(iterator)
    start = time.time()
    for _ in range(steps):
        next(iterator)
    rate = steps * global_batch_size / (time.time() - start)
    return {"global_batch_size": global_batch_size, "seq_len": params.seq_len,
            "examples_per_s": rate, "tokens_per_s": rate * params.seq_len}


def measure_data_throughput(workdir: str, *, corpus_bytes: int = 32_000_000,
                            spm_bytes: int = 8_000_000, vocab_size: int = 16_000,
                            seq_len: int = 512, reuse_len: int = 256, num_predict: int = 85,
                            num_streams: int = 16, workers: int = 2, runs: int = 3,
                            runners: Sequence[str] = ("direct",),
                            stages: bool = True, stage_bytes: int = 8_000_000,
                            scaling: bool = True,
                            global_batch_size: int = 16, pipeline_steps: int = 100,
                            sources: Sequence[str] = SOURCES,
                            log=print) -> Dict[str, object]:
    """Corpus, per-stage rates, end-to-end runs of both modes, input pipeline (module
    docstring). Progress lines go to `log`."""
    corpus = prepare_corpus(workdir, corpus_bytes=corpus_bytes, spm_bytes=spm_bytes,
                            vocab_size=vocab_size, sources=sources, log=log)
    params = DataParams(seq_len=seq_len, reuse_len=reuse_len, num_predict=num_predict,
                        perm_size=reuse_len, bi_data=True, num_streams=num_streams)
    result: Dict[str, object] = {"corpus": corpus, "params": params.to_dict()}
    if stages:
        log(f"stages: timing each stage on the first {stage_bytes:,} bytes, one thread")
        result["stages"] = measure_stages(corpus["path"], corpus["spm_model"], params,
                                          stage_bytes=stage_bytes)
    log(f"end to end: {runs} runs of each {'mode' if len(runners) == 1 else 'runner'}, "
        f"alternating, {workers} worker processes")
    result["end_to_end"] = measure_end_to_end(corpus["path"], corpus["spm_model"], params,
                                              workdir, workers=workers, runs=runs,
                                              runners=runners, log=log)
    if scaling:
        log(f"scaling: the default command on the first half and on the whole corpus, "
            f"{runs} runs each, alternating")
        result["scaling"] = measure_scaling(corpus["path"], corpus["spm_model"], params,
                                            workdir, workers=workers, runs=runs, log=log)
    result["pipeline"] = measure_input_pipeline(
        result["end_to_end"]["data_dir"], params, vocab_size,
        global_batch_size=global_batch_size, steps=pipeline_steps)
    return result


def format_report(result: Dict[str, object]) -> str:
    c = result["corpus"]
    p = result["params"]
    e = result["end_to_end"]
    tokens = e["runs"][0]["tokens"]
    sources = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in c["by_source"].items())
    lines = [
        f"corpus (new text, never repeated): {c['bytes'] / 1e6:.1f} MB of documentation prose "
        f"({sources}), {c['documents']:,} documents, {tokens:,} tokens; paragraphs "
        f"deduplicated; sha256 {c['sha256'][:16]}",
        f"tokenizer: SentencePiece unigram, {c['vocab_size']} pieces, trained on a held-out "
        f"slice of {c['spm_bytes'] / 1e6:.1f} MB (other documents of the same sources)",
        f"settings: seq_len {p['seq_len']}, reuse_len {p['reuse_len']}, num_predict "
        f"{p['num_predict']}, {p['num_streams']} streams, bi_data, {e['workers']} Beam worker "
        "processes"]
    stages = result.get("stages")
    if stages:
        lines.append(f"stages, one process, one thread, on the first {stages['bytes']:,} bytes "
                     f"({stages['tokens']:,} tokens; tokens/s per core):")
        for row in stages["stages"]:
            lines.append(f"  {row['stage']}: {row['seconds']:.2f}s = "
                         f"{row['tokens_per_s']:,.0f} tokens/s")
    modes = "ratio" in e
    lines.append("end to end, the whole command, alternating (CPU: user + system seconds of the "
                 "command and its workers, and of the dask cluster's processes; load: "
                 "/proc/loadavg 1/5/15 min before the run)"
                 + (f" on the {e['runners'][0]} runner:" if modes else ":"))
    if "cluster_start_seconds" in e:
        lines.append(f"dask cluster (scheduler, {e['workers']} workers) started in "
                     f"{e['cluster_start_seconds']:.2f}s, the pipeline imported in its workers "
                     f"at {e['cluster_warm_seconds']:.2f}s, before the runs (not in them)")
    column = "mode" if modes else "runner"
    lines.append(f"| run | {column} | seconds | tokens/s | CPU seconds | load before |")
    lines.append("|---|---|---|---|---|---|")
    for k, row in enumerate(e["runs"], start=1):
        lines.append(f"| {k} | {row['mode']} | {row['seconds']:.2f} | "
                     f"{row['tokens_per_s']:,.0f} | {row['cpu_seconds']:.2f} | {row['load']} |")
    for mode, m in e["median"].items():
        lines.append(f"median, {mode}: {m['seconds']:.2f}s = {m['tokens_per_s']:,.0f} tokens/s, "
                     f"CPU {m['cpu_seconds']:.2f}s")
    identical = f"prepared files byte-identical: {'yes' if e['identical'] else 'NO'}"
    if modes:
        lines.append(f"default / line mode: {e['ratio']:.3f}x; {identical}")
    else:
        first = e["contenders"][0]
        lines.append("; ".join(f"{name} / {first}: {ratio:.3f}x"
                               for name, ratio in e["ratios"].items()) + f"; {identical}")
    lines.append(f"command ({e['contenders'][0]}): {e['command']}")
    if result.get("scaling"):
        lines.append(format_scaling(result["scaling"]))
    pipe = result["pipeline"]
    lines.append(f"input pipeline: batch {pipe['global_batch_size']} x {pipe['seq_len']}, "
                 f"{pipe['examples_per_s']:.0f} examples/s ({pipe['tokens_per_s']:.0f} "
                 "tokens/s)")
    return "\n".join(lines)


def format_scaling(scale: Dict[str, object]) -> str:
    """One report line for `measure_scaling`'s result."""
    if scale["marginal_tokens_per_s"] is None:
        fit = ("the whole corpus was not slower than its half, so the timing noise is larger "
               "than the work: no line fitted (use a larger --corpus_bytes)")
    else:
        fit = (f"fixed cost {scale['fixed_seconds']:.2f}s, then "
               f"{scale['marginal_tokens_per_s']:,.0f} tokens/s per added token")
    return (f"scaling (default mode, medians of {len(scale['runs']) // 2} runs each): first "
            f"half {scale['tokens']['half']:,} tokens in {scale['median']['half']:.2f}s, whole "
            f"{scale['tokens']['whole']:,} in {scale['median']['whole']:.2f}s: {fit}")
