"""What identifies a training run, as stored in its ``config.json``
(``RunSpec``), and what a run returns (``RunResult``).

``RunSpec`` holds the learner's config, its traced hyperparameters, the seed,
env param overrides, the segment length and the periodic evaluation settings:
enough to rebuild the exact program and continue the run from a checkpoint
(``resume_training``).
"""

import json
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from ondevice_rl import envs
from ondevice_rl.train.kit.registry import algorithm_of, get_algorithm

#: Episodes per periodic evaluation (``--eval-episodes``) by default.
DEFAULT_EVAL_EPISODES = 10


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


class RunSpec(NamedTuple):
    config: Any
    hyperparams: Any
    seed: int
    env_params: dict | None  # overrides of the env's default params
    segment_length: int
    eval_every: int | None = None  # evaluate after every N-th update (None: never)
    eval_episodes: int = DEFAULT_EVAL_EPISODES  # deterministic episodes each time

    def env_params_tree(self) -> Any:
        """The env params the program gets (None: the env's defaults)."""
        if self.env_params is None:
            return None
        _, defaults = envs.make(self.config.env)
        params = defaults._replace(**self.env_params)
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
            "jax": {
                "version": jax.__version__,
                "backend": jax.default_backend(),
                "devices": [str(d) for d in jax.devices()],
            },
        }

    @classmethod
    def load(cls, path: Path) -> "RunSpec":
        """Reads a run's ``config.json`` (ValueError, one line, if unusable)."""
        from ondevice_rl.train.recipes.loader import config_from_dict

        try:
            info = json.loads(Path(path).read_text())
            algorithm = get_algorithm(info.get("algo", "ppo"))
            config = config_from_dict(info["config"], algorithm, where=str(path))
            hp = config.replace(**info["hyperparams"]).hyperparams
            return cls(
                config,
                hp,
                int(info["seed"]),
                info.get("env_params"),
                int(info["segment_length"]),
                None if info.get("eval_every") is None else int(info["eval_every"]),
                int(info.get("eval_episodes", DEFAULT_EVAL_EPISODES)),
            )
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a resumable run ({e!r})") from None

    def extended(self, total_timesteps: int) -> "RunSpec":
        """The same run with a larger ``total_timesteps``."""
        if total_timesteps < self.config.total_timesteps:
            raise ValueError(
                f"--total-timesteps {total_timesteps} would shorten the run "
                f"({self.config.total_timesteps}); only extending is allowed"
            )
        return self._replace(
            config=self.config.replace(total_timesteps=int(total_timesteps))
        )


class RunResult(NamedTuple):
    """What ``run_training`` / ``resume_training`` return.

    Attributes:
        metrics: name -> ``[U]`` float32 host array, one value per completed
            update (earlier ones included when resumed).
        final_return: ``ondevice_rl.metrics.final_return`` of the
            ``episode_return`` curve (NaN if no update completed).
        compile_s: seconds spent compiling (0 for cached programs).
        run_s: seconds spent running this call's segments.
        sps: env steps per second over ``run_s``.
        env_steps: env steps done in all (``U * config.steps_per_update``).
        out_dir: where files were written, or None.
        state: the final train state (on device).
        interrupted: stopped early by Ctrl-C or SIGTERM.
        stop_signal: that signal's number, or None.
        nonfinite: what the NaN guard found ("non-finite X at update N"), or
            None.
        resumed_from: the update the run continued from (0: a fresh run).
        checkpoint: the update of the last checkpoint written, or None.
        config: the run's config (the stored one when resumed).
    """

    metrics: dict[str, np.ndarray]
    final_return: float
    compile_s: float
    run_s: float
    sps: float
    env_steps: int
    out_dir: Path | None
    state: Any
    interrupted: bool = False
    stop_signal: int | None = None
    nonfinite: str | None = None
    resumed_from: int = 0
    checkpoint: int | None = None
    config: Any = None
