"""What a trained run leaves to use: its parameters and its policy.

* ``load_run(run_dir)``: the stored ``RunSpec``, the trainer and the newest
  verified checkpoint's ``PolicyParams`` (network parameters and obs
  statistics); a newer damaged checkpoint is named in one line and skipped.
* ``load_member(sweep_dir, member)``: the same for a sweep member's final
  parameters (``member``: its number or ``"best"``).
* ``load_policy(run_dir, member=None) -> Policy``: ``policy(obs, key=None)
  -> action``, jit-compiled, for one observation ``[*obs_shape]`` or a batch
  ``[B, *obs_shape]`` (also ``ondevice_rl.load_policy``), acting with the
  trainer's ``policy`` (``train/kit/policies.py``).
* ``run_in_gymnasium(policy, env_id)``: the loaded policy in the original
  gymnasium env, on the host, to check policy and port against the real thing.
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ondevice_rl.train.kit.state import PolicyParams, policy_params


class LoadedRun(NamedTuple):
    spec: Any  # RunSpec from config.json
    trainer: Any  # make_trainer(config), hyperparameters applied to the config
    params: PolicyParams  # of the latest checkpoint's train state
    step: int  # that checkpoint's update
    member: int | None = None  # a sweep member's number (None: a run)


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


def load_spec(run_dir: str | Path, member: int | str | None = None) -> Any:
    """The ``RunSpec`` in ``run_dir``'s ``config.json``, or a sweep member's
    (ValueError, one line, for a missing directory or one that is not a
    run)."""
    from ondevice_rl.train.run import artifacts
    from ondevice_rl.train.run.run_spec import RunSpec

    run_dir = Path(run_dir)
    if member is not None or is_sweep_dir(run_dir):
        return load_member(run_dir, member).spec
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir}: no such run directory")
    if not (run_dir / artifacts.CONFIG_FILE).is_file():
        raise ValueError(f"{run_dir}: not a run directory (no {artifacts.CONFIG_FILE})")
    return RunSpec.load(run_dir / artifacts.CONFIG_FILE)


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def is_sweep_dir(path: str | Path) -> bool:
    """Whether ``path`` is a sweep's directory (it holds ``sweep.json``, or
    the members' parameters a sweep from Python wrote)."""
    from ondevice_rl.train.sweep.member_files import PARAMS_GLOB
    from ondevice_rl.train.sweep.store import MEMBERS_DIR, SPEC_FILE

    path = Path(path)
    return (path / SPEC_FILE).is_file() or any((path / MEMBERS_DIR).glob(PARAMS_GLOB))


