"""A newcomer's walk through xlnet_tf2/, measured from the code alone (issue 33: the same
measure before and after a restructuring).

  python -m benchmarks.tools.code_walk                  # the tables (runs three traces)
  python -m benchmarks.tools.code_walk --static         # concepts and import graph only
  python -m benchmarks.tools.code_walk --list --json=walk.json
  python -m benchmarks.tools.code_walk --root=OTHER_CHECKOUT   # another version, same tool
  python -m benchmarks.tools.code_walk --step_files --list      # the step's files only
  python -m benchmarks.tools.code_walk --step_files --root=OLD --step_entry=FILE:FUNCTION

Five measures:

1. Concepts. Each concept (`CONCEPTS`) is two patterns over identifiers: `defines`, the
   names of its functions and classes, and `parameters`, the names of its tensors and
   settings. Over an AST walk of every file of xlnet_tf2/ (code only: comments, docstrings
   and strings are not read):
     homes  the files that define a function, method or class whose name matches `defines`,
            or have a function parameter or a class field whose name matches `parameters`;
     files  the homes and the files whose code (import statements aside) names one of those
            definitions: calls it, reads it, subclasses it.
   `--list` prints every file with the identifiers that put it there. A renamed function
   still counts if its new name keeps the concept's word; a concept that gets a new word
   needs its pattern updated here.
2. The pretraining step, traced: a tiny prepared corpus (built here, not traced), then the
   command's `run` (xlnet_tf2/commands/run_pretrain.py) for one step under `sys.settrace`,
   recording every call into a function of xlnet_tf2/. Set-up is every call from the
   command's start to the first entry into the training step's function (`STEP_ENTRY`); the
   step is every call while that function's Python runs the first time (TensorFlow traces
   it once, so its Python is the step: features in, loss, gradients and update out).
3. `xlnet_tf2.from_pretrained(name_or_dir)` (the package's own entry, wherever it is
   implemented) on a tiny directory of our format and on one of HuggingFace's, traced the
   same way.
4. The import graph (grimp): files, floors (pyproject.toml's import-linter layers) and
   arrows (module pairs with an import at module level; imports inside functions, which
   only `__init__.py`, cli.py and commands/ may have, are counted apart).
5. The step's files: what a reader opens from the training step to the loss, kernels
   included. The first step of a tiny pretraining Trainer on a synthetic batch, compiled as
   one XLA computation and traced (the Python only: nothing runs) for each device's plan,
   `Trainer.first_step(device)`: "cpu" is the reference path, "gpu" and "tpu" what those
   devices trace (the Triton kernels lowered to TTIR and emitted, not run). Per plan: the
   files of the step's walk (from `STEP_ENTRY`) and their whole line counts.
   `files_beyond_cpu`: the files a plan adds to the reference path's, which should be device
   forms (`KERNELS`) only.

A traced walk: every call into xlnet_tf2/ is a call (comprehensions and generator
expressions are part of their function, not calls of their own); the walk is the sequence
of distinct functions in the order they are first called, as a reader meets them (a model
with more layers calls the same functions more often, not a longer walk). Over the walk:
  stops     its length (functions read)
  files     distinct files
  climbs    consecutive stops where the next is on a higher floor than the last (the reader
            climbs back up after a call into a lower floor, or a low floor calls up)
  returns   stops that land in a file visited before, after having left it
  calls up  calls whose caller (the nearest frame in xlnet_tf2/) is on a lower floor than
            the function called: a dependency upward at run time, through an object passed
            down or a registry, which the import contract cannot see
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import re
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "xlnet_tf2")
# The training step's function: the first run of its Python is the pretraining step.
STEP_ENTRY = ("training/step.py", "TrainingStep.replica_step")
# Where the device forms live (layers/kernels/): what an accelerator's step may add.
KERNELS = "layers/kernels/"
STEP_DEVICES = ("cpu", "gpu", "tpu")


@dataclasses.dataclass(frozen=True)
class Concept:
    what: str
    defines: str      # full-match regex: names of the concept's functions, methods, classes
    parameters: str   # full-match regex: names of its tensors and settings


CONCEPTS = {
    "memory": Concept(
        "Transformer-XL's recurrence: creating, resetting, carrying and consuming the memory",
        defines=r"\w*([Mm]emory|[Mm]ems)\w*|carried_state",
        parameters=r"mems?|new_mems|mem_len|m_len|memory|memory_mask"),
    "loading weights": Concept(
        "finding, reading, converting, restoring and saving weights (checkpoints, presets, "
        "pretrained directories, the best checkpoint)",
        defines=r"\w*([Pp]retrained|[Cc]heckpoint|corruption|damage)\w*"
                r"|(from|save_to|load_task|_load)_preset|init_backbone|(read|save)_best"
                r"|_?(load|restore|read|convert)_\w*(weights|model|backbone|lm|directory)\w*"
                r"|hub_function|register_loader",
        parameters=r"name_or_dir|checkpoint_path"),
    "pretraining objective": Concept(
        "span targets, factorization orders, two-stream masks and inputs",
        defines=r"\w*(span_mask|two_stream|factorization|perm_mask|target_mapping)\w*"
                r"|(online|sample)_ranks\w*|dense_features|build_attention_masks",
        parameters=r"perm_mask|target_mapping|perm_rank|target_mask|target_positions"
                   r"|factorization_order|span_mode|query_mask"),
    "classification": Concept(
        "sequence classification: config, task, model, head, loss, metrics",
        defines=r"\w*[Cc]lassif\w*",
        parameters=r"num_classes"),
}


# ---------------------------------------------------------------------------- the files
def package_files(package: str = PACKAGE) -> Dict[str, ast.Module]:
    """{path relative to the package ("models/saving.py"): its AST} of every .py file."""
    trees = {}
    for folder, dirs, names in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    trees[os.path.relpath(path, package)] = ast.parse(f.read(), path)
    return trees


def _definitions(tree: ast.Module) -> set:
    return {n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _parameters(tree: ast.Module) -> set:
    """Function parameters and class-body annotated fields (a dataclass's constructor)."""
    names = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names.update(s.target.id for s in node.body
                         if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
    return names


def _references(tree: ast.Module) -> set:
    """Names and attribute names the code reads or calls (import statements hold aliases,
    not Name nodes, so an import alone is no reference)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


def concept_files(trees: Dict[str, ast.Module], concept: Concept) -> Dict[str, dict]:
    """{file: {"home": bool, "why": sorted ["def X", "param Y", "uses Z"]}} (module docstring:
    homes and files)."""
    defines, parameters = re.compile(concept.defines), re.compile(concept.parameters)
    defined = {name for tree in trees.values() for name in _definitions(tree)
               if defines.fullmatch(name)}
    found = {}
    for path, tree in trees.items():
        home = sorted([f"def {n}" for n in _definitions(tree) & defined] +
                      [f"param {n}" for n in _parameters(tree) if parameters.fullmatch(n)])
        uses = sorted(f"uses {n}" for n in _references(tree) & defined)
        if home or uses:
            found[path] = {"home": bool(home), "why": home + uses}
    return found


# ---------------------------------------------------------------------------- floors
def floors(pyproject: str = os.path.join(ROOT, "pyproject.toml")) -> Dict[str, int]:
    """{top-level module or subpackage of xlnet_tf2: floor}, floor 1 the lowest, from the
    import-linter layers contract."""
    import tomllib

    with open(pyproject, "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c.get("type") == "layers")
    return {name.strip(): len(layers) - i for i, entry in enumerate(layers)
            for name in re.split(r"[|:]", entry)}


def floor_of(path: str, table: Dict[str, int]) -> Optional[int]:
    """The floor of a file ("models/saving.py" -> models' floor); None for the package's
    __init__.py, which is on no floor."""
    return table.get(path.split("/")[0].removesuffix(".py"))


# ---------------------------------------------------------------------------- import graph
def import_graph(table: Dict[str, int], package: str = PACKAGE) -> dict:
    """Files, floors and arrows of xlnet_tf2's import graph (module docstring, 4)."""
    import grimp

    graph = grimp.build_graph("xlnet_tf2", cache_dir=None)  # the one use_checkout chose
    top_level, lazy = set(), set()
    for importer in graph.modules:
        path = _module_file(importer, package)
        function_lines = _function_lines(path) if path else set()
        for imported in graph.find_modules_directly_imported_by(importer):
            details = graph.get_import_details(importer=importer, imported=imported)
            if any(d["line_number"] not in function_lines for d in details):
                top_level.add((importer, imported))
            else:
                lazy.add((importer, imported))
    return {"files": sum(1 for m in graph.modules if _module_file(m, package)),
            "floors": len(set(table.values())), "arrows": len(top_level),
            "arrows_inside_functions": len(lazy),
            "importers_inside_functions": sorted({importer for importer, _ in lazy})}


def _module_file(module: str, package: str) -> Optional[str]:
    base = os.path.join(os.path.dirname(package), *module.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.exists(path):
            return path
    return None


def _function_lines(path: str) -> set:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


# ---------------------------------------------------------------------------- tracing
@dataclasses.dataclass(frozen=True)
class Call:
    file: str              # relative to the package
    function: str          # qualified name
    caller: Optional[str]  # file of the nearest calling frame in the package


class CallRecorder:
    """Records every call into a function of the package while active (sys.settrace, this
    thread), each with its phase: "run", or with `step_entry` (file, qualified name)
    "set-up" until the first call of that function, "step" while that first call runs and
    "after" once it has returned."""

    def __init__(self, step_entry: Optional[Tuple[str, str]] = None, package: str = PACKAGE):
        self.prefix = os.path.abspath(package) + os.sep
        self.step_entry = step_entry
        self.phase = "set-up" if step_entry else "run"
        self.calls: List[Tuple[str, Call]] = []
        self._step_frame = None
        self._codes: Dict[object, Optional[Tuple[str, str]]] = {}

    def _ours(self, frame) -> Optional[Tuple[str, str]]:
        """(file, qualified name) of a frame running a function of the package, else None.
        Comprehensions and generator expressions are part of their function. AutoGraph
        (what tf.function runs) calls a converted copy of a function, `tf__NAME` inside
        factory functions, from a generated file but in the original module's globals: it
        is mapped back to the original; its factories and the bodies it makes of `if` and
        loop statements are part of the function."""
        code = frame.f_code
        known = self._codes.get(code, False)
        if known is False:
            known, path, name = None, code.co_filename, code.co_qualname
            if "__autograph_generated_file" in path:
                path = frame.f_globals.get("__file__") or ""
                last = name.rsplit(".", 1)[-1]
                name = (_original_qualname(path, last[len("tf__"):])
                        if last.startswith("tf__") else "<")
            if path.startswith(self.prefix) and not name.rsplit(".", 1)[-1].startswith("<"):
                known = (path[len(self.prefix):].replace(os.sep, "/"), name)
            self._codes[code] = known
        return known

    # sys.settrace, not sys.setprofile: the tracer sees Python calls only (setprofile also
    # reported every call into C, most of a traced step's events), and follows no frame's
    # lines but the step's, for its return.
    def _trace(self, frame, event, arg):
        ours = self._ours(frame)
        if ours is None or _importing(frame):
            return None
        if self.phase == "set-up" and ours == self.step_entry:
            self.phase, self._step_frame = "step", frame
        caller = frame.f_back
        while caller is not None and self._ours(caller) is None:
            caller = caller.f_back
        self.calls.append((self.phase, Call(ours[0], ours[1],
                                            self._ours(caller)[0] if caller else None)))
        return self._step_return if frame is self._step_frame else None

    def _step_return(self, frame, event, arg):
        if event == "return" and frame is self._step_frame:
            self.phase, self._step_frame = "after", None
        return self._step_return

    def phase_calls(self, phase: str) -> List[Call]:
        return [call for p, call in self.calls if p == phase]

    def __enter__(self):
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc):
        sys.settrace(None)
        return False


def _importing(frame) -> bool:
    """Whether the import system runs this frame (a finder, or a module's body during an
    import): importing is not part of a walk."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


_QUALNAMES: Dict[str, Dict[str, List[str]]] = {}


def _original_qualname(path: str, name: str) -> str:
    """The qualified name of the function `name` of a source file (Class.method), when the
    file defines one function of that name; else `name`."""
    if path not in _QUALNAMES:
        table: Dict[str, List[str]] = {}

        def visit(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    table.setdefault(child.name, []).append(prefix + child.name)
                    visit(child, f"{prefix}{child.name}.<locals>.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")

        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                visit(ast.parse(f.read(), path), "")
        _QUALNAMES[path] = table
    found = _QUALNAMES[path].get(name, [])
    return found[0] if len(found) == 1 else name


def walk_of(calls: Sequence[Call]) -> List[Call]:
    """Distinct functions in the order they are first called."""
    seen, walk = set(), []
    for call in calls:
        if (call.file, call.function) not in seen:
            seen.add((call.file, call.function))
            walk.append(call)
    return walk


def walk_figures(calls: Sequence[Call], table: Dict[str, int]) -> dict:
    """The figures of a traced walk (module docstring)."""
    walk = walk_of(calls)
    climbs, returns, visited, last = 0, 0, set(), None
    for call in walk:
        if last is not None:
            here, before = floor_of(call.file, table), floor_of(last.file, table)
            climbs += here is not None and before is not None and here > before
            returns += call.file != last.file and call.file in visited
        visited.add(call.file)
        last = call
    calls_up = sum(1 for c in calls if c.caller is not None
                   and (floor_of(c.file, table) or 0) > (floor_of(c.caller, table) or 99))
    return {"calls": len(calls), "stops": len(walk), "files": len(visited), "climbs": climbs,
            "returns": returns, "calls_up": calls_up,
            "file_list": sorted(visited), "walk": [f"{c.file}:{c.function}" for c in walk]}


# ---------------------------------------------------------------------------- traced runs
def use_checkout(root: str) -> None:
    """Imports of xlnet_tf2 come from `root` (a checkout): another one's figures are
    measured by this version of the tool."""
    package = os.path.join(os.path.realpath(root), "xlnet_tf2")
    loaded = sys.modules.get("xlnet_tf2")
    if loaded is not None:
        if os.path.dirname(os.path.realpath(loaded.__file__)) != package:
            raise RuntimeError(f"xlnet_tf2 is already imported from {loaded.__file__}, not "
                               f"from {package}: measure {root} in a process of its own.")
        return
    sys.path.insert(0, os.path.abspath(root))


def from_pretrained_walks(table: Dict[str, int], package: str = PACKAGE) -> Dict[str, dict]:
    """`xlnet_tf2.from_pretrained(name_or_dir)` on a tiny directory of each format, traced.
    Through the package's public names (`from_pretrained`, the model's `save_pretrained`), so
    that the same walk measures a tree before and after a restructuring."""
    import xlnet_tf2
    from xlnet_tf2.config import XLNetConfig
    from xlnet_tf2.models import XLNetLMHeadModel

    model = XLNetLMHeadModel(XLNetConfig.preset("tiny", n_token=100))
    model.build()
    entry = xlnet_tf2.from_pretrained  # the package's lazy lookup, before the recording
    walks = {}
    with tempfile.TemporaryDirectory() as scratch:
        for kind, fmt in (("our directory", "xlnet_tf2"),
                          ("HuggingFace directory", "huggingface")):
            directory = os.path.join(scratch, fmt)
            model.save_pretrained(directory, format=fmt)
            with CallRecorder(package=package) as recorder:
                entry(directory)
            walks[kind] = walk_figures(recorder.phase_calls("run"), table)
    return walks


def _tiny_pretraining_data(workdir: str) -> str:
    """A prepared data directory of a small stdlib-docstring corpus (seq_len 16, 2 streams,
    bi_data; not traced)."""
    from xlnet_tf2.data.params import DataParams
    from xlnet_tf2.prep.beam_pipeline import create_tfrecords
    from xlnet_tf2.prep.docstring_corpus import build_stdlib_corpus
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import train_sentencepiece

    corpus = os.path.join(workdir, "corpus.txt")
    build_stdlib_corpus(corpus, min_bytes=50_000, max_bytes=100_000)
    spm = train_sentencepiece([corpus], vocab_size=300,
                              model_prefix=os.path.join(workdir, "spiece"))
    data = os.path.join(workdir, "data")
    create_tfrecords(params=DataParams(seq_len=16, reuse_len=8, num_predict=3, perm_size=8,
                                       bi_data=True, num_streams=2, num_passes=1),
                     output_dir=data, spm_model=spm, input_patterns=[corpus],
                     beam_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"])
    return data


def pretraining_walks(table: Dict[str, int], package: str = PACKAGE,
                      step_entry: Tuple[str, str] = STEP_ENTRY) -> Dict[str, dict]:
    """One step of `xlnet-pretrain` on a tiny model, traced from the command's `run`:
    {"set-up": figures, "step": figures}."""
    from absl import flags

    from xlnet_tf2.commands import run_pretrain

    with tempfile.TemporaryDirectory() as workdir:
        data = _tiny_pretraining_data(workdir)
        argv = ["xlnet-pretrain", f"--data_dir={data}", f"--model_dir={workdir}/model",
                "--model_config=tiny", "--train_batch_size=4", "--mem_len=8",
                "--train_steps=1", "--steps_per_loop=1", "--log_steps=1", "--warmup_steps=0",
                "--save_steps=1", "--peak_tflops=1"]
        flags.FLAGS(argv)
        try:
            with CallRecorder(step_entry, package=package) as recorder:
                run_pretrain.run(argv[:1])
        finally:
            flags.FLAGS.unparse_flags()
    if not recorder.phase_calls("step"):
        raise RuntimeError(f"the pretraining run never called {step_entry[0]}:"
                           f"{step_entry[1]}; update STEP_ENTRY in {__file__}.")
    return {phase: walk_figures(recorder.phase_calls(phase), table)
            for phase in ("set-up", "step")}


def _tiny_step_trainer(model_dir: str):
    """A tiny pretraining Trainer (dropout, memory, bi_data, a jit-compiled step) on the
    synthetic pipeline (benchmarks/tools/synthetic_data.py)."""
    from benchmarks.tools.synthetic_data import SyntheticPretrainData
    from xlnet_tf2.config import XLNetConfig
    from xlnet_tf2.data.pretrain_dataset import DataShape
    from xlnet_tf2.tasks.pretraining import PretrainTask
    from xlnet_tf2.tasks.pretraining_config import PretrainConfig
    from xlnet_tf2.training.trainer import Trainer

    config = PretrainConfig.flat(model_dir=model_dir, data_dir=("synthetic",),
                                 model_config="tiny", train_batch_size=4, train_steps=1,
                                 mem_len=8, warmup_steps=0, jit_compile=True, peak_tflops=1.0)
    data = SyntheticPretrainData(DataShape(seq_len=16, reuse_len=8, num_predict=4,
                                           bi_data=True), vocab_size=100)
    return Trainer(PretrainTask(config, architecture=XLNetConfig.preset("tiny", n_token=100),
                                data=data))


def _line_count(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return len(f.read().splitlines())


def step_files(table: Dict[str, int], package: str = PACKAGE,
               step_entry: Tuple[str, str] = STEP_ENTRY) -> Dict[str, dict]:
    """The step traced for each of STEP_DEVICES (module docstring, 5): {device: {"files":
    {file: lines}, "total_lines", "files_beyond_cpu", and the walk's figures}}. `step_entry`:
    (file, qualified name) of the step's function (another version's, with --root)."""
    found = {}
    with tempfile.TemporaryDirectory() as scratch:
        trainer = _tiny_step_trainer(os.path.join(scratch, "model"))
        for device in STEP_DEVICES:
            step_fn, args = trainer.first_step(device=device)
            with CallRecorder(step_entry, package=package) as recorder:
                step_fn.get_concrete_function(*args)
            calls = recorder.phase_calls("step")
            if not calls:
                raise RuntimeError(f"tracing the step never called {step_entry[0]}:"
                                   f"{step_entry[1]}; update STEP_ENTRY in {__file__}.")
            figures = walk_figures(calls, table)
            lines = {f: _line_count(os.path.join(package, f)) for f in figures["file_list"]}
            found[device] = {**figures, "files": lines, "total_lines": sum(lines.values())}
    reference = set(found["cpu"]["files"])
    for device, figures in found.items():
        figures["files_beyond_cpu"] = sorted(set(figures["files"]) - reference)
    return found


# ---------------------------------------------------------------------------- report
def measure(root: str = ROOT, static_only: bool = False, step_only: bool = False,
            step_entry: Tuple[str, str] = STEP_ENTRY) -> dict:
    """Every figure of the module docstring for the checkout at `root` (`step_only`: the
    step's files alone; `step_entry`: the step's function there)."""
    use_checkout(root)
    package = os.path.join(os.path.abspath(root), "xlnet_tf2")
    table = floors(os.path.join(root, "pyproject.toml"))
    if step_only:
        return {"root": os.path.abspath(root),
                "step_files": step_files(table, package, step_entry)}
    trees = package_files(package)
    report = {"root": os.path.abspath(root), "concepts": {},
              "import_graph": import_graph(table, package)}
    for name, concept in CONCEPTS.items():
        found = concept_files(trees, concept)
        report["concepts"][name] = {
            "files": len(found), "homes": sum(1 for v in found.values() if v["home"]),
            "defines": concept.defines, "parameters": concept.parameters,
            "list": {path: v["why"] for path, v in sorted(found.items())}}
    if not static_only:
        report["pretraining"] = pretraining_walks(table, package, step_entry)
        report["from_pretrained"] = from_pretrained_walks(table, package)
        report["step_files"] = step_files(table, package, step_entry)
    return report


def format_step_files(found: Dict[str, dict], listing: bool = False) -> List[str]:
    """The step's files table (module docstring, 5); with `listing` each file's lines."""
    lines = ["| step traced for | files | lines | stops | files beyond the cpu's |",
             "|---|---|---|---|---|"]
    for device, f in found.items():
        beyond = ", ".join(f["files_beyond_cpu"]) or "-"
        lines.append(f"| {device} | {len(f['files'])} | {f['total_lines']} | {f['stops']} "
                     f"| {beyond} |")
    if listing:
        for device, f in found.items():
            lines += ["", f"step traced for {device}: {len(f['files'])} files, "
                          f"{f['total_lines']} lines"]
            lines += [f"  {n:5d}  {path}" for path, n in f["files"].items()]
    return lines


def format_report(report: dict, listing: bool = False) -> str:
    if "concepts" not in report:  # --step_files
        return "\n".join(format_step_files(report["step_files"], listing))
    lines = ["| concept | files (define or use) | homes (define) |", "|---|---|---|"]
    for name, c in report["concepts"].items():
        lines.append(f"| {name} | {c['files']} | {c['homes']} |")
    g = report["import_graph"]
    lines += ["", f"Import graph: {g['files']} files, {g['floors']} floors, {g['arrows']} "
                  f"arrows at module level ({g['arrows_inside_functions']} more only inside "
                  "functions)."]
    walks = [(f"pretraining {k}", v) for k, v in report.get("pretraining", {}).items()]
    walks += [(f"from_pretrained, {k}", v) for k, v in report.get("from_pretrained", {}).items()]
    if walks:
        lines += ["", "| walk | calls | stops | files | climbs | returns | calls up |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {name} | {w['calls']} | {w['stops']} | {w['files']} | {w['climbs']} "
                  f"| {w['returns']} | {w['calls_up']} |" for name, w in walks]
    if "step_files" in report:
        lines += [""] + format_step_files(report["step_files"], listing)
    if listing:
        for name, c in report["concepts"].items():
            lines += ["", f"{name} ({CONCEPTS[name].what}): defines {c['defines']!r}; "
                          f"parameters {c['parameters']!r}"]
            lines += [f"  {path}: {', '.join(why)}" for path, why in c["list"].items()]
        for name, w in walks:
            lines += ["", f"{name}: {', '.join(w['file_list'])}"]
            lines += [f"  {stop}" for stop in w["walk"]]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=ROOT,
                        help="The checkout to measure (default: this one), so that two "
                             "versions of the code are measured by the same tool.")
    parser.add_argument("--static", action="store_true",
                        help="Measure the concepts and the import graph only (no traced run).")
    parser.add_argument("--list", action="store_true",
                        help="Also print each concept's files with the identifiers that put "
                             "them there, and each traced walk's files and stops.")
    parser.add_argument("--step_files", action="store_true",
                        help="Measure only the training step's files and lines, traced for "
                             "each device's plan (measure 5; about a minute).")
    parser.add_argument("--step_entry", default=":".join(STEP_ENTRY),
                        help="FILE:FUNCTION, the training step's function (relative to the "
                             "package, its qualified name): another version's, with --root.")
    parser.add_argument("--json", help="Also write the figures and lists to this JSON file.")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.root, "xlnet_tf2", "__init__.py")):
        parser.error(f"--root={args.root} holds no xlnet_tf2/ package: give a checkout.")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    start = time.time()
    step_entry = tuple(args.step_entry.split(":", 1))
    if len(step_entry) != 2:
        parser.error(f"--step_entry={args.step_entry} is not FILE:FUNCTION "
                     f"(e.g. {':'.join(STEP_ENTRY)}).")
    report = measure(args.root, static_only=args.static, step_only=args.step_files,
                     step_entry=step_entry)
    print(format_report(report, listing=args.list))
    if args.json:
        from xlnet_tf2 import fileio
        fileio.write_json_atomically(args.json, report)
    print(f"({time.time() - start:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
