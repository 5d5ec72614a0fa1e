"""The table and the figure of the pretraining payoff experiment (payoff_experiment.py).

`summarize` turns the fine-tuning results into each seed's test accuracy, their mean and
standard deviation (sample sd, n - 1) per task and initialization, and the verdict the issue
asks for: pretraining "clearly beats" random initialization on a task when the gap of the
means exceeds twice the larger of the two standard deviations. With one seed on either side
there is no spread to compare the gap with, so the verdict is "cannot tell". `write_report`
writes results.md and payoff.png (matplotlib, Agg backend: no display needed).
"""

from __future__ import annotations

import os
import statistics
from typing import Dict, List

INIT_NAMES = {"permutation": "permutation-pretrained", "left_to_right": "left-to-right-pretrained",
              "random": "random initialization"}


def unigram_baseline(data_dir: str, eval_dir: str, global_batch_size: int, steps: int) -> dict:
    """The held-out cross-entropy under the training targets' unigram distribution (the loss
    of a model that ignores context), over the batches the pretraining runs read."""
    from benchmarks.tools.baselines import held_out_unigram_baseline
    return held_out_unigram_baseline([data_dir], [eval_dir], global_batch_size=global_batch_size,
                                     max_steps=min(steps, 2000))


def _mean_sd(values: List[float]) -> tuple:
    """(mean, sample sd); the sd is None for a single value (one run has no spread)."""
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else None
    return mean, sd


def summarize(finetuning: List[dict]) -> Dict[str, Dict[str, dict]]:
    """{task: {init: {"mean", "sd", "n", "accuracies", "seeds"}}} (accuracies[i] is seeds[i]'s,
    in the order of the results; sd None with one seed) and, per pretrained init, "gap" (mean
    - random's mean) and "clear": gap > 2 * max(sd, random's sd), or None when either side
    has a single seed (no spread: cannot tell)."""
    table: Dict[str, Dict[str, dict]] = {}
    for r in finetuning:
        row = table.setdefault(r["task"], {}).setdefault(r["init"],
                                                         {"accuracies": [], "seeds": []})
        row["accuracies"].append(r["test_accuracy"])
        row["seeds"].append(r.get("seed"))
    for task, inits in table.items():
        for init, row in inits.items():
            row["mean"], row["sd"] = _mean_sd(row["accuracies"])
            row["n"] = len(row["accuracies"])
        random = inits.get("random")
        for init, row in inits.items():
            if random is not None and init != "random":
                row["gap"] = row["mean"] - random["mean"]
                if row["sd"] is None or random["sd"] is None:
                    row["clear"] = None
                else:
                    row["clear"] = bool(row["gap"] > 2 * max(row["sd"], random["sd"]))
    return table


def _spread_text(row: dict) -> str:
    """The mean +- sd cell; with one seed, the one figure and no sd."""
    if row["sd"] is None:
        return f"{row['mean']:.4f} (one seed: no sd)"
    return f"{row['mean']:.4f} +- {row['sd']:.4f}"


def _seeds_text(row: dict) -> str:
    """Every seed's figure, named by its seed: "s1 0.7512, s2 0.7375"."""
    return ", ".join(f"s{seed} {a:.4f}" if seed is not None else f"{a:.4f}"
                     for seed, a in zip(row["seeds"], row["accuracies"]))


def _verdict_text(row: dict) -> str:
    if "clear" not in row:
        return ""
    if row["clear"] is None:
        return "cannot tell (one seed: no spread)"
    return "yes" if row["clear"] else "no"


def _load_text(value) -> str:
    """A load average as the table prints it; None where /proc/loadavg is missing."""
    return "n/a" if value is None else f"{value:.2f}"


