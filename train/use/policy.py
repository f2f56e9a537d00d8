"""One policy for every learner, and what a trained run leaves to use.

* ``make_policy(trainer) -> policy(params, obs, key, deterministic) ->
  env_action``: generic over the registry, decided by what the trainer's
  network returns (``jax.eval_shape``), never by the algorithm's name. An
  actor-critic's ``PolicyOutput`` acts by the argmax of its logits or its
  Gaussian mean (deterministic) or a sample; a Q-network's action values
  ``[..., A]`` by their argmax or ε-greedily with the config's ``eps_end``
  (greedy if it has none). Box actions are clipped to the space. ``params``
  are the network's, or ``policy_params(train_state)``: those plus the
  state's observation statistics (``normalizer``), when the learner keeps
  them, applied to ``obs`` first.
* ``load_run(run_dir)``: the stored ``RunSpec``, the trainer and the latest
  checkpoint's parameters.
* ``load_policy(run_dir) -> Policy``: ``policy(obs, key=None) -> action``,
  jit-compiled, for one observation ``[*obs_shape]`` or a batch ``[B,
  *obs_shape]`` (also ``ondevice_rl.load_policy``).
* ``run_in_gymnasium(policy, env_id)``: the loaded policy in the original
  gymnasium env, on the host, to check policy and port against the real thing.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.networks import PolicyOutput, sample_action
from ondevice_rl.train.kit.env_setup import make_env
from ondevice_rl.train.kit.exploration import epsilon_greedy

#: ``policy(params, obs [..., *obs_shape], key, deterministic) -> env_action``
#: (``[...]`` int32 for discrete spaces, ``[..., A]`` float32 for Box ones).
PolicyFn = Callable[[Any, jax.Array, jax.Array, bool], jax.Array]


class PolicyParams(NamedTuple):
    """What acting needs of a train state."""

    network: Any  # the network's parameters
    normalizer: Any = None  # the state's ``normalizer`` (obs statistics), if any


def policy_params(state: Any) -> PolicyParams:
    """``PolicyParams`` of a learner's train state (``state.params`` and, if
    it has one, ``state.normalizer``)."""
    return PolicyParams(state.params, getattr(state, "normalizer", None))


def _network_input(params: Any, obs: jax.Array) -> tuple[Any, jax.Array]:
    """``(network params, obs as the network sees it)``."""
    if not isinstance(params, PolicyParams):
        return params, obs
    if params.normalizer is not None:
        from ondevice_rl.normalize import normalize_obs

        obs = normalize_obs(params.normalizer, obs)
    return params.network, obs


def make_policy(trainer: Any, epsilon: float | None = None) -> PolicyFn:
    """The acting function of ``trainer``'s network (any registered learner).

    ``deterministic`` must be a Python bool. ``epsilon`` (Q-networks only,
    stochastic acting) defaults to ``trainer.config.eps_end`` or 0.
    """
    setup = make_env(trainer.config.env)
    network = trainer.network
    obs = jax.ShapeDtypeStruct(setup.obs_shape, jnp.float32)
    params = jax.eval_shape(network.init, jax.random.key(0), obs)
    out = jax.eval_shape(network.apply, params, obs)
    if isinstance(out, PolicyOutput):

        def actor_critic(params, obs, key, deterministic):
            pi = network.apply(*_network_input(params, obs))
            if not deterministic:
                action = sample_action(key, pi)
            elif pi.log_std is None:
                action = jnp.argmax(pi.logits_or_mean, axis=-1).astype(jnp.int32)
            else:
                action = pi.logits_or_mean
            return setup.to_env_action(action)

        return actor_critic
    if not isinstance(out, jax.ShapeDtypeStruct) or out.shape != (setup.action_dim,):
        raise TypeError(
            f"{type(network).__name__} returns {out}, neither a PolicyOutput nor "
            f"action values [..., {setup.action_dim}]"
        )
    if epsilon is None:
        epsilon = float(getattr(trainer.config, "eps_end", 0.0))

    def q_values(params, obs, key, deterministic):
        q = network.apply(*_network_input(params, obs))
        if deterministic or epsilon == 0.0:
            return jnp.argmax(q, axis=-1).astype(jnp.int32)
        return epsilon_greedy(key, q, epsilon)

    return q_values


class LoadedRun(NamedTuple):
    spec: Any  # RunSpec from config.json
    trainer: Any  # make_trainer(config), hyperparameters applied to the config
    params: PolicyParams  # of the latest checkpoint's train state
    step: int  # that checkpoint's update


def _like(trainer: Any, spec: Any) -> Any:
    """The train state's structure for a restore: shapes (ShapeDtypeStruct),
    real typed keys."""
    key = jax.random.key(spec.seed)
    shapes = jax.eval_shape(trainer.init, key, spec.hyperparams, spec.env_params_tree())
    data_shape = jax.random.key_data(key).shape

    def leaf(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            data = jnp.zeros((*x.shape, *data_shape), jnp.uint32)
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(key))
        return x

    return jax.tree.map(leaf, shapes)


def load_spec(run_dir: str | Path) -> Any:
    """The ``RunSpec`` in ``run_dir``'s ``config.json`` (ValueError, one line,
    for a missing directory or one that is not a run)."""
    from ondevice_rl.train.run import artifacts
    from ondevice_rl.train.run.run_spec import RunSpec

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir}: no such run directory")
    if not (run_dir / artifacts.CONFIG_FILE).is_file():
        raise ValueError(f"{run_dir}: not a run directory (no {artifacts.CONFIG_FILE})")
    return RunSpec.load(run_dir / artifacts.CONFIG_FILE)


def load_run(run_dir: str | Path) -> LoadedRun:
    """Reads ``run_dir``'s ``config.json`` and restores its latest checkpoint.

    Raises:
        ValueError: one line, for a missing directory, a directory that is not
            a run, or a run without a checkpoint.
    """
    from ondevice_rl.checkpoint import Checkpoints
    from ondevice_rl.train.kit.registry import algorithm_of, trainer_for
    from ondevice_rl.train.run import artifacts

    run_dir = Path(run_dir)
    spec = load_spec(run_dir)
    checkpoint_dir = run_dir / artifacts.CHECKPOINT_DIR
    step = None
    if checkpoint_dir.is_dir():
        with Checkpoints(checkpoint_dir) as checkpoints:
            step = checkpoints.latest()
    if step is None:
        raise ValueError(f"{run_dir}: no checkpoint yet (train it first)")
    hp = {k: float(v) for k, v in spec.hyperparams._asdict().items()}
    config = spec.config.replace(**hp)
    trainer = trainer_for(config)
    # Only what acting needs: no replay buffer or optimiser state is read.
    like = policy_params(_like(trainer, spec))._asdict()
    like = {"params": like["network"], "normalizer": like["normalizer"]}
    if not jax.tree.leaves(like["normalizer"]):
        del like["normalizer"]  # none, or kept but switched off
    try:
        with Checkpoints(checkpoint_dir) as checkpoints:
            state = checkpoints.restore_fields(step, like)
    except (ValueError, KeyError, FileNotFoundError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        raise ValueError(
            f"{run_dir}: cannot read checkpoint {step} as this version's "
            f"{algorithm_of(config).name} state ({first})"
        ) from None
    params = PolicyParams(state["params"], state.get("normalizer"))
    return LoadedRun(spec, trainer, params, int(step))


class Policy:
    """A trained policy: ``policy(obs, key=None) -> action``.

    ``obs``: ``[*obs_shape]`` or ``[B, *obs_shape]``; the action is ``[]`` /
    ``[B]`` int32 (discrete) or ``[A]`` / ``[B, A]`` float32 (Box, clipped).
    Deterministic when ``key`` is None, sampled from the policy otherwise.
    Both paths are jit-compiled (once per batch shape).

    Attributes: ``params`` (``PolicyParams``: the network's and any
    observation statistics), ``config``, ``env`` (its name), ``obs_shape``,
    ``step`` (the checkpoint's update), ``run`` (the ``LoadedRun``).
    """

    def __init__(self, run: LoadedRun):
        self.run = run
        self.params = run.params
        self.config = run.spec.config
        self.env = self.config.env
        self.step = run.step
        self.obs_shape = make_env(self.env).obs_shape
        act = make_policy(run.trainer)
        self._greedy = jax.jit(lambda p, obs: act(p, obs, None, True))
        self._sample = jax.jit(lambda p, obs, key: act(p, obs, key, False))

    def __call__(self, obs: Any, key: jax.Array | None = None) -> jax.Array:
        obs = jnp.asarray(obs, jnp.float32)
        rank = len(self.obs_shape)
        if obs.ndim not in (rank, rank + 1) or obs.shape[obs.ndim - rank :] != tuple(
            self.obs_shape
        ):
            raise ValueError(
                f"observation of shape {obs.shape}; expected {self.obs_shape} or "
                f"[B, {', '.join(map(str, self.obs_shape))}]"
            )
        if key is None:
            return self._greedy(self.params, obs)
        return self._sample(self.params, obs, key)

    def __repr__(self) -> str:
        return f"Policy({self.env!r}, update {self.step})"


def load_policy(run_dir: str | Path) -> Policy:
    """The policy of ``run_dir``'s latest checkpoint (see ``Policy``)."""
    return Policy(load_run(run_dir))


def run_in_gymnasium(
    policy: Callable,
    env_id: str,
    episodes: int = 10,
    seed: int = 0,
    deterministic: bool = True,
) -> list[float]:
    """Runs ``policy(obs, key=None)`` in ``gymnasium.make(env_id)`` on the
    host for ``episodes`` episodes (reset seeds ``seed, seed + 1, ...``);
    returns their returns. Sampled actions (``deterministic=False``) use keys
    from ``jax.random.key(seed)``."""
    import gymnasium as gym

    env = gym.make(env_id)
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    key = jax.random.key(seed)
    returns = []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            total, done, t = 0.0, False, 0
            while not done:
                step_key = None
                if not deterministic:
                    step_key = jax.random.fold_in(jax.random.fold_in(key, episode), t)
                action = np.asarray(policy(obs, step_key))
                action = int(action) if discrete else action.astype(np.float32)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done, t = terminated or truncated, t + 1
            returns.append(total)
    finally:
        env.close()
    return returns
