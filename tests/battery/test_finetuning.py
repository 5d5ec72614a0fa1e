"""Bad input to fine-tuning (run_classifier.py, run_squad.py, run_race.py, run_tagger.py):
task files,
--init_checkpoint directories, flags, damaged, moved or killed runs; see
tests/fixtures/battery.py."""

from __future__ import annotations

import json
import os

import pytest

from fixtures.battery import (Case, as_params, bitflip, clear, command, copy, edit_json, faults,
                              killed, move, on_small_disk, put, remove, run_case, spawn, stopped,
                              truncate, works)
from fixtures.battery_artefacts import (CLASSIFIER_FLAGS, RACE_FLAGS, SQUAD_FLAGS, artefact)

# Each case runs fine-tuning end to end; its artefacts are training runs.
pytestmark = pytest.mark.slow

CLASSIFIER, SQUAD, RACE = ("experiments/run_classifier.py", "experiments/run_squad.py",
                           "experiments/run_race.py")
TAGGER = "experiments/run_tagger.py"
TAGGER_FLAGS = ("--seq_len=32", "--train_batch_size=4", "--eval_every=2", "--log_steps=2",
                "--eval_batch_size=8", "--warmup_steps=1")
# A CoNLL file: a word and its tag per line, a blank line between sentences.
CONLL = "-DOCSTART- O\n\n" + "Peter B-PER\nlives O\nin O\nParis B-LOC\n\n" * 6


def classify(*argv, train="{train.tsv}", dev="{dev.tsv}", init="{pretrain}", model_dir="{ws}/run",
             steps=2, runner=command, kill_at=None):
    extra = {"kill_at": kill_at} if kill_at else {}
    init_flag = (f"--init_checkpoint={init}",) if init else ()
    return runner(CLASSIFIER, *init_flag, f"--model_dir={model_dir}", f"--train_file={train}",
                  f"--eval_file={dev}", f"--train_steps={steps}", *CLASSIFIER_FLAGS, *argv,
                  **extra)


def resume_classifier(*argv, model_dir="{finetune}", **kw):
    return classify(*argv, model_dir=model_dir, steps=6, **kw)


def squad(*argv, train="{squad_train.json}", dev="{squad_dev.json}", model_dir="{ws}/run"):
    return command(SQUAD, "--init_checkpoint={pretrain}", f"--model_dir={model_dir}",
                   f"--train_file={train}", f"--predict_file={dev}", "--train_steps=2",
                   *SQUAD_FLAGS, *argv)


def squad_predict(*argv, model_dir="{squad_run}", dev="{squad_dev.json}"):
    return command(SQUAD, "--do_train=false", f"--model_dir={model_dir}",
                   f"--predict_file={dev}", "--output_dir={ws}/predictions", *argv)


def race(*argv, train="{race_train}", dev="{race_dev}", model_dir="{ws}/run"):
    return command(RACE, "--init_checkpoint={pretrain}", f"--model_dir={model_dir}",
                   f"--train_path={train}", f"--eval_path={dev}", "--train_steps=2",
                   *RACE_FLAGS, *argv)


def tagger(*argv, train="{ws}/train.txt", dev="{ws}/dev.txt", model_dir="{ws}/run"):
    return command(TAGGER, "--init_checkpoint={pretrain}", f"--model_dir={model_dir}",
                   f"--train_file={train}", f"--eval_file={dev}", "--train_steps=2",
                   *TAGGER_FLAGS, *argv)


def with_bytes(source: str, line: bytes, at: int):
    """The text of artefact file `source` with `line` inserted as line `at`."""
    def content(ws):
        with open(ws.path(source), "rb") as f:
            lines = f.read().split(b"\n")
        lines.insert(at - 1, line)
        return b"\n".join(lines)
    return content


def json_of(source: str, change):
    """The JSON of artefact file `source` after change(value) edited it in place."""
    def content(ws):
        with open(ws.path(source), encoding="utf-8") as f:
            value = json.load(f)
        change(value)
        return json.dumps(value)
    return content


def first_qa(change):
    return lambda d: change(d["data"][0]["paragraphs"][0]["qas"][0])


