"""Devices and hosts: the mesh, multi-process runs, the sharded label table, streamed input, XLA options, host
memory. Imports noisy_jax.core only.
"""
