"""`--help` of every command lists every flag that the command's own usage examples use (the
command lines of its module docstring, of its module in xlnet_tf2/commands/, of README.md,
docs/*.md and scripts/*.sh; as `python <script>` or as its console script), every flag it
lists has full-sentence help, and `--help` does not import TensorFlow. One subprocess per
command."""

from __future__ import annotations

import ast
import glob
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
import tomllib

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "data_prep").is_dir())
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
# The fine-tuning and pretraining commands get their task flags from task config trees that are
# being written; their --help may miss flags until then.
TASK_COMMANDS = ("experiments/run_classifier.py", "experiments/run_squad.py",
                 "experiments/run_race.py", "experiments/run_tagger.py",
                 "experiments/run_pretrain.py")
# absl's own flags, which every command has but --help (the command's key flags) leaves out.
ABSL_FLAGS = {"help", "helpfull", "helpshort", "helpxml", "verbosity", "v", "flagfile"}
# The console scripts (pyproject.toml) and the script files that run the same command:
# {"xlnet-pretrain": "experiments/run_pretrain.py", ...}.
CONSOLE = {
    name: next(f"{folder}/{target.split(':')[0].rsplit('.', 1)[1]}.py"
               for folder in ("experiments", "data_prep")
               if (ROOT / folder / f"{target.split(':')[0].rsplit('.', 1)[1]}.py").is_file())
    for name, target in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["scripts"].items()}
# python <command> or $PY <command>, as written in docstrings, docs and shell scripts, or a
# console script.
COMMAND = re.compile(r"(?:python|\$PY)\s+((?:data_prep|experiments|benchmarks)/\w+\.py)\b|"
                     r"(?<![\w/-])(xlnet(?:-[a-z]+)+)(?![\w-])")
FLAG = re.compile(r"(?<![\w-])--(\w+)")
# What absl appends to a flag's help: its default and its type.
ABSL_NOTES = re.compile(r"(\s*\((default: '.*?'|an integer|a number|a comma separated list)\))+$")
HELP_ENTRY = re.compile(r"^  --(\[no\])?(\w+): (.*?)(?=^  --|^\S|\Z)", re.M | re.S)


def _commands() -> List[str]:
    paths = [path for folder in ("experiments", "data_prep", "benchmarks")
             for path in glob.glob(str(ROOT / folder / "*.py"))]
    return sorted(os.path.relpath(p, ROOT) for p in paths
                  if 'if __name__ == "__main__":' in Path(p).read_text(encoding="utf-8"))


def command_lines(text: str) -> Dict[str, List[str]]:
    """{command path: [its command lines]} of a text: a line from `python <command>` to its
    end, continued after a trailing backslash, without a trailing # comment; inside inline
    code (a backtick before `python`), up to the closing backtick."""
    found: Dict[str, List[str]] = {}
    for match in COMMAND.finditer(text):
        command = match.group(1) or CONSOLE.get(match.group(2))
        if command is None:  # xlnet-something that is no command
            continue
        rest = text[match.end():]
        if match.start() > 0 and text[match.start() - 1] == "`":
            line = rest.split("`", 1)[0]
        else:
            line = ""
            for part in rest.split("\n"):
                line += " " + part
                if not part.rstrip().endswith("\\"):
                    break
            line = re.split(r"\s#\s", line, maxsplit=1)[0]
        found.setdefault(command, []).append(line)
    return found


def usage_flags(command: str) -> Dict[str, str]:
    """{flag: where it is used} for the command's usage examples."""
    sources = {command + " docstring": ast.get_docstring(ast.parse(
        (ROOT / command).read_text(encoding="utf-8"))) or ""}
    module = ROOT / "xlnet_tf2" / "commands" / os.path.basename(command)
    if module.is_file():  # the command's module, whose docstring is its console script's help
        sources[f"{os.path.relpath(module, ROOT)} docstring"] = ast.get_docstring(ast.parse(
            module.read_text(encoding="utf-8"))) or ""
    for pattern in ("README.md", "docs/*.md", "scripts/*.sh"):
        for path in sorted(glob.glob(str(ROOT / pattern))):
            sources[os.path.relpath(path, ROOT)] = Path(path).read_text(encoding="utf-8")
    flags = {}
    for where, text in sources.items():
        for line in command_lines(text).get(command, []):
            for name in FLAG.findall(line):
                flags.setdefault(name, where)
    return flags


