"""The devices a run trains on: one, with the learner's own program, or
``N`` with its environments split over them (data-parallel: ``devices=N``,
``ondevice-rl train --devices N``).

A data-parallel run is its learner's ``Algorithm.data_parallel`` trainer
over a 1-D mesh of the first ``N`` devices (``ondevice_rl.devices.sharding``):
the same ``init``/``run`` surface as the learner's own, so segments,
checkpoints, resume and the run directory's files are a normal run's.
``RunSpec.devices`` records ``N`` (None: one device). What a data-parallel
run cannot do is refused here, in one line, before anything compiles.
"""

import functools
from typing import Any

import jax

from ondevice_rl.devices.sharding import DATA_AXIS, make_mesh
from ondevice_rl.train.kit.registry import (
    algorithm_of,
    algorithms,
    get_algorithm,
    trainer_for,
)
from ondevice_rl.train.run.checks import RunArgError, literal

#: ``devices`` meaning every device JAX shows.
ALL_DEVICES = "all"
#: How XLA:CPU is told to show more devices than the one it shows by default.
CPU_DEVICES_HINT = "XLA_FLAGS=--xla_force_host_platform_device_count={n}"


def data_parallel_learners() -> list[str]:
    """The learners with a data-parallel trainer."""
    return [n for n in algorithms() if get_algorithm(n).data_parallel is not None]


def _data_parallel(config: Any) -> Any:
    """``config``'s learner's data-parallel trainer maker; ``RunArgError``
    if it has none."""
    algorithm = algorithm_of(config)
    if algorithm.data_parallel is None:
        learners = ", ".join(data_parallel_learners()) or "none"
        raise RunArgError(
            f"{{devices}}: {algorithm.name} does not train data-parallel "
            f"(learners that do: {learners})"
        )
    return algorithm.data_parallel


def check_available(devices: int, name: str = "{devices}") -> None:
    """``RunArgError`` unless JAX shows at least ``devices`` devices; the
    message starts with ``name`` (a template: ``{devices}``, or how a resume
    names the stored run's count)."""
    shown = jax.device_count()
    if devices > shown:
        hint = ""
        if jax.default_backend() == "cpu":
            hint = f" (on CPU, {CPU_DEVICES_HINT.format(n=devices)} simulates more)"
        shown_text = f"{shown} device{'s' if shown != 1 else ''}"
        raise RunArgError(f"{name} {devices}: only {shown_text} here{hint}")


def chosen_devices(config: Any, devices: int | str | None) -> int | None:
    """``devices`` as a run records it: None for one device (not given, or
    1), else ``N >= 2`` (``"all"``: every device). ``RunArgError`` for a
    learner without a data-parallel trainer or a count that is not positive
    (``run_trainer`` checks that there are as many devices)."""
    if devices is None:
        return None
    _data_parallel(config)
    if devices == ALL_DEVICES:
        devices = jax.device_count()
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise RunArgError(
            f"{{devices}} must be a positive integer or {ALL_DEVICES!r}, "
            f"got {literal(repr(devices))}"
        )
    return None if devices == 1 else devices


@functools.lru_cache(maxsize=8)
def run_trainer(config: Any, devices: int | None = None) -> Any:
    """The ``Trainer`` a run of ``config`` uses: the learner's own
    (``trainer_for``) on one device, its data-parallel one over the first
    ``devices`` devices (``RunArgError`` naming ``{devices}`` for a config
    it cannot run, a batch that does not split over them). Built once per
    ``(config, devices)``."""
    if devices is None:
        return trainer_for(config)
    make_trainer = _data_parallel(config)
    check_available(devices)
    return _data_parallel_trainer(make_trainer, config, devices)


@functools.lru_cache(maxsize=8)
def _data_parallel_trainer(make_trainer: Any, config: Any, devices: int) -> Any:
    """``make_trainer(config, mesh)`` over the first ``devices`` devices,
    built once per ``(config, devices)`` as ``trainer_for`` is per config."""
    mesh = make_mesh(DATA_AXIS, jax.devices()[:devices])
    try:
        return make_trainer(config, mesh)
    except ValueError as e:
        raise RunArgError(f"{{devices}} {devices}: {literal(e)}") from None


def per_device_config(config: Any, devices: int | None) -> Any:
    """A config whose one-device run needs the memory each device of a
    run over ``devices`` devices needs: its share of the environments and
    steps (params, optimiser state replicated)."""
    if devices is None:
        return config
    return config.replace(
        num_envs=config.num_envs // devices,
        total_timesteps=config.total_timesteps // devices,
    )