def first_paragraph(change):
    return lambda d: change(d["data"][0]["paragraphs"][0])


def race_passage(change):
    """A RACE directory of one passage: the first of race_train, after change(passage)."""
    def content(ws):
        with open(os.path.join(ws.path("race_train"), "0.txt"), encoding="utf-8") as f:
            passage = json.load(f)
        change(passage)
        return json.dumps(passage)
    return content


def finished(model_dir: str, step: int, best_step: int = None):
    """A check: the run ended at `step`; best/ is a checkpoint directory with its state file
    and best_eval.json names it relatively; nothing names the directory by absolute path."""
    def check(ws, result):
        path = ws.fmt(model_dir)
        summary = json.loads(result.stdout[result.stdout.index("{\n"):])
        assert summary["final_step"] == step, summary
        best = json.loads(open(os.path.join(path, "best_eval.json")).read())
        assert best["checkpoint"] == f"best/ckpt-{best['step']}", best
        if best_step is not None:
            assert best["step"] == best_step, best
        with open(os.path.join(path, "best", "checkpoint")) as f:
            assert f'model_checkpoint_path: "ckpt-{best["step"]}"' in f.read()
        for name in ("best_eval.json", "run_config.json", "attempts.jsonl", "task.json",
                     "checkpoint", "best/checkpoint"):
            assert f'"{path}' not in open(os.path.join(path, name)).read(), name
    return check


def warned_once(*names: str):
    """A check: stderr has exactly one warning line, naming each of `names`."""
    def check(ws, result):
        warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
        assert len(warnings) == 1, result.stderr[-3000:]
        for name in names:
            assert ws.fmt(name) in warnings[0], warnings[0]
    return check


def predicted(directory: str):
    def check(ws, result):
        with open(os.path.join(ws.fmt(directory), "predictions.json")) as f:
            assert len(json.load(f)) > 0
    return check




