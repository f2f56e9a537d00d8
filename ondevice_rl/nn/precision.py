"""The precision of every matmul and convolution in a program.

A float32 matmul is not float32 everywhere: on NVIDIA GPUs since Ampere
XLA's default runs it on TF32 tensor cores (10-bit mantissa inputs), and on
TPUs as one bfloat16 pass, so the same program gives other numbers than on
CPU. A learner's config names its precision (``matmul_precision``, static:
it changes the program) and the learner traces all its functions under it
(``at_matmul_precision``), which reaches every ``dot_general`` and
convolution whose own precision is unset: the networks' forward passes,
their gradients (``ondevice_rl.cpu.layers.dense_matmul``'s included), the
recurrent cells.

* ``"highest"`` (the default): float32 on every platform, CPU's numbers to
  rounding;
* ``"high"``: TF32 on GPUs that have it, three bfloat16 passes on TPU;
* ``"default"``: the platform's fastest (TF32 on GPUs that have it, one
  bfloat16 pass on TPU).

On CPU the three compile to the same program.
"""

import functools
from collections.abc import Callable

import jax

#: Names ``jax.default_matmul_precision`` takes, most precise first.
MATMUL_PRECISIONS = ("highest", "high", "default")
DEFAULT_MATMUL_PRECISION = "highest"


def at_matmul_precision(fn: Callable, precision: str) -> Callable:
    """``fn`` traced (or run) with ``precision`` as the default precision of
    every matmul and convolution in it."""
    if precision not in MATMUL_PRECISIONS:
        raise ValueError(
            f"matmul precision must be one of {', '.join(MATMUL_PRECISIONS)}, "
            f"got {precision!r}"
        )

    @functools.wraps(fn)
    def at_precision(*args, **kwargs):
        with jax.default_matmul_precision(precision):
            return fn(*args, **kwargs)

    return at_precision
