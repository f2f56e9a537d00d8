"""A run checked once, before anything is created or compiled.

``check_new_run`` (a config and the run's arguments) and ``check_resume``
(a run directory) give a ``RunRequest``: the run's ``RunSpec``, where it
writes and how it checkpoints and logs. Every argument is checked there and
nowhere after: ``runner.train`` takes a request as it is. Errors are one
line; those naming an argument are ``Worded`` (``train/run/checks.py``), so
that the CLI names its flags and ``run_training`` its keywords.
"""

from pathlib import Path
from typing import Any, NamedTuple

from ondevice_rl.files.checkpoint import Checkpoints
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.run.checks import DEFAULT_SEED, check_run_args, literal
from ondevice_rl.train.run.compile import ProgramInputs, traced_programs
from ondevice_rl.train.run.devices import check_available, per_device_config
from ondevice_rl.train.run.loop import plan
from ondevice_rl.train.run.run_spec import RunSpec
from ondevice_rl.train.services.memory import check_fits, check_programs_fit
from ondevice_rl.train.services.wandb_log import Opener, WandbLog


class RunRequest(NamedTuple):
    """A run whose arguments are all checked."""

    spec: RunSpec
    out: Path | None  # the run directory (None: nothing written)
    resume: bool  # continue the run in ``out`` from its newest verified checkpoint
    force: bool  # replace an earlier run in ``out``
    checkpoint_every: int | None  # updates between checkpoints (None: by time)
    resize: bool  # segments may be made shorter (their number was not chosen)
    open_wandb: Opener  # starts or continues the run's W&B log, if any
    created: bool = False  # ``out`` was made for this run (removed if left empty)


def check_new_run(
    config: Any,
    *,
    seed: int = DEFAULT_SEED,
    hyperparams: Any = None,
    env_params: Any = None,
    num_segments: int | None = None,
    checkpoint_every: int | None = None,
    eval_every: int | None = None,
    eval_episodes: int | None = None,
    log_every: int | None = None,
    devices: int | str | None = None,
    out_dir: str | Path | None = None,
    force: bool = False,
    wandb: str | None = None,
) -> RunRequest:
    """A new run of ``config`` with ``train_from_config``'s arguments,
    checked: the run's spec (``RunSpec.create``: seed, segments, evaluation,
    log interval, hyperparameters, env and its params, devices), the
    checkpoint interval, the device memory, the W&B project and ``out_dir``
    (a directory that takes a run; nothing is written yet)."""
    check_run_args(checkpoint_every=checkpoint_every)
    spec = RunSpec.create(
        config,
        seed=seed,
        hyperparams=hyperparams,
        env_params=env_params,
        num_segments=num_segments,
        eval_every=eval_every,
        eval_episodes=eval_episodes,
        log_every=log_every,
        devices=devices,
    )
    _check_fits(spec, 0)
    open_wandb = WandbLog.opener(wandb)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:  # the lock (a file) comes later, when the run starts
        artifacts.check_run_dir(out, force=force)
    resize = num_segments is None
    return RunRequest(spec, out, False, force, checkpoint_every, resize, open_wandb)


def check_resume(
    out_dir: str | Path,
    *,
    total_timesteps: int | None = None,
    checkpoint_every: int | None = None,
) -> RunRequest:
    """The run in ``out_dir`` to continue, with the spec stored there
    (``total_timesteps`` may extend it), checked: the directory and its
    ``config.json``, the checkpoint interval, the devices it was split over
    and the device memory (this machine may be another than the run's
    first)."""
    check_run_args(checkpoint_every=checkpoint_every)
    out = Path(out_dir)
    spec = RunSpec.stored_in(out)
    if total_timesteps is not None:
        spec = spec.extended(total_timesteps)
    if spec.devices is not None:
        check_available(spec.devices, f"{{resume}} {literal(out)}: devices")
        spec.trainer()  # a data-parallel one checks the config it is built for
    # The newest checkpoint by name: the run verifies it when it starts.
    newest = Checkpoints(out / artifacts.CHECKPOINT_DIR).latest() or 0
    _check_fits(spec, newest)
    open_wandb = WandbLog.resumer(out)
    return RunRequest(spec, out, True, False, checkpoint_every, True, open_wandb)


def _check_fits(spec: RunSpec, done: int) -> None:
    """One-line ``ValueError`` unless a device holds its share of the run
    from update ``done``. On one device the run is sized by the programs it
    compiles, traced here once (compiling lowers these traces); a
    data-parallel run by a whole run of each device's share."""
    if spec.devices is None:
        shapes = [s.program for s in plan(spec, done)]
        check_programs_fit(traced_programs(ProgramInputs.for_run(spec, shapes)))
    else:
        check_fits(per_device_config(spec.config, spec.devices))