def load_run(
    run_dir: str | Path,
    notify: Callable[[str], None] | None = None,
    member: int | str | None = None,
) -> LoadedRun:
    """Reads ``run_dir``'s ``config.json`` and restores its newest checkpoint
    that verifies; newer ones that do not are named, with why, in one line
    passed to ``notify`` (default: printed to stderr). Nothing is moved or
    written. For a sweep's directory, ``member`` picks whose final
    parameters: its index, or ``"best"`` (see ``load_member``).

    Raises:
        ValueError: one line, for a missing directory, a directory that is not
            a run, a damaged ``config.json``, a run without a checkpoint, or
            checkpoints none of which verifies or fits the stored config.
    """
    from ondevice_rl.checkpoint import CheckpointMismatch, Checkpoints, describe_skipped
    from ondevice_rl.train.kit.registry import algorithm_of, trainer_for
    from ondevice_rl.train.run import artifacts

    run_dir = Path(run_dir)
    if member is not None or is_sweep_dir(run_dir):
        return load_member(run_dir, member)
    spec = load_spec(run_dir)
    checkpoints = Checkpoints(run_dir / artifacts.CHECKPOINT_DIR)
    step, skipped = checkpoints.usable()
    if step is None:
        raise ValueError(f"{run_dir}: no checkpoint yet (train it first)")
    if skipped:
        (notify or _to_stderr)(
            f"{run_dir}: skipped {describe_skipped(skipped)}; using checkpoint {step}"
        )
    hp = {k: float(v) for k, v in spec.hyperparams._asdict().items()}
    config = spec.config.replace(**hp)
    trainer = trainer_for(config)
    # Only what acting needs: no replay buffer or optimiser state is read.
    like = policy_params(_like(trainer, spec))._asdict()
    like = {"params": like["network"], "normalizer": like["normalizer"]}
    if not jax.tree.leaves(like["normalizer"]):
        del like["normalizer"]  # none, or kept but switched off
    try:
        state = checkpoints.restore_fields(step, like)
    except CheckpointMismatch as e:
        raise ValueError(
            f"{run_dir}: {e} as {artifacts.CONFIG_FILE} describes it "
            f"({algorithm_of(config).name}); was the file edited?"
        ) from None
    except (ValueError, KeyError, FileNotFoundError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        raise ValueError(
            f"{run_dir}: cannot read checkpoint {step} as this version's "
            f"{algorithm_of(config).name} state ({first})"
        ) from None
    params = PolicyParams(state["params"], state.get("normalizer"))
    return LoadedRun(spec, trainer, params, int(step))


def _member_index(sweep_dir: Path, member: int | str | None) -> int:
    """``member`` as an index: a number, or ``"best"`` (``summary.json``'s
    ``best_member``)."""
    from ondevice_rl.train.run import artifacts

    if member is None:
        raise ValueError(
            f"{sweep_dir} is a sweep: choose a member (its number, or 'best')"
        )
    if isinstance(member, str) and member.strip().isdigit():
        member = int(member)
    if isinstance(member, int) and not isinstance(member, bool) and member >= 0:
        return member
    if member != "best":
        raise ValueError(f"member must be a member's number or 'best', got {member!r}")
    summary = sweep_dir / "summary.json"
    if not summary.is_file():
        raise ValueError(f"{sweep_dir}: no summary.json yet to say which is best")
    best = artifacts.read_json(summary).get("best_member")
    if isinstance(best, bool) or not isinstance(best, int):
        raise ValueError(f"{summary}: no best member recorded (none finished finite)")
    return best


def load_member(sweep_dir: str | Path, member: int | str | None) -> LoadedRun:
    """A sweep member's final parameters (``members/params-*.npz``) as a
    ``LoadedRun``: its stored run spec, checked as ``config.json`` is, and
    every array checked against the shapes that spec gives. ``member``: its
    index (``sweep.csv``'s ``member``) or ``"best"``. ValueError (one line)
    otherwise."""
    from ondevice_rl.train.kit.registry import trainer_for
    from ondevice_rl.train.run.run_spec import RunSpec
    from ondevice_rl.train.sweep import member_files
    from ondevice_rl.train.sweep.store import MEMBERS_DIR

    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise ValueError(f"{sweep_dir}: no such sweep directory")
    if not is_sweep_dir(sweep_dir):
        raise ValueError(
            f"{sweep_dir}: not a sweep directory (no sweep.json, no members' "
            "parameters)"
        )
    index = _member_index(sweep_dir, member)
    folder = sweep_dir / MEMBERS_DIR
    info, arrays = member_files.read_member(folder, index)
    where = f"{folder} (member {index})"
    spec = RunSpec.from_json(info, where)
    hp = {k: float(v) for k, v in spec.hyperparams._asdict().items()}
    trainer = trainer_for(spec.config.replace(**hp))
    like = policy_params(_like(trainer, spec))
    leaves, treedef = jax.tree_util.tree_flatten_with_path(like)
    values = []
    for path, want in leaves:
        name = member_files.leaf_name(path)
        got = arrays.get(name)
        if got is None or (got.shape, got.dtype) != (want.shape, want.dtype):
            held = "nothing" if got is None else f"{list(got.shape)} {got.dtype}"
            raise ValueError(
                f"{where}: holds {held} as {name}, not {list(want.shape)} "
                f"{want.dtype}; was it written by another version?"
            )
        values.append(jnp.asarray(got))
    params = jax.tree_util.tree_unflatten(treedef, values)
    return LoadedRun(spec, trainer, params, spec.config.num_updates, index)


class Policy:
    """A trained policy: ``policy(obs, key=None, mask=None) -> action``.

    ``obs``: ``[*obs_shape]`` or ``[B, *obs_shape]`` (a pytree observation:
    the same leaves, each with the same batch); the action is ``[]`` /
    ``[B]`` int32 (discrete) or ``[A]`` / ``[B, A]`` float32 (Box, clipped).
    Deterministic when ``key`` is None, sampled from the policy otherwise.
    ``mask`` ``[A]`` / ``[B, A]`` bool: the legal discrete actions (an
    observation's own action mask is honoured too). Jit-compiled (once per
    batch shape). A policy with memory keeps its carry between calls, one
    episode's worth: call ``reset()`` when a new episode starts (a new batch
    shape starts afresh too).

    Attributes: ``params`` (``PolicyParams``: the network's and any
    observation statistics), ``config``, ``env`` (its name), ``obs_shape``
    (None for a pytree observation), ``obs_spec`` (its leaves' shapes and
    dtypes), ``step`` (the checkpoint's update), ``run`` (the ``LoadedRun``).
    """

    def __init__(self, run: LoadedRun):
        self.run = run
        self.params = run.params
        self.config = run.spec.config
        self.env = self.config.env
        self.step = run.step
        self.obs_shape = run.trainer.setup.obs_shape
        self.obs_spec = run.trainer.setup.obs_spec
        act = run.trainer.policy
        self._initial_carry = run.trainer.initial_carry
        self._carry, self._batch = None, None
        self._greedy = jax.jit(lambda p, c, obs, m: act(p, c, obs, None, True, m))
        self._sample = jax.jit(lambda p, c, obs, key, m: act(p, c, obs, key, False, m))

    def __call__(
        self, obs: Any, key: jax.Array | None = None, mask: Any = None
    ) -> jax.Array:
        obs, batch = self._checked(obs)
        if mask is not None:
            mask = jnp.asarray(mask, jnp.bool_)
        if self._carry is None or self._batch != batch:
            self._carry, self._batch = self._initial_carry(batch), batch
        carry = self._carry
        if key is None:
            action, self._carry = self._greedy(self.params, carry, obs, mask)
        else:
            action, self._carry = self._sample(self.params, carry, obs, key, mask)
        return action

    def _checked(self, obs: Any) -> tuple[Any, tuple[int, ...]]:
        """``obs`` as arrays of the space's dtypes, and its batch shape
        (ValueError, one line, if it does not match the space)."""
        spec_leaves, tree = jax.tree.flatten(self.obs_spec)
        try:
            leaves = tree.flatten_up_to(obs)
        except (ValueError, TypeError):
            raise ValueError(
                f"observation {jax.tree.structure(obs)}; expected {tree}"
            ) from None
        leaves = [
            jnp.asarray(x, s.dtype) for x, s in zip(leaves, spec_leaves, strict=True)
        ]
        batches = set()
        for x, s in zip(leaves, spec_leaves, strict=True):
            rank = len(s.shape)
            if x.ndim not in (rank, rank + 1) or x.shape[x.ndim - rank :] != s.shape:
                raise ValueError(
                    f"observation of shape {x.shape}; expected {s.shape} or "
                    f"[B, {', '.join(map(str, s.shape))}]"
                )
            batches.add(x.shape[: x.ndim - rank])
        if len(batches) > 1:
            raise ValueError(f"observation leaves of different batches {batches}")
        return jax.tree.unflatten(tree, leaves), batches.pop()

    def reset(self) -> None:
        """Forgets the carry: the next call starts a new episode."""
        self._carry = None

    def __repr__(self) -> str:
        return f"Policy({self.env!r}, update {self.step})"


def load_policy(run_dir: str | Path, member: int | str | None = None) -> Policy:
    """The policy of ``run_dir``'s newest checkpoint that verifies, or of a
    sweep directory's ``member`` (its number or ``"best"``) (see ``Policy``,
    ``load_run``)."""
    return Policy(load_run(run_dir, member=member))


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
            if hasattr(policy, "reset"):
                policy.reset()  # a policy with memory starts the episode afresh
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