def _help_of(command: str):
    """(--help output, whether TensorFlow was imported) of a command, in one subprocess."""
    script = (
        "import runpy, sys\n"
        f"path = {command!r}\n"
        "sys.argv = [path, '--help']\n"
        "sys.path.insert(0, path.split('/')[0])\n"
        "try:\n"
        "    runpy.run_path(path, run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('tensorflow imported:', 'tensorflow' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, env=ENV, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout, "tensorflow imported: True" in run.stdout


def test_command_lines_are_found_with_their_continuations():
    text = ("Run it:\n    python data_prep/x.py --a=1 \\\n        --b  # --not_this\n"
            "then `python experiments/y.py --c=...\n  [--d | --e]` and\n"
            '$PY data_prep/x.py --f="$OUT" \\\n  ${G:+--g=$G}\nplain --h\n')
    assert command_lines(text).keys() == {"data_prep/x.py", "experiments/y.py"}
    assert [FLAG.findall(line) for line in command_lines(text)["data_prep/x.py"]] == [
        ["a", "b"], ["f", "g"]]
    assert FLAG.findall(command_lines(text)["experiments/y.py"][0]) == ["c", "d", "e"]
    console = ("`xlnet-pretrain --data_dir=d` and\n  xlnet-tf2 --x=1 pip install xlnet-tf2[test]"
               "\n  xlnet-pretrain \\\n    --model_dir=m\n")
    assert {k: [FLAG.findall(line) for line in v] for k, v in command_lines(console).items()} \
        == {"experiments/run_pretrain.py": [["data_dir"], ["model_dir"]]}


def test_every_command_is_covered():
    commands = _commands()
    assert {"data_prep/create_tfrecords.py", "experiments/convert_checkpoint.py",
            "experiments/export_saved_model.py", "experiments/extract_features.py",
            "data_prep/build_corpus.py", "benchmarks/benchmark.py"} <= set(commands)
    assert set(TASK_COMMANDS) <= set(commands)
    assert "benchmarks/benchmark_reference.py" not in commands  # a module, not a command
    assert len(CONSOLE) == 11 and set(CONSOLE.values()) <= set(commands)
    assert CONSOLE["xlnet-pretrain"] == "experiments/run_pretrain.py"
    module = ast.get_docstring(ast.parse((ROOT / "xlnet_tf2" / "commands" / "run_pretrain.py")
                                         .read_text(encoding="utf-8")))
    example = command_lines(module)["experiments/run_pretrain.py"][0]  # xlnet-pretrain's
    assert set(FLAG.findall(example)) == {"data_dir", "model_dir", "model_config",
                                          "train_batch_size", "train_steps"}
    assert usage_flags("data_prep/create_tfrecords.py").keys() >= {
        "input", "spm_model", "output_dir", "num_streams", "bi_data", "seq_len", "reuse_len",
        "num_predict", "overwrite", "eval_fraction"}  # the docstring, DATA.md, run_demo.sh


@pytest.mark.slow
@pytest.mark.parametrize("command", _commands())
def test_help_lists_every_flag_its_usage_uses(command):
    output, imported_tensorflow = _help_of(command)
    entries = {m.group(2): (bool(m.group(1)), " ".join(m.group(3).split()))
               for m in HELP_ENTRY.finditer(output)}
    assert entries, output[-2000:]
    known = set(entries) | ABSL_FLAGS
    negated = {"no" + name for name, (boolean, _) in entries.items() if boolean}
    missing = {name: where for name, where in usage_flags(command).items()
               if name not in known | negated}
    assert not missing, f"{command} --help does not list {missing}"
    for name, (_, text) in entries.items():
        text = ABSL_NOTES.sub("", text)
        text = re.sub(r"^<[^>]*>: ", "", text)  # an enum's choices, added by absl
        assert text[:1].isupper() and text.endswith((".", ".)")) and len(text.split()) >= 5, (
            f"{command} --{name}: {text!r}")
    assert not imported_tensorflow, f"{command} --help imported TensorFlow"
