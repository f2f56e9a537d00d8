"""Everything that exists for XLA:CPU alone, each piece with the measurement
that justifies it in its module's docstring (``docs/cpu-notes.md`` lists
them):

* ``flags``: the scheduler flag that guards against a thread-pool deadlock,
  the concurrency-optimised scheduler for the library's populations, one
  CPU device per core;
* ``threefry``: Threefry lowered without a loop;
* ``layers`` and ``kernel_gradients``: initialisation, dense kernel
  gradients and the 3×3 convolution in XLA:CPU's fast forms;
* ``permutation``: an epoch's minibatch order from a one-operand sort;
* ``flat_params``: the optimiser's parameters as one vector.

(The GPU's own tuning, scans packed or unrolled off CPU, is
``ondevice_rl.scans``.)

All but the flat vector are chosen when a program is lowered, so a GPU or
TPU program is the plain one. ``configure_process`` applies the two
process-wide pieces; importing ``ondevice_rl`` calls it.
"""

from ondevice_rl.cpu.flags import ensure_cpu_scheduler_flag
from ondevice_rl.cpu.threefry import use_straight_line_threefry_on_cpu


def configure_process() -> None:
    """Puts the scheduler flag in ``XLA_FLAGS`` (unless the user chose one)
    and registers straight-line Threefry as its CPU lowering (unless
    ``ONDEVICE_RL_ROLLED_THREEFRY=1``).

    The flag only takes effect if this runs before JAX's CPU backend starts
    (the first JAX computation); the lowering applies to every program
    lowered afterwards. Calling it again changes nothing.
    """
    ensure_cpu_scheduler_flag()
    use_straight_line_threefry_on_cpu()
