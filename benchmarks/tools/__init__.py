"""Benchmark and analysis code that is not the library: workloads for benchmarks/benchmark.py,
data-preparation throughput, the paper-scale cost report, context-free loss baselines, a
synthetic pretraining input and the docstring corpus of the demo, and the settings of their
commands (command_configs.py). Nothing in the library imports this package."""
