"""Env param overrides: names checked (also those of a suite's params nested
in an adapter's), applied by ``replace_params``, and read from a recipe's
``[env_params]`` table."""

import pytest

from ondevice_rl.env.types import replace_params
from ondevice_rl.envs import make
from ondevice_rl.train.recipes.loader import load_recipe, recipe_env_params


def test_an_adapters_nested_suite_params_are_overridable():
    env, params = make("gymnax/MemoryChain-bsuite")
    checked = env.check_params({"memory_length": 30.0, "max_steps": 50})
    assert checked == {"memory_length": 30, "max_steps": 50}
    assert isinstance(checked["memory_length"], int)
    new = replace_params(params, checked)
    assert new.env_params.memory_length == 30 and new.max_steps == 50
    assert params.env_params.memory_length == 5  # the defaults are untouched
    with pytest.raises(ValueError, match="must be an integer"):
        env.check_params({"memory_length": 2.5})
    with pytest.raises(ValueError, match="did you mean memory_length"):
        env.check_params({"memory_lenght": 3})


def test_own_params_and_unknown_names():
    env, params = make("CartPole-v1")
    assert replace_params(params, env.check_params({"length": 0.25})).length == 0.25
    with pytest.raises(ValueError, match="unknown env param"):
        replace_params(params, {"nothing": 1})


def test_a_recipe_carries_env_params(tmp_path):
    path = tmp_path / "chain.toml"
    path.write_text(
        '# A longer chain.\nalgo = "pqn"\nenv = "gymnax/MemoryChain-bsuite"\n'
        "total_timesteps = 4096\n[env_params]\nmemory_length = 12\n"
    )
    assert load_recipe(path).env == "gymnax/MemoryChain-bsuite"
    assert recipe_env_params(path) == {"memory_length": 12}
    path.write_text('algo = "pqn"\nenv_params = 3\n')
    with pytest.raises(ValueError, match="env_params must be a table"):
        recipe_env_params(path)
    assert recipe_env_params("cartpole_ppo") is None


def test_a_run_takes_the_recipes_env_params_under_the_callers(tmp_path):
    from ondevice_rl.train.cli.train import _env_params
    from ondevice_rl.train.run.entry import prepare_run

    path = tmp_path / "chain.toml"
    path.write_text(
        'algo = "pqn"\nenv = "gymnax/MemoryChain-bsuite"\n'
        "[env_params]\nmemory_length = 12\nmax_steps = 40\n"
    )

    def prepared(env_params):
        return prepare_run(
            algo=None, recipe=str(path), fields={}, env_params=env_params,
            seed=0, out=None, where="run_training",
        )  # fmt: skip

    assert prepared(None).spec.env_params == {"memory_length": 12, "max_steps": 40}
    run = prepared(_env_params(["max_steps=30"]))
    assert run.spec.env_params == {"memory_length": 12, "max_steps": 30.0}
    assert run.out is None and not run.created
    with pytest.raises(ValueError, match="no scalar param 'length'"):
        prepared({"length": 1.0})
    with pytest.raises(ValueError, match="expected NAME=NUMBER"):
        _env_params(["memory_length"])
