"""Bad input, everywhere: one line on stderr naming the flag or key, the value
and what is allowed, exit status 2, nothing compiled, no traceback."""

import pytest

from ondevice_rl import make
from ondevice_rl.train import get_algorithm
from ondevice_rl.train.cli import main
from ondevice_rl.train.run.checks import RunArgError
from ondevice_rl.train.run.runner import train_from_config
from ondevice_rl.train.services.programs import PROGRAMS

TRAIN = [
    (["--hidden", "0"], "hidden must be positive ints"),
    (["--hidden", "-4"], "hidden must be positive ints"),
    (["--activation", "tahn"], "activation must be one of tanh, relu, gelu"),
    (["--num-envs", "1e30"], "num_envs=1000000000000000019884624838656 is too large"),
    (["--num-envs", "0"], "num_envs must be a positive int"),
    (["--seed", "1e30"], "--seed must be in [0, 2^32)"),
    (["--seed", "4294967296"], "--seed must be in [0, 2^32)"),
    (["--seed", "-1"], "--seed must be in [0, 2^32)"),
    (["--learning-rate", "nan"], "learning_rate=nan is not finite"),
    (["--learning-rate", "-1"], "learning_rate=-1.0 is outside (0, inf]"),
    (["--gamma", "1.5"], "gamma=1.5 is outside [0, 1]"),
    (["--gae-lambda", "-0.1"], "gae_lambda=-0.1 is outside [0, 1]"),
    (["--clip-eps", "0"], "clip_eps=0.0 is outside (0, inf]"),
    (["--ent-coef", "-1"], "ent_coef=-1.0 is outside [0, inf]"),
    (["--max-grad-norm", "inf"], "max_grad_norm=inf is not finite"),
    (["--total-timesteps", "10"], "less than one update (512 env steps)"),
    (["--num-envs", "100000000", "--total-timesteps", "2e11"], "too large (< 2^31)"),
    (["--num-envs", "10000000", "--total-timesteps", "2e11"], "GiB of device memory"),
    (["--checkpoint-every", "0"], "--checkpoint-every must be positive"),
    (["--segments", "0"], "--segments must be positive"),
    (["--eval-every", "0"], "--eval-every must be in [1, 2^31), got 0"),
    (["--eval-episodes", "3"], "--eval-episodes needs --eval-every"),
    (["--devices", "0"], "--devices must be a positive integer or 'all', got 0"),
    (["--devices", "two"], "not an integer"),
    (["--devices", "2"], "--devices 2: only 1 device here (on CPU, XLA_FLAGS="),
    (["--algo", "dqn", "--devices", "2"], "dqn does not train data-parallel"),
    (["--env", "CartPol"], "unknown environment 'CartPol'. Did you mean"),
    (["--algo", "dqn", "--env", "Pendulum-v1"], "dqn needs a discrete action space"),
    (["--algo", "sac", "--env", "CartPole-v1"], "sac needs a continuous action"),
    (["--algo", "td3", "--utd-ratio", "0"], "utd_ratio must be positive"),
    (["--algo", "a2c", "--optimizer", "sgd"], "optimizer"),
    (["--recipe", "nosuch"], "unknown recipe 'nosuch'"),
    (["--out", "/proc/no/such/dir"], "--out /proc/no/such/dir: cannot write there"),
    (["--resume", "/no/such/run"], "--resume /no/such/run: no config.json there"),
    (["--total-timesteps", "many"], "not an integer"),
]

SWEEP = [
    (["--learning-rate", "-1"], "learning_rate=-1.0 is outside (0, inf]"),
    (["--gamma", "0.9,2"], "gamma=2.0 is outside [0, 1]"),
    (["--env-param", "length=-0.5"], "env param length=-0.5 is outside (0, inf]"),
    (["--env-param", "max_steps=2.5"], "env param max_steps must be an integer"),
    (["--env-param", "lenght=1"], "did you mean length"),
    (["--seeds", "0,4294967296"], "seeds must be in [0, 2^32)"),
    (["--num-envs", "4,0"], "num_envs must be a positive int"),
    (["--activation", "tanh,tahn"], "unknown activation 'tahn'"),
    (["--learning-rate", "loguniform:0:1", "--samples", "4"], "loguniform needs"),
    (["--algo", "pqn", "--env", "Pendulum-v1"], "pqn needs a discrete action space"),
    (["--algo", "a3c"], "unknown algorithm 'a3c'"),
]


def _one_line_exit_2(argv, message, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv, message", TRAIN)
def test_bad_train_input(argv, message, capsys, tmp_path):
    _one_line_exit_2(["train", *argv, "--no-progress"], message, capsys)


@pytest.mark.parametrize("argv, message", SWEEP)
def test_bad_sweep_input(argv, message, capsys, tmp_path):
    out = ["--out", str(tmp_path / "sweep"), "--cpu-devices", "1", "--no-progress"]
    _one_line_exit_2(["sweep", *argv, *out], message, capsys)
    assert not (tmp_path / "sweep").exists()  # rejected before anything was made


def test_sweep_out_that_is_a_file_is_refused_before_training(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    argv = ["sweep", "--out", str(target), "--cpu-devices", "1", "--no-progress"]
    _one_line_exit_2(argv, "is a file, not a directory", capsys)


def test_debug_shows_the_traceback(capsys):
    with pytest.raises(ValueError, match="gamma"):
        main(["train", "--gamma", "2", "--debug", "--no-progress"])


def test_configs_validate_on_construction_for_every_learner():
    for name in ("ppo", "a2c", "dqn", "pqn"):
        config = get_algorithm(name).config
        with pytest.raises(ValueError, match="hidden"):
            config(hidden=(0,))
        with pytest.raises(ValueError, match="activation"):
            config(activation="tahn")
        with pytest.raises(ValueError, match="learning_rate"):
            config(learning_rate=float("nan"))


def test_python_api_checks_seed_and_env_params():
    config = get_algorithm("ppo").config(total_timesteps=512)
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\^32\)"):
        train_from_config(config, seed=2**32, progress=False)
    with pytest.raises(ValueError, match="env param length=-1.0 is outside"):
        train_from_config(config, env_params={"length": -1.0}, progress=False)
    env, _ = make("CartPole-v1")
    assert env.check_params({"length": 1, "max_steps": 100.0}) == {
        "length": 1.0,
        "max_steps": 100,
    }


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_segments": 0}, "num_segments must be positive, got 0"),
        ({"checkpoint_every": -2}, "checkpoint_every must be positive, got -2"),
        ({"eval_every": 2**31}, r"eval_every must be in \[1, 2\^31\), got 2147483648"),
        ({"eval_episodes": 3}, "eval_episodes needs eval_every"),
    ],
)
def test_python_api_checks_run_arguments_before_compiling(kwargs, message):
    """The checks the CLI words with its flags, in the API's own words."""
    config = get_algorithm("ppo").config(total_timesteps=512)
    compiles = PROGRAMS.compiles
    with pytest.raises(RunArgError, match=message):
        train_from_config(config, progress=False, **kwargs)
    assert PROGRAMS.compiles == compiles
