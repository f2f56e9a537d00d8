"""Tiny trained run directories shared by test modules (not collected: not
test_*.py).

One run per registered learner, trained at most once per process (an xdist
worker) for whichever module asks first (tests/test_evaluate.py,
tests/test_render.py): ``UPDATES`` updates in ``SEGMENTS`` segments,
evaluated every ``EVERY`` updates, compiled with XLA's backend optimisation
off. PPO on CartPole (returns vary; observation normalisation on if PPO has
it), the others on ``Probe-Truncation-v0`` (every episode: 5 steps of reward
1), the learners of continuous actions only on ``Probe-Box-v0`` (every
episode: one step of reward ``1 − (a − 2)² <= 1``).

PPO's run is compiled with XLA:CPU's own emitters (``product_emitters``):
its programs are then the ones test_evaluate.py's bitwise comparisons of
segmented, resumed and evaluated runs compile, and they take them from the
program cache.
"""

import contextlib

from suite_flags import fast_compiles, product_emitters

from ondevice_rl.train import get_algorithm
from ondevice_rl.train.kit.off_policy import OffPolicyConfig
from ondevice_rl.train.run.runner import train_from_config

UPDATES, SEGMENTS, EVERY, EPISODES = 4, 2, 2, 3
PROBE = "Probe-Truncation-v0"
BOX_PROBE = "Probe-Box-v0"


def tiny_config(name: str, env: str = PROBE):
    """``UPDATES`` updates of ``name`` on ``env``, small everything."""
    algorithm = get_algorithm(name)
    per_update = algorithm.config(env=env).steps_per_update
    small = {"total_timesteps": UPDATES * per_update, "hidden": (8,)}
    if "learning_starts" in algorithm.defaults():  # replay learners: learn early
        small.update(learning_starts=per_update, buffer_size=64, batch_size=8)
    return algorithm.config(env=env, **small)


def probe_of(name: str) -> str:
    """The probe ``name`` acts in: ``BOX_PROBE`` for the continuous-only."""
    continuous_only = issubclass(get_algorithm(name).config, OffPolicyConfig)
    return BOX_PROBE if continuous_only else PROBE


def run_config(name: str):
    """The shared run's config of ``name`` (see the module docstring)."""
    if name != "ppo":
        return tiny_config(name, probe_of(name))
    config = tiny_config(name, "CartPole-v1")
    if "normalize_obs" in get_algorithm(name).defaults():
        config = config.replace(normalize_obs=True)
    return config


def train_run(name, out, **kwargs):
    """The shared run's training of ``name`` into ``out`` (the caller sets
    the compiler options)."""
    return train_from_config(
        run_config(name), seed=1, out_dir=out, num_segments=SEGMENTS,
        progress=False, eval_every=EVERY, eval_episodes=EPISODES, **kwargs,
    )  # fmt: skip


_RUNS: dict = {}


def tiny_run(name: str, tmp_path_factory):
    """``(run dir, RunResult)`` of the shared run of ``name``, trained on
    first use in this process. Tests read it (and may add an eval.json)."""
    if name not in _RUNS:
        out = tmp_path_factory.mktemp(f"tiny-{name}") / name
        emitters = product_emitters() if name == "ppo" else contextlib.nullcontext()
        with fast_compiles(), emitters:
            _RUNS[name] = (out, train_run(name, out))
    return _RUNS[name]
