"""``ondevice-rl train``, ``envs`` and ``recipes``, run in-process via main()."""

import json

import pytest

from ondevice_rl.train.cli import build_parser, main
from ondevice_rl.train.cli.train import config_fields
from ondevice_rl.train.run.artifacts import read_metrics
from ondevice_rl.train.run.entry import build_config
from ondevice_rl.train.services.compile_cache import compilation_cache_dir


def test_train_writes_run_files(tmp_path, capsys):
    out = tmp_path / "cp"
    # Same config as tests/test_runner.py (8 updates of 4 x 128 steps); its
    # 2-update segment program is reused when both files run in one process.
    argv = "train --env CartPole-v1 --total-timesteps 4096 --seed 1 --segments 4"
    rc = main([*argv.split(), "--out", str(out), "--no-progress"])
    assert rc == 0
    stdout = capsys.readouterr().out
    for word in ("compile", "run", "steps/s", "final return", str(out)):
        assert word in stdout

    info = json.loads((out / "config.json").read_text())
    assert info["config"]["env"] == "CartPole-v1" and info["seed"] == 1
    assert info["status"] == "finished" and info["segments"] == [2, 2, 2, 2]
    assert set(info["hyperparams"]) >= {"learning_rate", "gamma", "clip_eps"}
    assert info["jax"]["backend"] == "cpu"

    rows = read_metrics(out / "metrics.jsonl")
    assert len(rows) == 8
    steps = [r["env_steps"] for r in rows]
    assert steps == sorted(set(steps)) and steps[-1] == 8 * 512
    for row in rows:
        assert {"update", "env_steps", "episode_return", "total_loss"} <= set(row)
        assert isinstance(row["episode_return"], float)
    assert (out / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "checkpoint").is_dir()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--env", "CartPol"], "unknown environment 'CartPol'. Did you mean"),
        (["--recipe", "cartpol"], "unknown recipe 'cartpol'. Did you mean"),
        (["--num-envs", "0"], "num_envs must be a positive int"),
        (["--total-timesteps", "-5"], "total_timesteps must be a positive int"),
        (["--num-minibatches", "3"], "not divisible"),
        (["--segments", "0"], "--segments must be positive"),
        (["--total-timesteps", "many"], "not an integer"),
    ],
)
def test_bad_train_input_is_one_line_and_exit_2(argv, message, capsys):
    try:
        rc = main(["train", *argv, "--no-progress"])
    except SystemExit as e:  # argparse type errors
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def _build_config(args):
    """The config ``train`` builds from its flags (recipe values, then flags)."""
    return build_config(args.algo, args.recipe, config_fields(args), "config")


def test_flags_override_recipe():
    args = build_parser().parse_args(
        [
            "train",
            "--recipe",
            "acrobot_ppo",
            "--num-envs",
            "8",
            "--gamma",
            "0.9",
            "--hidden",
            "32,32",
            "--lr-schedule",
            "constant",
            "--total-timesteps",
            "1e5",
        ]
    )
    config = _build_config(args)
    assert config.env == "Acrobot-v1"
    assert (config.num_envs, config.gamma, config.hidden) == (8, 0.9, (32, 32))
    assert config.lr_schedule == "constant" and config.total_timesteps == 100_000
    assert config.num_minibatches == 32  # from the recipe


def test_envs_lists_environments(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert "CartPole-v1" in out and "Discrete(2)" in out and "500" in out
    assert "gymnax/Breakout-MinAtar" in out and "brax/ant" in out
    assert "mjx/CheetahRun" in out
    # The JAX suites' names (the test extra installs them), built with --full.
    for name in ("navix/Navix-Empty-8x8-v0", "jumanji/Maze-v0", "pgx/2048"):
        assert name in out


def test_algos_lists_learners(capsys):
    assert main(["algos"]) == 0
    out = capsys.readouterr().out
    assert "PPOConfig" in out and "A2CConfig" in out and "clip_eps" in out


def test_algo_flags_are_the_chosen_learners():
    args = build_parser(["train", "--algo", "a2c"]).parse_args(
        ["train", "--algo", "a2c", "--optimizer", "adam", "--num-steps", "8"]
    )
    config = _build_config(args)
    assert type(config).__name__ == "A2CConfig"
    assert (config.optimizer, config.num_steps) == ("adam", 8)
    # A recipe names its learner; its flags follow without --algo.
    argv = ["train", "--recipe", "cartpole_a2c", "--optimizer", "adam"]
    config = _build_config(build_parser(argv).parse_args(argv))
    assert type(config).__name__ == "A2CConfig" and config.optimizer == "adam"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--algo", "a3c"], "unknown algorithm 'a3c'. Did you mean sac, a2c"),
        (["--algo", "ppo", "--recipe", "cartpole_a2c"], "not --algo ppo"),
        (["--algo", "ppo", "--optimizer", "adam"], "unrecognized arguments"),
    ],
)
def test_bad_algo_input_is_one_line_and_exit_2(argv, message, capsys):
    try:
        rc = main(["train", *argv, "--no-progress"])
    except SystemExit as e:
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_recipes_lists_recipes(capsys):
    assert main(["recipes"]) == 0
    out = capsys.readouterr().out
    for name in ("cartpole_ppo", "acrobot_ppo", "pendulum_ppo"):
        assert name in out


def test_compilation_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ONDEVICE_RL_CACHE_DIR", str(tmp_path / "c"))
    assert compilation_cache_dir() == tmp_path / "c"
    monkeypatch.setenv("ONDEVICE_RL_CACHE_DIR", "off")
    assert compilation_cache_dir() is None
    monkeypatch.delenv("ONDEVICE_RL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compilation_cache_dir() == tmp_path / "ondevice_rl" / "jax"


def test_sweep_and_seeds_train_the_recipes_env_params(monkeypatch, tmp_path):
    """A recipe's ``[env_params]`` (memorychain_pqn_gru: a 30-step chain)
    reach the population ``sweep --recipe`` and ``seeds`` train, unless a
    flag gives them; stopped where the training would start."""
    from ondevice_rl.train.cli import sweep
    from ondevice_rl.train.sweep import seed_sets

    seen = []

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        seen.append((args, kwargs))
        raise Stop

    monkeypatch.setattr(sweep, "_sweep", stop)
    monkeypatch.setattr(seed_sets, "measure", stop)
    recipe = ["--recipe", "memorychain_pqn_gru", "--cpu-devices", "1"]
    for argv in (
        ["sweep", *recipe, "--out", str(tmp_path / "a")],
        [
            "sweep",
            *recipe,
            "--env-param",
            "memory_length=8",
            "--out",
            str(tmp_path / "b"),
        ],
        [
            "seeds",
            "memorychain_pqn_gru",
            "--cpu-devices",
            "1",
            "--out",
            str(tmp_path / "c"),
        ],
    ):
        with pytest.raises(Stop):
            main(argv)
    (a, _), (b, _), (_, c) = seen
    assert a[2]["env_params"] == {"memory_length": [30]}
    assert b[2]["env_params"] == {"memory_length": [8.0]}
    assert c["env_params"] == {"memory_length": [30]}
