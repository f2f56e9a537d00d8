"""An environment of one's own: the worked example (docs/examples/taxi_port),
given only by its entry string or by its package's entry point, trained,
evaluated and loaded in a fresh process; one-line errors for what cannot be
made; and checked against gymnasium's Taxi through the example's own
reference and sync, at small sizes (docs/porting.md's check-env fence runs
it in full under ``make test-slow``: 0 mismatches, deliveries included).

The example package is put on ``PYTHONPATH`` and its entry point comes from
an ``entry_points.txt`` in a temporary ``*.dist-info`` (no pip install).
Whatever imports it runs in a subprocess, or drops it from ``sys.modules``
afterwards, so other tests never see it.
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ondevice_rl import envs
from ondevice_rl.checks.check_env import check_env
from ondevice_rl.envs import registry
from ondevice_rl.envs.cartpole import CartPole
from ondevice_rl.envs.entry import EnvEntryError
from ondevice_rl.train.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "taxi_port"
ENTRY = "taxi_port.env:make_taxi"
PLUGIN = "taxi_port/Taxi-v4"


def _dist_info(root: Path, entries: dict[str, str], name="taxi-port") -> Path:
    """A ``*.dist-info`` under ``root`` declaring ``entries`` (env name ->
    entry string) in the group ``ondevice_rl.envs``."""
    info = root / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n"
    )
    lines = [f"{k} = {v}" for k, v in entries.items()]
    (info / "entry_points.txt").write_text("[ondevice_rl.envs]\n" + "\n".join(lines))
    return root


@pytest.fixture
def example(monkeypatch, tmp_path):
    """The example package importable and its entry point installed, in this
    process (undone afterwards, ``taxi_port`` modules included)."""
    dist = _dist_info(tmp_path / "site", {PLUGIN: ENTRY, "broken/Env-v0": "gone:f"})
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(dist))
    monkeypatch.setattr(registry, "_PLUGINS", {})
    monkeypatch.setattr(registry, "_PLUGINS_READ", False)
    yield dist
    for name in [m for m in sys.modules if m.split(".")[0] == "taxi_port"]:
        del sys.modules[name]


def test_plugins_are_read_lazily_and_named_by_their_distribution(example):
    assert PLUGIN not in envs.names()  # nothing read at import
    env, params = envs.make(PLUGIN)  # an unknown name reads the entry points
    assert env.name == PLUGIN and int(params.max_steps) == 200
    assert {PLUGIN, "broken/Env-v0"} <= set(envs.names())
    with pytest.raises(EnvEntryError) as info:
        envs.make("broken/Env-v0")
    message = str(info.value)
    assert message.startswith("environment 'broken/Env-v0' of taxi-port: ")
    assert "no module named 'gone'" in message and "\n" not in message


def test_a_taken_name_is_one_warning_naming_the_distribution(monkeypatch, tmp_path):
    dist = _dist_info(tmp_path, {"CartPole-v1": ENTRY}, name="clash-pkg")
    monkeypatch.syspath_prepend(str(dist))
    monkeypatch.setattr(registry, "_PLUGINS", {})
    monkeypatch.setattr(registry, "_PLUGINS_READ", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        envs.load_plugins()
    assert [str(w.message) for w in caught] == [
        "environment plugin of clash-pkg skipped: the name 'CartPole-v1' is taken"
    ]
    assert envs.make("CartPole-v1")[0].name == "CartPole-v1"  # ours, untouched


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            "no_such_package.env:make",
            "cannot import 'no_such_package.env:make': no module named "
            "'no_such_package' (is its folder on PYTHONPATH?)",
        ),
        (
            "ondevice_rl.envs.cartpole:make_cartpole",
            "ondevice_rl.envs.cartpole has no attribute 'make_cartpole'",
        ),
        (
            "ondevice_rl.envs:names",
            "ondevice_rl.envs:names returned a list, not an ondevice_rl Environment, "
            "a gymnax-style environment (reset_env/step_env) or an (env, params) pair",
        ),
        ("gymnax:make", "gymnax:make() raised TypeError"),  # needs an id
        ("a:b:c", "'a:b:c' is not an entry string 'package.module:factory'"),
    ],
)
def test_what_cannot_be_made_is_one_line_and_exit_2(entry, message, capsys):
    with pytest.raises(EnvEntryError) as info:
        envs.make(entry)
    assert str(info.value).startswith(message)
    rc = main(["train", "--env", entry, "--total-timesteps", "512", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1, err
    assert main(["check-env", entry]) == 2
    assert message in capsys.readouterr().err


class WrongShape(CartPole):
    def observe(self, state, params):
        return super().observe(state, params)[:3]


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_a_protocol_violation_stops_train_and_sweep_before_compiling(command, capsys):
    entry = "test_own_env:WrongShape"  # CartPole observing 3 of its 4 numbers
    rc = main([command, "--env", entry, "--no-progress"])
    assert capsys.readouterr().err == (
        f"ondevice-rl {command}: error: environment {entry}: reset's obs has shape "
        "[3], the observation space says [4] (`ondevice-rl check-env "
        f"{entry}` runs every check)\n"
    )
    assert rc == 2


def test_the_examples_sync_makes_gymnasium_agree_with_the_port(example):
    """check-env's reference checks through ``taxi_port.sync`` (``reference``,
    ``sync_taxi``), at sizes that take seconds: the port's resets drawn like
    gymnasium's and its steps equal to gymnasium's from the same state."""
    from taxi_port.env import make_taxi
    from taxi_port.sync import reference, sync_taxi

    report = check_env(
        make_taxi(), num_envs=8, num_steps=16, random_sets=1, speed_seconds=0,
        reference_env=reference(), sync_state=sync_taxi, reference_steps=250,
        reset_samples=300,
    )  # fmt: skip
    assert report.ok, str(report)
    results = {r.name: r for r in report.results}
    assert "0 mismatches" in results["conformance"].detail
    assert "reset distribution" in results


def test_a_wrong_sync_fails_the_check_with_exit_1(capsys):
    argv = ["check-env", "CartPole-v1", "--num-envs", "2", "--num-steps", "8"]
    argv += ["--reference", "Acrobot-v1"]  # Acrobot's sync for CartPole's state
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "FAIL  spaces match the reference" in out
    assert "FAIL  conformance" in out and "AttributeError" in out


def test_train_by_entry_string_then_eval_and_load_in_a_fresh_process(
    example, tmp_path, capsys
):
    """The path a user takes: train by the entry string through the CLI, then
    evaluate and load in a process of its own (the package on PYTHONPATH,
    the entry point from a dist-info)."""
    run = tmp_path / "run"
    argv = ["train", "--env", ENTRY, "--total-timesteps", "512", "--num-envs", "4"]
    assert main([*argv, "--segments", "1", "--no-progress", "--out", str(run)]) == 0
    assert json.loads((run / "config.json").read_text())["config"]["env"] == ENTRY
    use = f"""
