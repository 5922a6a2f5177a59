"""Benchmarks: noisy_jax against equivalent PyTorch loops (scripts that print numbers; not tests).

Run one with `python -m experiments.benchmarks.NAME [--quick] [--repeats R]` from the repository root; see
experiments/benchmarks/README.md for what each measures.
"""
