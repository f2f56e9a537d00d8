"""Networks (flax.linen): actor-critic and Q heads over an MLP or CNN torso,
encoders for pytree observations, recurrent cores, the squashed Gaussian of
continuous control, and the matmul precision of a program."""
