"""A whole experiment: one run (`runs.run_single`), comparisons and sweeps, reporting, the exported model, the
environment record. The top layer: it may import every other.
"""
