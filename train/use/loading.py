"""What a trained run leaves to use: its stored spec and its parameters.

* ``load_run(run_dir)``: the stored ``RunSpec``, the trainer and the newest
  verified checkpoint's ``PolicyParams`` (network parameters and obs
  statistics); a newer damaged checkpoint is named in one line and skipped.
* ``load_member(sweep_dir, member)``: the same for a sweep member's final
  parameters (``member``: its number or ``"best"``).
* ``load_spec(run_dir, member=None)``: the ``RunSpec`` alone.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ondevice_rl.files.checkpoint import (
    CheckpointMismatch,
    Checkpoints,
    describe_skipped,
)
from ondevice_rl.train.kit.registry import algorithm_of, trainer_for
from ondevice_rl.train.kit.state import PolicyParams, policy_params
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.run.run_spec import RunSpec
from ondevice_rl.train.services.progress import to_stderr
from ondevice_rl.train.sweep import store
from ondevice_rl.train.sweep.request import SPEC_FILE
from ondevice_rl.train.sweep.store import MEMBERS_DIR, PARAMS_GLOB


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
    run_dir = Path(run_dir)
    if member is not None or is_sweep_dir(run_dir):
        return load_member(run_dir, member).spec
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir}: no such run directory")
    if not (run_dir / artifacts.CONFIG_FILE).is_file():
        raise ValueError(f"{run_dir}: not a run directory (no {artifacts.CONFIG_FILE})")
    return RunSpec.load(run_dir / artifacts.CONFIG_FILE)


def is_sweep_dir(path: str | Path) -> bool:
    """Whether ``path`` is a sweep's directory (it holds ``sweep.json``, or
    the members' parameters a sweep from Python wrote)."""
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
    run_dir = Path(run_dir)
    if member is not None or is_sweep_dir(run_dir):
        return load_member(run_dir, member)
    spec = load_spec(run_dir)
    checkpoints = Checkpoints(run_dir / artifacts.CHECKPOINT_DIR)
    step, skipped = checkpoints.usable()
    if step is None:
        raise ValueError(f"{run_dir}: no checkpoint yet (train it first)")
    if skipped:
        (notify or to_stderr)(
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
    info, arrays = store.read_member(folder, index)
    where = f"{folder} (member {index})"
    spec = RunSpec.from_json(info, where)
    hp = {k: float(v) for k, v in spec.hyperparams._asdict().items()}
    trainer = trainer_for(spec.config.replace(**hp))
    like = policy_params(_like(trainer, spec))
    leaves, treedef = jax.tree_util.tree_flatten_with_path(like)
    values = []
    for path, want in leaves:
        name = store.leaf_name(path)
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
