"""What identifies a training run, as stored in its ``config.json``.

``RunSpec`` holds the learner's config, its traced hyperparameters, the seed,
env param overrides, the segment length, the periodic evaluation settings,
the log interval and the devices it trains on: enough to rebuild the exact
program and continue the run from a checkpoint (``resume_training``).
``RunSpec.create`` checks a new run's arguments, each once.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from ondevice_rl.env.types import replace_params
from ondevice_rl.train.kit.config import config_from_dict, hyperparams_from
from ondevice_rl.train.kit.registry import algorithm_of, get_algorithm, trainer_for
from ondevice_rl.train.run import artifacts
from ondevice_rl.train.run.checks import (
    DEFAULT_EVAL_EPISODES,
    DEFAULT_SEED,
    DEFAULT_SEGMENTS,
    SEED_BOUND,
    SEED_RANGE,
    RunArgError,
    check_run_args,
    default_log_every,
)
from ondevice_rl.train.run.devices import chosen_devices, run_trainer

_MISSING = object()


def _positive(value: int) -> bool:
    return value >= 1


def env_params_dict(env_params: Any) -> dict | None:
    """An env params NamedTuple (or mapping) as ``{field: number}``; None
    stays None (the env's defaults)."""
    if env_params is None:
        return None
    items = (
        env_params.items()
        if isinstance(env_params, dict)
        else env_params._asdict().items()
    )
    return {k: np.asarray(v).tolist() for k, v in items}


def _as_hyperparams(config: Any, hyperparams: Any) -> Any:
    """``config``'s ``Hyperparams``: its own, ``hyperparams`` (a mapping
    overriding some of them, or a whole ``Hyperparams``), checked."""
    fields = config.HYPERPARAMS._fields
    if hyperparams is None:
        return config.hyperparams
    if isinstance(hyperparams, Mapping):
        unknown = set(hyperparams) - set(fields)
        if unknown:
            raise ValueError(
                f"unknown hyperparameters {sorted(unknown)}; valid: {', '.join(fields)}"
            )
        return config.replace(**hyperparams).hyperparams
    return hyperparams_from(config.HYPERPARAMS, hyperparams)


class RunSpec(NamedTuple):
    config: Any
    hyperparams: Any
    seed: int
    env_params: dict | None  # overrides of the env's default params
    segment_length: int
    eval_every: int | None = None  # evaluate after every N-th update (None: never)
    eval_episodes: int = DEFAULT_EVAL_EPISODES  # deterministic episodes each time
    log_every: int = 1  # a metrics row per this many updates
    devices: int | None = None  # data-parallel over this many devices (None: one)

    @classmethod
    def create(
        cls,
        config: Any,
        *,
        seed: int = DEFAULT_SEED,
        hyperparams: Any = None,
        env_params: Any = None,
        num_segments: int | None = None,
        eval_every: int | None = None,
        eval_episodes: int | None = None,
        log_every: int | None = None,
        devices: int | str | None = None,
    ) -> "RunSpec":
        """A new run of ``config`` (``train_from_config``'s arguments), checked
        before anything compiles: one-line ``ValueError`` for a bad argument,
        hyperparameter or env param, an action space the learner cannot use
        or devices it cannot split over (``train/run/devices.py``);
        ``KeyError`` for an unknown env."""
        check_run_args(
            seed=seed,
            num_segments=num_segments,
            eval_every=eval_every,
            eval_episodes=eval_episodes,
            log_every=log_every,
        )
        hp = _as_hyperparams(config, hyperparams)
        devices = chosen_devices(config, devices)
        env = run_trainer(config, devices).env.unwrapped  # built once per config
        if env_params is not None:
            env_params = env.check_params(env_params_dict(env_params))
        updates = config.num_updates
        segments = min(num_segments or DEFAULT_SEGMENTS, updates)
        return cls(
            config,
            hp,
            int(seed),
            env_params,
            -(-updates // segments),  # at most `segments` segments
            eval_every,
            DEFAULT_EVAL_EPISODES if eval_episodes is None else int(eval_episodes),
            default_log_every(updates, eval_every)
            if log_every is None
            else int(log_every),
            devices,
        )

    @classmethod
    def stored_in(cls, run_dir: Path) -> "RunSpec":
        """The spec of the run in ``run_dir``, to continue it (one-line
        ``RunDirError`` or ``ValueError`` if it is not a run)."""
        artifacts.prepare_run_dir(run_dir, resume=True)
        return cls.load(run_dir / artifacts.CONFIG_FILE)

    def trainer(self) -> Any:
        """The ``Trainer`` of this run: the learner's own, or its
        data-parallel one over ``devices`` devices."""
        return run_trainer(self.config, self.devices)

    def env_params_tree(self) -> Any:
        """The env params the program gets (None: the env's defaults)."""
        if self.env_params is None:
            return None
        defaults = trainer_for(self.config).default_env_params
        params = replace_params(defaults, self.env_params)
        return jax.tree.map(
            lambda value, default: np.asarray(value, np.asarray(default).dtype),
            params,
            defaults,
        )

    def to_json(self) -> dict:
        return {
            "algo": algorithm_of(self.config).name,
            "config": self.config.to_dict(),
            "hyperparams": {k: float(v) for k, v in self.hyperparams._asdict().items()},
            "seed": self.seed,
            "env_params": self.env_params,
            "segment_length": self.segment_length,
            "eval_every": self.eval_every,
            "eval_episodes": self.eval_episodes,
            "log_every": self.log_every,
            "devices": self.devices,
            "jax": {
                "version": jax.__version__,
                "backend": jax.default_backend(),
                "devices": [str(d) for d in jax.devices()],
            },
        }

    @classmethod
    def load(cls, path: Path) -> "RunSpec":
        """Reads and checks a run's ``config.json``: an object naming a known
        learner and env, its config fields, hyperparameters, seed and segment
        settings of the right types and ranges (``RunDirError``, one line
        naming the file and the field, otherwise)."""
        return cls.from_json(artifacts.read_json(path), path)

    @classmethod
    def from_json(cls, info: dict, path: Any) -> "RunSpec":
        """``to_json``'s object back, checked as ``load`` checks it; errors
        name ``path`` (where ``info`` was read from). Whether its ``devices``
        are there is a resume's question (``check_resume``), not a
        reader's."""

        def bad(message: str) -> artifacts.RunDirError:
            return artifacts.RunDirError(f"{path}: {message}")

        def field(name, kind, allowed, check=None, default=_MISSING):
            value = info.get(name, default)
            if value is _MISSING:
                raise bad(f"no {name!r} field")
            wrong = isinstance(value, bool) or not isinstance(value, kind)
            if wrong or (value is not None and check and not check(value)):
                raise bad(f"{name} must be {allowed}, got {value!r}")
            return value

        algo = field("algo", str, "a learner's name", default="ppo")
        try:
            algorithm = get_algorithm(algo)
        except KeyError as e:
            raise bad(f"algo: {e.args[0]}") from None
        values = field("config", dict, "an object of config fields")
        hp = field("hyperparams", dict, "an object of numbers")
        for name, value in hp.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise bad(f"hyperparams.{name} must be a number, got {value!r}")
        seed = field("seed", int, f"in {SEED_RANGE}", lambda v: 0 <= v < SEED_BOUND)
        env_params = field("env_params", dict | None, "an object or null", None, None)
        positive = "a positive integer"
        segment_length = field("segment_length", int, positive, _positive)
        eval_every = field(
            "eval_every", int | None, f"{positive} or null", _positive, None
        )
        eval_episodes = field(
            "eval_episodes", int, positive, _positive, DEFAULT_EVAL_EPISODES
        )
        log_every = field("log_every", int, positive, _positive, 1)
        devices = field("devices", int | None, f"{positive} or null", _positive, None)
        try:
            config = config_from_dict(values, algorithm, where=str(path))
            unknown = sorted(set(hp) - set(config.HYPERPARAMS._fields))
            if unknown:
                raise ValueError(f"unknown hyperparameters {unknown}")
            hyperparams = config.replace(**hp).hyperparams
            try:  # a known env, a usable one
                env = trainer_for(config).env.unwrapped
            except (ValueError, KeyError) as e:
                raise ValueError(f"env: {e.args[0] if e.args else e}") from None
            if env_params is not None:
                env_params = env.check_params(env_params)
        except (ValueError, KeyError, TypeError) as e:
            message = str(e.args[0] if isinstance(e, KeyError) and e.args else e)
            if not message.startswith(str(path)):
                message = f"{path}: {message}"
            raise artifacts.RunDirError(message) from None
        return cls(
            config,
            hyperparams,
            seed,
            env_params,
            segment_length,
            eval_every,
            eval_episodes,
            log_every,
            devices,
        )

    def extended(self, total_timesteps: int) -> "RunSpec":
        """The same run with a larger ``total_timesteps``."""
        if total_timesteps < self.config.total_timesteps:
            raise RunArgError(
                f"{{total_timesteps}} {total_timesteps} would shorten the run "
                f"({self.config.total_timesteps}); only extending is allowed"
            )
        return self._replace(
            config=self.config.replace(total_timesteps=int(total_timesteps))
        )
