"""The parameters raveled into one vector for the optimiser.

A learner's update phase steps on the parameters as one ``[P]`` vector and
its optimiser state is over that vector: gradient clipping and Adam then run
as 3 kernels instead of ~50 (several per leaf), which took a 1-seed CartPole
PPO run on XLA:CPU from 3.19 s to 2.79 s (≈12% of a minibatch step); the
network unravels the vector, which costs a few slices.

The one CPU piece every platform runs: the optimiser state, kept in the
train state and its checkpoints, is over this vector, and a program's inputs
cannot change with the platform it is lowered for. Off CPU it is the same
arithmetic in fewer, larger kernels.
"""

from collections.abc import Callable
from typing import Any

import jax
from jax.flatten_util import ravel_pytree


def ravel_params(params: Any) -> tuple[jax.Array, Callable[[jax.Array], Any]]:
    """``(flat [P], unravel)``: every leaf of ``params`` in one vector, and
    the function that rebuilds the tree from such a vector."""
    return ravel_pytree(params)


def flat_apply(network: Any, params: Any) -> tuple[jax.Array, Callable, Callable]:
    """``(flat [P], unravel, apply_fn)`` with ``apply_fn(flat, obs)`` the
    network applied to the unraveled vector."""
    flat, unravel = ravel_params(params)

    def apply_fn(flat_params, obs):
        return network.apply(unravel(flat_params), obs)

    return flat, unravel, apply_fn
