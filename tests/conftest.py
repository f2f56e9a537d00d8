"""Test setup: force the CPU backend before JAX starts.

``ondevice_rl`` is imported before ``jax`` so that it can set ``XLA_FLAGS``
(the CPU scheduler flag, see ``ondevice_rl/_xla.py``) first.
"""

import os

os.environ["JAX_PLATFORMS"] = "cpu"

import ondevice_rl  # noqa: E402, F401  (sets XLA_FLAGS before jax starts)