import json, jax, numpy as np, ondevice_rl
from ondevice_rl.train.cli import main
assert main(["eval", {str(run)!r}, "--episodes", "4"]) == 0
policy = ondevice_rl.load_policy({str(run)!r})
env, params = ondevice_rl.make({PLUGIN!r})  # the entry point's name
obs, _ = env.reset(jax.random.key(0), params)
print(json.dumps({{"action": int(policy(np.asarray(obs))), "env": policy.env}}))
"""
    path = os.pathsep.join([str(EXAMPLE), str(example)])
    env = {**os.environ, "PYTHONPATH": path, "ONDEVICE_RL_CACHE_DIR": "off"}
    done = subprocess.run(
        [sys.executable, "-c", use],
        env=env,
        timeout=300,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "taxi_port.env:make_taxi (ppo), checkpoint at update" in done.stdout
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert 0 <= result["action"] < 6 and result["env"] == ENTRY
    assert json.loads((run / "eval.json").read_text())["episodes"] == 4

    # The same run where its module cannot be imported: one line, exit 2.
    capsys.readouterr()
    config = run / "config.json"
    config.write_text(config.read_text().replace(ENTRY, "gone_port.env:make_taxi"))
    assert main(["eval", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ondevice-rl eval: error: ") and err.count("\n") == 1
    assert err.endswith(
        "cannot import 'gone_port.env:make_taxi': no module named 'gone_port' "
        "(is its folder on PYTHONPATH?)\n"
    )


def test_envs_lists_plugins_and_warns_once_for_a_broken_one(
    example, monkeypatch, capsys
):
    monkeypatch.setattr(envs, "names", lambda: [PLUGIN, "broken/Env-v0"])
    assert main(["envs"]) == 0
    out, err = capsys.readouterr()
    assert PLUGIN in out and "[500]" in out and "taxi-port" in out
    assert err.count("\n") == 1 and err.startswith(
        "ondevice-rl envs: warning: environment 'broken/Env-v0' of taxi-port: "
    )
