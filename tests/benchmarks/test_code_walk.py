"""benchmarks/tools/code_walk.py: the concept rule, the floors, the walk's figures and the call
recorder on small made-up packages; the import graph, the concepts and the from_pretrained
walk on the real tree; the command end to end (slow: a traced pretraining step)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from benchmarks.tools import code_walk
from benchmarks.tools.code_walk import Call, CallRecorder, Concept

ROOT = code_walk.ROOT


def _write(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))


def test_concept_rule_counts_code_not_imports_comments_or_strings(tmp_path):
    _write(tmp_path / "pkg", {
        "a.py": "def initial_memory(batch):\n    return batch\n",
        "b.py": "from pkg.a import initial_memory  # imported, never used\n",
        "c.py": "from pkg import a\n\nstate = a.initial_memory(3)\n",
        "d.py": "def attend(h, mems=None):\n    return h\n",
        "e.py": '"""initial_memory in a docstring."""\n# initial_memory\nNAME = "mems"\n',
        "f.py": "class Settings:\n    mem_len: int = 0\n",
        "g.py": "def unrelated(x):\n    return x\n",
    })
    concept = Concept("memory", defines=r"\w*memory\w*", parameters=r"mems?|mem_len")
    found = code_walk.concept_files(code_walk.package_files(str(tmp_path / "pkg")), concept)
    assert found == {
        "a.py": {"home": True, "why": ["def initial_memory"]},
        "c.py": {"home": False, "why": ["uses initial_memory"]},
        "d.py": {"home": True, "why": ["param mems"]},
        "f.py": {"home": True, "why": ["param mem_len"]},
    }


def test_floors_come_from_the_layers_contract():
    table = code_walk.floors()
    assert code_walk.floor_of("commands/run_pretrain.py", table) == max(table.values())
    assert code_walk.floor_of("prep/encode.py", table) == code_walk.floor_of(
        "training/trainer.py", table)
    assert code_walk.floor_of("models/heads/squad_head.py", table) == code_walk.floor_of(
        "models/pretrained.py", table) > code_walk.floor_of("layers/dropout.py", table)
    assert code_walk.floor_of("config.py", table) == code_walk.floor_of("fileio.py", table) == 1
    assert code_walk.floor_of("__init__.py", table) is None


def test_walk_figures_on_a_made_up_trace():
    table = {"hub": 5, "models": 3, "config": 1}
    calls = [Call("hub.py", "load", None),
             Call("models/m.py", "build", "hub.py"),
             Call("config.py", "read", "models/m.py"),
             Call("models/m.py", "build", "hub.py"),       # again: a call, not a new stop
             Call("models/m.py", "restore", "hub.py"),     # back in models after config
             Call("hub.py", "callback", "config.py"),      # config calls up to hub
             Call("__init__.py", "lazy", "hub.py")]        # on no floor
    figures = code_walk.walk_figures(calls, table)
    assert figures["walk"] == ["hub.py:load", "models/m.py:build", "config.py:read",
                               "models/m.py:restore", "hub.py:callback", "__init__.py:lazy"]
    assert (figures["calls"], figures["stops"], figures["files"]) == (7, 6, 4)
    # config -> models and models -> hub go up; a file with no floor is no climb.
    assert figures["climbs"] == 2
    # models:restore and hub:callback land in files left before.
    assert figures["returns"] == 2
    assert figures["calls_up"] == 1


def test_recorder_keeps_calls_of_the_package_by_phase(tmp_path, monkeypatch):
    _write(tmp_path / "walkpkg", {
        "__init__.py": "",
        "inner.py": "def square(x):\n    return x * x\n",
        "outer.py": """\
            from walkpkg import inner


            def run():
                prepare()
                step()
                return finish()


            def prepare():
                return [inner.square(i) for i in range(3)]


            def step():
                from walkpkg import late  # imported here: its body is not walked
                return inner.square(late.VALUE)


            def finish():
                return inner.square(1)
            """,
        "late.py": "from walkpkg import inner\n\nVALUE = inner.square(2)\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    from walkpkg import outer

    package = str(tmp_path / "walkpkg")
    with CallRecorder(("outer.py", "step"), package=package) as recorder:
        outer.run()
    assert [(c.file, c.function, c.caller) for c in recorder.phase_calls("set-up")] == [
        ("outer.py", "run", None), ("outer.py", "prepare", "outer.py"),
        ("inner.py", "square", "outer.py"), ("inner.py", "square", "outer.py"),
        ("inner.py", "square", "outer.py")]
    assert [(c.file, c.function) for c in recorder.phase_calls("step")] == [
        ("outer.py", "step"), ("inner.py", "square")]
    assert [(c.file, c.function) for c in recorder.phase_calls("after")] == [
        ("outer.py", "finish"), ("inner.py", "square")]


def test_import_graph_of_the_real_tree():
    graph = code_walk.import_graph(code_walk.floors(), code_walk.PACKAGE)
    files = sum(name.endswith(".py") for _, _, names in os.walk(code_walk.PACKAGE)
                for name in names)
    assert graph["files"] == files and graph["floors"] == len(set(code_walk.floors().values()))
    assert graph["arrows"] > graph["files"]
    # Imports inside functions: only where the floors allow them (tests/test_architecture.py).
    assert all(m in ("xlnet_tf2", "xlnet_tf2.cli") or m.startswith("xlnet_tf2.commands")
               for m in graph["importers_inside_functions"])


def test_concepts_on_the_real_tree():
    report = code_walk.measure(static_only=True)
    assert set(report["concepts"]) == set(code_walk.CONCEPTS)
    for name, concept in report["concepts"].items():
        assert 1 <= concept["homes"] <= concept["files"] == len(concept["list"]), name
        for path, why in concept["list"].items():
            assert os.path.isfile(os.path.join(code_walk.PACKAGE, path)) and why, (name, path)
    table = code_walk.format_report(report)
    assert "| memory | " in table and "Import graph: " in table


def test_from_pretrained_walks_on_the_real_code():
    walks = code_walk.from_pretrained_walks(code_walk.floors())
    ours, hf = walks["our directory"], walks["HuggingFace directory"]
    for walk in (ours, hf):
        # XLNetLMHeadModel.from_pretrained is the one loader itself (models/pretrained.py).
        assert walk["walk"][0] == "models/pretrained.py:load"
        assert walk["calls"] >= walk["stops"] >= walk["files"] >= 2
        assert len(walk["file_list"]) == walk["files"]
    # A HuggingFace directory is converted on the way: a longer walk.
    assert hf["stops"] > ours["stops"]


@pytest.fixture(scope="module")
def command(tmp_path_factory):
    """`python -m benchmarks.tools.code_walk --json=...` run once for this file's tests: its
    output and its report (the step traced for each device among them)."""
    out = tmp_path_factory.mktemp("walk") / "walk.json"
    run = subprocess.run([sys.executable, "-m", "benchmarks.tools.code_walk", f"--json={out}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout, json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.xla  # the commands' compiled step (--jit_compile, their default)
def test_command_traces_a_pretraining_step(command):
    stdout, report = command
    setup, step = report["pretraining"]["set-up"], report["pretraining"]["step"]
    assert setup["walk"][0] == "commands/run_pretrain.py:run"
    assert step["walk"][0] == ":".join(code_walk.STEP_ENTRY)
    # The step's math, not the loop around it: the command's step is the reference path's.
    assert "training/trainer.py" not in step["file_list"]
    assert set(step["file_list"]) == set(report["step_files"]["cpu"]["files"])
    assert "| pretraining step | " in stdout and "| from_pretrained, " in stdout
    assert "| step traced for | " in stdout


# The reader's budget for one step's math (issue 49 item 9): the files a reader opens from the
# training step to the loss on the reference path (a CPU's trace), kernels included, at most
# 8 files and 2,000 lines (BENCHMARKS.md, "One step's math, file by file").
STEP_FILES_AT_MOST = 8
STEP_LINES_AT_MOST = 2000


@pytest.mark.slow
@pytest.mark.xla  # the commands' compiled step (--jit_compile, their default)
def test_one_steps_math_is_a_few_files_and_accelerators_add_only_device_forms(command):
    """The step traced for a CPU (the reference path), a GPU and a TPU on this machine
    (`Trainer.first_step(device)`, benchmarks/tools/code_walk.py's measure 5, in the command's
    report): the reference path's files and lines within the budget, in the step's module, the
    task's objective, the models and layers (no loop, no memory carrying, no optimizer set-up,
    no kernels/), and an accelerator's step adds only device forms of layers/kernels/ (the
    GPU's the Triton kernels)."""
    found = command[1]["step_files"]
    cpu, gpu, tpu = found["cpu"], found["gpu"], found["tpu"]
    assert cpu["walk"][0] == ":".join(code_walk.STEP_ENTRY)
    assert len(cpu["files"]) <= STEP_FILES_AT_MOST, sorted(cpu["files"])
    assert cpu["total_lines"] <= STEP_LINES_AT_MOST, cpu["files"]
    assert {"training/step.py", "tasks/objective.py", "models/xlnet_model.py",
            "layers/xlnet_block.py"} <= set(cpu["files"])
    assert not {"training/trainer.py", "training/optimization.py", "tasks/pretraining.py",
                "models/memory.py"} & set(cpu["files"])
    assert not any(f.startswith(code_walk.KERNELS) for f in cpu["files"])
    for accelerator in (gpu, tpu):
        assert set(cpu["files"]) <= set(accelerator["files"])
        assert accelerator["files_beyond_cpu"], "an accelerator's step traced as a CPU's"
        assert all(f.startswith(code_walk.KERNELS) for f in accelerator["files_beyond_cpu"])
    assert "layers/kernels/triton_attention.py" in gpu["files_beyond_cpu"]
    lines = "\n".join(code_walk.format_step_files(found, listing=True))
    assert f"| cpu | {len(cpu['files'])} | {cpu['total_lines']} |" in lines