def markdown_table(report: dict) -> str:
    table = summarize(report["finetuning"])
    lines = ["| task | initialization | test accuracy, mean +- sd | each seed | gap to random "
             "| clearly better (gap > 2 sd) |", "|---|---|---|---|---|---|"]
    for task, inits in table.items():
        for init in sorted(inits, key=list(INIT_NAMES).index):
            row = inits[init]
            gap = f"{row['gap']:+.4f}" if "gap" in row else ""
            lines.append(f"| {task} | {INIT_NAMES[init]} | {_spread_text(row)} "
                         f"| {_seeds_text(row)} | {gap} | {_verdict_text(row)} |")
    lines.append("")
    base = report.get("heldout_baseline", {}).get("heldout_cross_entropy")
    lines.append("| pretraining run | held-out loss (own objective), first -> last evaluation "
                 "| below the unigram baseline | wall time |")
    lines.append("|---|---|---|---|")
    for order, run in report["pretraining"].items():
        heldout = run["heldout"]
        if not heldout:
            continue
        below = f"{base - heldout[-1]['loss']:.3f} nats" if base is not None else ""
        lines.append(f"| {order} | {heldout[0]['loss']:.3f} (step {heldout[0]['step']}) -> "
                     f"{heldout[-1]['loss']:.3f} (step {heldout[-1]['step']}) | {below} "
                     f"| {run['seconds'] / 60:.1f} min |")
    if base is not None:
        lines.append("")
        lines.append(f"Held-out unigram baseline (context ignored): {base:.3f} nats.")
    lines.append("")
    lines.append("| stage | wall time | load average (start, end) |")
    lines.append("|---|---|---|")
    for stage, t in report["timings"].items():
        lines.append(f"| {stage} | {t['seconds'] / 60:.1f} min | {_load_text(t['load_start'])}, "
                     f"{_load_text(t['load_end'])} |")
    return "\n".join(lines) + "\n"


def plot(report: dict, path: str) -> None:
    """Left: held-out (and smoothed training) loss of each pretraining run against steps.
    Right: test accuracy per task and initialization, bars at the mean, sd whiskers, one dot
    per seed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"permutation": "tab:blue", "left_to_right": "tab:orange", "random": "tab:gray"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for order, run in report["pretraining"].items():
        if run["train_loss"]:
            left.plot([p["step"] for p in run["train_loss"]],
                      [p["loss"] for p in run["train_loss"]],
                      color=colors[order], alpha=0.35, linewidth=1)
        left.plot([p["step"] for p in run["heldout"]], [p["loss"] for p in run["heldout"]],
                  color=colors[order], marker="o", markersize=3,
                  label=f"{order}: held-out (faint: training)")
    base = report.get("heldout_baseline", {}).get("heldout_cross_entropy")
    if base is not None:
        left.axhline(base, color="black", linestyle="--", linewidth=1,
                     label="held-out unigram baseline")
    left.set_xlabel("pretraining step")
    left.set_ylabel("loss on targets (nats)")
    left.set_title("Pretraining (each run's own objective)")
    left.legend(fontsize=8)

    table = summarize(report["finetuning"])
    tasks = list(table)
    inits = [i for i in INIT_NAMES if any(i in table[t] for t in tasks)]
    width = 0.8 / max(len(inits), 1)
    for k, init in enumerate(inits):
        for j, task in enumerate(tasks):
            row = table[task].get(init)
            if row is None:
                continue
            x = j + (k - (len(inits) - 1) / 2) * width
            right.bar(x, row["mean"], width * 0.9, yerr=row["sd"], capsize=3,
                      color=colors[init], label=INIT_NAMES[init] if j == 0 else None)
            right.scatter([x] * row["n"], row["accuracies"], color="black", s=8, zorder=3)
    right.set_xticks(range(len(tasks)))
    right.set_xticklabels(tasks)
    right.set_ylabel("test accuracy")
    low = min(a for t in tasks for r in table[t].values() for a in r["accuracies"])
    right.set_ylim(max(0.0, low - 0.1), 1.0)
    right.set_title("Fine-tuning (mean +- sd over seeds; dots: seeds)")
    right.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(workdir: str, report: dict) -> None:
    with open(os.path.join(workdir, "results.md"), "w", encoding="utf-8") as f:
        f.write(markdown_table(report))
    plot(report, os.path.join(workdir, "payoff.png"))