CASES = [
    # --- the command line: a word left after the flags (e.g. a file of a shell glob)
    Case("classifier/stray-argument", classify("dev2.tsv"), clear("'dev2.tsv'", "--flag=value")),
    # --- classification files
    Case("classifier/train-file-missing", classify(train="{ws}/none.tsv"),
         clear("{ws}/none.tsv", "does not exist")),
    Case("classifier/train-file-not-utf8", classify(train="{ws}/bad.tsv"),
         clear("{ws}/bad.tsv", "line 5", "not valid UTF-8"),
         put("{ws}/bad.tsv", with_bytes("train.tsv", b"caf\xe9\temail", 5))),
    Case("classifier/train-row-missing-field", classify(train="{ws}/bad.tsv"),
         clear("{ws}/bad.tsv", "line 4", "fields"),
         put("{ws}/bad.tsv", with_bytes("train.tsv", b"no label here", 4))),
    Case("classifier/train-label-column-absent", classify("--label_column=label"),
         clear("{train.tsv}", "label")),
    Case("classifier/train-file-empty", classify(train="{ws}/empty.tsv"),
         clear("{ws}/empty.tsv", "empty"), put("{ws}/empty.tsv", b"")),
    Case("classifier/train-file-header-only", classify(train="{ws}/head.tsv"),
         clear("{ws}/head.tsv", "no records"), put("{ws}/head.tsv", "sentence\ttopic\n")),
    Case("classifier/train-file-unknown-type", classify(train="{ws}/train.xyz"),
         clear("{ws}/train.xyz", "unknown file type"), copy("{train.tsv}", "{ws}/train.xyz")),
    Case("classifier/train-jsonl-malformed", classify(train="{ws}/t.jsonl"),
         clear("{ws}/t.jsonl", "line 2", "JSON"),
         put("{ws}/t.jsonl", '{"sentence": "a", "topic": "email"}\n{"sentence": "b", \n')),
    Case("classifier/eval-unknown-label", classify(dev="{ws}/dev.tsv"),
         clear("{ws}/dev.tsv", "politics"),
         put("{ws}/dev.tsv", with_bytes("dev.tsv", b"a new topic\tpolitics", 3))),
    Case("classifier/eval-file-truncated-mid-row", classify(dev="{ws}/dev.tsv"),
         clear("{ws}/dev.tsv"), put("{ws}/dev.tsv", lambda ws: open(
             ws.path("dev.tsv"), "rb").read()[:-40].rsplit(b"\t", 1)[0])),
    # --- --init_checkpoint and the vocabulary
    Case("classifier/init-missing", classify(init="{ws}/none"),
         clear("--init_checkpoint", "{ws}/none")),
    Case("classifier/init-checkpoint-truncated", classify(),
         clear("--init_checkpoint", "{pretrain}", "damaged"),
         truncate("{pretrain}/ckpt-4.data-00000-of-00001")),
    Case("classifier/init-checkpoint-index-bitflip", classify(),
         clear("--init_checkpoint", "{pretrain}"), bitflip("{pretrain}/ckpt-4.index", 0.5)),
    Case("classifier/init-prefix-of-a-missing-step", classify(init="{pretrain}/ckpt-3"),
         clear("--init_checkpoint", "ckpt-3")),
    Case("classifier/init-config-truncated", classify(),
         clear("{pretrain}/xlnet_config.json", "JSON"), truncate("{pretrain}/xlnet_config.json")),
    Case("classifier/init-without-spm", classify(), clear("--spm_model", "spiece.model"),
         remove("{pretrain}/spiece.model")),
    Case("classifier/init-spm-truncated", classify(), clear("{pretrain}/spiece.model"),
         truncate("{pretrain}/spiece.model")),
    Case("classifier/init-other-architecture", classify("--model_config={ws}/c.json"),
         clear("--init_checkpoint", "another architecture", "n_layer 2 (the run's 3)"),
         faults(copy("{pretrain}/xlnet_config.json", "{ws}/c.json"),
                edit_json("{ws}/c.json", lambda c: c.update(n_layer=3)))),
    Case("classifier/init-other-vocabulary", classify("--spm_model={ws}/sp.model"),
         clear("--spm_model", "n_token"),
         faults(copy("{original}/spiece.model", "{ws}/sp.model"),
                edit_json("{pretrain}/xlnet_config.json", lambda c: c.update(n_token=400)))),
    Case("classifier/spm-flag-is-text", classify("--spm_model={ws}/x.model"),
         clear("{ws}/x.model"), put("{ws}/x.model", "not a model")),
    # --- flags
    Case("classifier/flag-seq-len-too-small", classify("--seq_len=2"), clear("--seq_len")),
    Case("classifier/flag-batch-zero", classify("--train_batch_size=0"),
         clear("--train_batch_size")),
    Case("classifier/flag-summary-type-unknown", classify("--summary_type=middle"),
         clear("--summary_type")),
    Case("classifier/flag-eval-every-not-a-number", classify("--eval_every=often"),
         clear("--eval_every=often")),
    Case("classifier/model-dir-is-a-file", classify(model_dir="{ws}/file"), clear("{ws}/file"),
         put("{ws}/file", "x")),
    Case("classifier/model-dir-holds-a-pretraining-run", classify(model_dir="{pretrain}"),
         clear("{pretrain}")),
    # --- resuming, moved and killed runs
    Case("classifier/resume-every-checkpoint-truncated", resume_classifier(),
         clear("No checkpoint in {finetune} could be read", "ckpt-4"),
         truncate("{finetune}/ckpt-4.data-00000-of-00001")),
    Case("classifier/resume-best-eval-truncated", resume_classifier(),
         clear("{finetune}/best_eval.json", "JSON"), truncate("{finetune}/best_eval.json")),
    Case("classifier/resume-task-json-bitflip", resume_classifier(),
         works(finished("{finetune}", 6)), bitflip("{finetune}/task.json", after=b'"paired": '),
         changes=("finetune/*",)),
    Case("classifier/resume-moved-run", resume_classifier(model_dir="{ws}/moved/run"),
         works(finished("{ws}/moved/run", 6)), move("{finetune}", "{ws}/moved/run"),
         changes=("moved/run/*",)),
    Case("classifier/resume-old-format-run", resume_classifier(),
         works(finished("{finetune}", 6)),
         faults(remove("{finetune}/best/checkpoint"),
                edit_json("{finetune}/best_eval.json", lambda b: b.update(
                    checkpoint="/elsewhere/finetune/best/ckpt-2"))),
         changes=("finetune/*",)),
    Case("classifier/killed-saving-best-then-rerun", classify(steps=4),
         works(finished("{ws}/run", 4)),
         killed(classify(steps=4, runner=spawn,
                         kill_at="tensorflow.python.lib.io.file_io|atomic_write_string_to_file|"
                                 "1|best/checkpoint")),
         changes=("run/*",)),
    Case("classifier/disk-full", classify(model_dir="{ws}/disk/run"),
         clear("{ws}/disk/run", "No space left on device"),
         on_small_disk("{ws}/disk", 800_000), changes=("disk/*",)),
    Case("classifier/diverged", classify("--learning_rate=1e38", "--warmup_steps=0", steps=4),
         stopped("loss"), changes=("run/*",)),
    # --- SQuAD
    Case("squad/train-file-not-utf8", squad(train="{ws}/bad.json"),
         clear("{ws}/bad.json", "UTF-8"),
         put("{ws}/bad.json", lambda ws: open(ws.path("squad_train.json"), "rb").read().replace(
             b"What does", b"Wh\xe9t does", 1))),
    Case("squad/train-file-truncated", squad(train="{ws}/t.json"), clear("{ws}/t.json", "JSON"),
         faults(copy("{squad_train.json}", "{ws}/t.json"), truncate("{ws}/t.json"))),
    Case("squad/train-file-missing", squad(train="{ws}/none.json"),
         clear("{ws}/none.json", "does not exist")),
    Case("squad/no-data-list", squad(train="{ws}/t.json"), clear("{ws}/t.json", '"data"'),
         put("{ws}/t.json", '{"version": "1.1"}')),
    Case("squad/qas-null", squad(train="{ws}/t.json"), clear("{ws}/t.json", "qas"),
         put("{ws}/t.json", json_of("squad_train.json", first_paragraph(
             lambda p: p.update(qas=None))))),
    Case("squad/context-not-a-string", squad(train="{ws}/t.json"),
         clear("{ws}/t.json", "context"),
         put("{ws}/t.json", json_of("squad_train.json", first_paragraph(
             lambda p: p.update(context=["a", "list"]))))),
    Case("squad/answer-start-wrong", squad(train="{ws}/t.json"),
         clear("{ws}/t.json", "answer_start"),
         put("{ws}/t.json", json_of("squad_train.json", first_qa(
             lambda q: q["answers"][0].update(answer_start=q["answers"][0]["answer_start"] + 3))))),
    Case("squad/answers-null", squad(train="{ws}/t.json"), clear("{ws}/t.json", "answers"),
         put("{ws}/t.json", json_of("squad_train.json", first_qa(
             lambda q: q.update(answers=None))))),
    Case("squad/impossible-without-version-2", squad(train="{ws}/t.json"),
         clear("{ws}/t.json", "--version_2_with_negative"),
         put("{ws}/t.json", json_of("squad_train.json", first_qa(
             lambda q: q.update(is_impossible=True, answers=[]))))),
    Case("squad/flag-query-longer-than-seq", squad("--max_query_length=70"),
         clear("--max_query_length")),
    # A question of max_query_length tokens would leave no document token: refused before any
    # file is read (the train file need not exist).
    Case("squad/flag-query-fills-seq-len",
         command(SQUAD, "--model_dir={ws}/run", "--train_file={ws}/none.json", *SQUAD_FLAGS,
                 "--max_query_length=61"),
         clear("--max_query_length=61", "--seq_len=64")),
    Case("squad/predict-moved-run", squad_predict(model_dir="{ws}/moved"),
         works(predicted("{ws}/predictions")), move("{squad_run}", "{ws}/moved"),
         changes=("predictions/*",)),
    Case("squad/predict-best-truncated", squad_predict(),
         clear("{squad_run}/best/ckpt-2", "damaged"),
         truncate("{squad_run}/best/ckpt-2.data-00000-of-00001")),
    Case("squad/predict-best-deleted-from-copy", squad_predict(model_dir="{ws}/copy"),
         clear("{ws}/copy/best/ckpt-2.index", "best_eval.json", "--checkpoint=latest"),
         faults(copy("{squad_run}", "{ws}/copy"), remove("{ws}/copy/best"))),
    Case("squad/predict-file-missing", squad_predict(dev="{ws}/none.json"),
         clear("{ws}/none.json")),
    Case("squad/predict-task-json-missing", squad_predict(), clear("{squad_run}/task.json"),
         remove("{squad_run}/task.json")),
    # --- RACE
    Case("race/questions-null", race(train="{ws}/r"), clear("{ws}/r/0.txt", "questions"),
         put("{ws}/r/0.txt", race_passage(lambda p: p.update(questions=None)))),
    Case("race/file-not-utf8", race(train="{ws}/r"), clear("{ws}/r/0.txt", "UTF-8"),
         put("{ws}/r/0.txt", lambda ws: race_passage(lambda p: None)(ws).encode().replace(
             b'"article": "', b'"article": "caf\xe9 ', 1))),
    Case("race/answer-not-a-letter", race(train="{ws}/r"), clear("{ws}/r/0.txt", "E"),
         put("{ws}/r/0.txt", race_passage(lambda p: p["answers"].__setitem__(0, "E")))),
    Case("race/three-options", race(train="{ws}/r"), clear("{ws}/r/0.txt", "4"),
         put("{ws}/r/0.txt", race_passage(lambda p: p["options"][0].pop()))),
    Case("race/file-truncated", race(train="{ws}/r"), clear("{ws}/r/0.txt", "JSON"),
         put("{ws}/r/0.txt", lambda ws: race_passage(lambda p: None)(ws)[:200])),
    Case("race/article-not-a-string", race(train="{ws}/r"), clear("{ws}/r/0.txt", "article"),
         put("{ws}/r/0.txt", race_passage(lambda p: p.update(article=7)))),
    Case("race/directory-without-files", race(train="{ws}/r"), clear("{ws}/r", "no .json/.txt"),
         put("{ws}/r/readme.md", "none here")),
    Case("race/train-path-missing", race(train="{ws}/none"), clear("{ws}/none", "does not exist")),
    # --- token classification's CoNLL files
    Case("tagger/works", tagger(), works(),
         faults(put("{ws}/train.txt", CONLL), put("{ws}/dev.txt", CONLL))),
    Case("tagger/train-line-without-tag", tagger(), clear("{ws}/train.txt", "line 4", "no tag"),
         faults(put("{ws}/train.txt", "Peter B-PER\nlives O\n\nParis\n"),
                put("{ws}/dev.txt", CONLL))),
    # A tag the training data never had: scored as missed (conlleval's rule), one warning.
    Case("tagger/eval-unknown-tag", tagger(), works(warned_once("{ws}/dev.txt", "['B-ORG']")),
         faults(put("{ws}/train.txt", CONLL), put("{ws}/dev.txt", "EU O\nCommission B-ORG\n"))),
    Case("tagger/train-file-empty", tagger(), clear("{ws}/train.txt", "no sentence"),
         faults(put("{ws}/train.txt", b""), put("{ws}/dev.txt", CONLL))),
    Case("tagger/train-file-missing", tagger(train="{ws}/none.txt"),
         clear("{ws}/none.txt", "does not exist"), put("{ws}/dev.txt", CONLL)),
    Case("race/flag-max-qa-length-zero", race("--max_qa_length=0"), clear("--max_qa_length")),
    # Question and option as long as seq_len leave no room for the article: refused before
    # any file is read (the train path need not exist).
    Case("race/flag-max-qa-length-fills-seq-len",
         command(RACE, "--model_dir={ws}/run", "--train_path={ws}/none", *RACE_FLAGS,
                 "--max_qa_length=61"),
         clear("--max_qa_length=61", "--seq_len=64")),
]


@pytest.mark.parametrize("case", as_params(CASES))
def test_finetuning(case, tmp_path):
    run_case(case, str(tmp_path), artefact)
