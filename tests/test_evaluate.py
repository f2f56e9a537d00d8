"""Evaluation on the device (ondevice_rl/evaluation.py), ``ondevice-rl eval``, periodic
evaluation inside the training program (``--eval-every``), TensorBoard files.

One tiny run per registered learner (4 updates in 2 segments, evaluated after
updates 2 and 4) is trained once per process and shared (tests/tiny_runs.py,
also used by tests/test_render.py), compiled with XLA's backend optimisation
off (as tests/test_sweep.py does): PPO on CartPole (returns vary;
observation normalisation on if PPO has it), the others on
``Probe-Truncation-v0`` (every episode: 5 steps of reward 1), the learners of
continuous actions only on ``Probe-Box-v0`` (every episode: one step of
reward ``1 − (a − 2)² <= 1``). PPO's run is compiled with XLA:CPU's own
emitters, as the bitwise comparisons here compile. A2C's and TD3's
parametrisations (the kit paths of PPO's and SAC's) run under slow.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from suite_flags import fast_compiles, product_emitters
from tiny_runs import (
    BOX_PROBE,
    EPISODES,
    EVERY,
    SEGMENTS,
    UPDATES,
    probe_of,
    run_config,
    tiny_config,
    tiny_run,
    train_run,
)

from ondevice_rl.evaluation import evaluate, summarize
from ondevice_rl.train import algorithms, get_algorithm
from ondevice_rl.train.bench.transfers import host_ops
from ondevice_rl.train.cli import main
from ondevice_rl.train.run.artifacts import read_metrics
from ondevice_rl.train.run.compile import ProgramInputs, compile_programs, trace_segment
from ondevice_rl.train.run.runner import resume_training, train_from_config
from ondevice_rl.train.run.segments import Evaluation, eval_key_for, eval_updates
from ondevice_rl.train.services.programs import PROGRAMS
from ondevice_rl.train.services.tensorboard import metric_tag, read_scalars

# The tiny runs (tests/tiny_runs.py) are built once: these tests share a worker.
pytestmark = pytest.mark.xdist_group("tiny_runs")


@pytest.fixture(scope="module", autouse=True)
def _fast_compiles():
    with fast_compiles():
        yield


#: Learners whose runs repeat another's kit path (a2c: the on-policy kit's
#: scaffold and actor-critic policy, as ppo's; td3: the off-policy kit's, as
#: sac's): their parametrisations here run under slow.
SLOW = {"a2c", "td3"}


def _learners(names):
    """``names`` as parameters, those in ``SLOW`` marked slow."""
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in names]


LEARNERS = _learners(algorithms())


class _Runs:
    """name -> (run dir, RunResult): the learner's shared tiny run, trained
    on first use (tests only read them)."""

    def __init__(self, tmp_path_factory):
        self._factory = tmp_path_factory

    def __getitem__(self, name):
        return tiny_run(name, self._factory)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _Runs(tmp_path_factory)


@pytest.fixture(scope="module")
def ppo_run(runs):
    """PPO's shared run; its programs are in the program cache from here on."""
    return runs["ppo"]


def _init_params(trainer):
    obs = jnp.zeros(trainer.env.observation_space(trainer.default_env_params).shape)
    return trainer.network.init(jax.random.key(0), obs)


@pytest.mark.parametrize("deterministic", [True, False])
def test_probe_truncation_every_episode_is_five_steps_of_reward_one(deterministic):
    trainer = get_algorithm("ppo").make_trainer(tiny_config("ppo"))
    policy = trainer.policy
    result = jax.jit(
        lambda p, k: evaluate(policy, p, trainer.env, None, k, 7, deterministic)
    )(_init_params(trainer), jax.random.key(0))
    assert result["return"].shape == result["length"].shape == (7,)
    np.testing.assert_array_equal(result["return"], 5.0)
    np.testing.assert_array_equal(result["length"], 5)
    summary = summarize(result)
    assert summary["episodes"] == 7
    assert summary["return"] == {"mean": 5.0, "std": 0.0, "min": 5.0, "max": 5.0}
    if deterministic:  # the episodes' last states: frozen at the time limit
        kept = jax.jit(
            lambda p, k: evaluate(policy, p, trainer.env, None, k, 7, True, (), True)
        )(_init_params(trainer), jax.random.key(0))
        np.testing.assert_array_equal(kept["state"].time, 5)
        np.testing.assert_array_equal(kept["return"], result["return"])


@pytest.mark.parametrize("name", LEARNERS)
def test_eval_every_writes_eval_return_at_the_right_updates(name, runs):
    out, result = runs[name]
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["update"] for r in rows] == list(range(1, UPDATES + 1)), name
    evaluated = [r["update"] for r in rows if r["eval_return"] is not None]
    assert evaluated == [2, 4], name
    evals = [r["eval_return"] for r in rows[1::2]]
    if name != "ppo" and probe_of(name) == BOX_PROBE:
        assert all(r <= 1.0 for r in evals)  # one step, 1 − (a − 2)²
    elif name != "ppo":  # the probe: 5 steps of reward 1
        assert evals == [5.0, 5.0]
    np.testing.assert_array_equal(
        np.isfinite(result.metrics["eval_return"]), [False, True, False, True]
    )
    assert result.nonfinite is None and not result.interrupted  # NaN guard quiet
    info = json.loads((out / "config.json").read_text())
    assert (info["eval_every"], info["eval_episodes"]) == (EVERY, EPISODES)


def test_eval_positions_follow_the_absolute_update_count():
    assert eval_updates(6, 0, 2) == [1, 3, 5]
    assert eval_updates(6, 1, 2) == [0, 2, 4]
    assert eval_updates(3, 0, 4) == []
    assert eval_updates(3, 2, 4) == [1]


def test_segments_cut_off_the_evaluation_grid_give_the_same_numbers(ppo_run):
    """After a resume that extended a run, segments start between evaluations
    (phase ≠ 0); evaluations still land on every EVERY-th update, equal."""
    del ppo_run  # the whole run's programs are in the cache
    config = run_config("ppo")
    key, hp = jax.random.key(1), config.hyperparams
    cut = [(0, (1, 0)), (1, (1, 1)), (2, (2, 0))]
    whole = [(0, (2, 0)), (2, (2, 0))]  # the whole run's plan, SEGMENTS of 2
    evaluation = Evaluation(EVERY, EPISODES)
    with product_emitters():
        inputs = ProgramInputs(
            config, key, hp, None, [(1, 0), (1, 1), (2, 0)], evaluation
        )
        programs, _ = compile_programs(inputs)

    def run(plan):
        state, chunks = programs.init(key, hp, None), []
        for start, (length, phase) in plan:
            segment = programs.segments[(length, phase)]
            state, logged = segment(state, hp, None, np.int32(start), eval_key_for(key))
            chunks.append(jax.device_get(logged.rows))
        return {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}

    expected = run(whole)
    for name, values in run(cut).items():
        np.testing.assert_array_equal(values, expected[name])
    assert np.isfinite(expected["eval_return"]).tolist() == [0, 1, 0, 1]


def test_segment_with_evaluation_is_host_silent(ppo_run):
    del ppo_run  # its programs are in the cache
    config = run_config("ppo")
    key, hp = jax.random.key(1), config.hyperparams
    inputs = ProgramInputs(config, key, hp, None, [(2, 0)], Evaluation(EVERY, EPISODES))
    lowered = trace_segment(inputs, 2, 0).lower()
    with product_emitters():  # the options PPO's run was compiled with
        compiled = [p for k, p in PROGRAMS.entries() if k[0] == "segment-eval"]
    assert compiled and host_ops(lowered, *compiled) == []


def test_evaluation_leaves_training_unchanged_and_resumes_equal(ppo_run, tmp_path):
    def stop_after_first(done, steps, latest):
        raise KeyboardInterrupt

    (out_dir, whole), out = ppo_run, tmp_path / "stopped"  # whole: evaluated
    with product_emitters():
        plain = train_from_config(
            run_config("ppo"), seed=1, num_segments=SEGMENTS, progress=False
        )
        first = train_run("ppo", out, on_segment=stop_after_first)
        rest = resume_training(out, progress=False)
    for name, values in plain.metrics.items():
        np.testing.assert_array_equal(whole.metrics[name], values)
    assert first.interrupted and first.checkpoint == UPDATES // SEGMENTS
    assert rest.resumed_from == 2
    for name, values in whole.metrics.items():
        np.testing.assert_array_equal(rest.metrics[name], values)
    assert read_metrics(out / "metrics.jsonl") == read_metrics(
        out_dir / "metrics.jsonl"
    )


def test_tensorboard_files_hold_every_metric_against_env_steps(runs):
    out, result = runs["ppo"]
    scalars = read_scalars(out)
    rows = read_metrics(out / "metrics.jsonl")
    assert set(scalars) == {metric_tag(k) for k in result.metrics} | {"charts/sps"}
    groups = {"charts/episode_return", "losses/total_loss", "eval/eval_return"}
    assert groups <= set(scalars)
    steps = [r["env_steps"] for r in rows]
    assert [s for s, _ in scalars["losses/total_loss"]] == steps
    finished = [r for r in rows if r["episode_return"] is not None]
    assert [s for s, _ in scalars["charts/episode_return"]] == [
        r["env_steps"] for r in finished
    ]
    np.testing.assert_allclose(
        [v for _, v in scalars["charts/episode_return"]],
        [r["episode_return"] for r in finished],
        rtol=1e-6,
    )
    assert [s for s, _ in scalars["eval/eval_return"]] == [steps[1], steps[3]]
    assert [s for s, _ in scalars["charts/sps"]] == steps[1::2]  # segment ends


def test_plot_of_real_runs_and_their_evaluations(runs, tmp_path, capsys):
    dirs = [str(runs[name][0]) for name in algorithms() if name not in SLOW]
    for metric in ("episode_return", "eval_return"):
        png = tmp_path / f"{metric}.png"
        assert main(["plot", *dirs, "--metric", metric, "--out", str(png)]) == 0
        assert png.read_bytes()[:4] == b"\x89PNG"
    assert f"{len(dirs)} curve(s)" in capsys.readouterr().out


@pytest.mark.parametrize("name", LEARNERS)
def test_eval_cli_for_every_learner(name, runs, capsys):
    out, _ = runs[name]
    assert main(["eval", str(out), "--episodes", "5", "--deterministic"]) == 0
    stdout = capsys.readouterr().out
    assert "5 episodes, deterministic" in stdout and "return" in stdout
    text = (out / "eval.json").read_text()
    record = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert record["algo"] == name and record["checkpoint"] == UPDATES
    assert len(record["episode_returns"]) == record["episodes"] == 5
    returns, lengths = record["episode_returns"], record["episode_lengths"]
    assert record["return"]["mean"] == pytest.approx(np.mean(returns))
    assert record["return"]["max"] == max(returns)
    if probe_of(name) == BOX_PROBE:  # deterministic, one state: one action
        assert lengths == [1] * 5 and len(set(returns)) == 1 and returns[0] <= 1.0
        return
    assert returns == [float(n) for n in lengths]  # one reward per step
    if name != "ppo":
        assert lengths == [5] * 5
        assert record["return"] == {"mean": 5.0, "std": 0.0, "min": 5.0, "max": 5.0}
    else:
        assert all(1 <= n <= 500 for n in lengths)


@pytest.mark.parametrize(
    "name", _learners(n for n in algorithms() if probe_of(n) == BOX_PROBE)
)
def test_load_policy_of_a_continuous_learner_acts_in_the_box(name, runs):
    """One observation or a batch, actions in the Box ``[-1, 3]``."""
    import ondevice_rl

    policy = ondevice_rl.load_policy(runs[name][0])
    one = policy(np.ones(1, np.float32))
    batch = policy(np.ones((3, 1), np.float32), jax.random.key(0))
    assert one.shape == (1,) and batch.shape == (3, 1) and one.dtype == np.float32
    assert np.all((-1.0 <= batch) & (batch <= 3.0)) and -1.0 <= one[0] <= 3.0
    assert len(np.unique(np.asarray(batch))) == 3  # sampled: three actions


@pytest.mark.parametrize(
    "argv, message",
    [
        (["eval", "{missing}"], "no such run directory"),
        (["eval", "{empty}"], "not a run directory (no config.json)"),
        (["eval", "{run}", "--episodes", "0"], "not a positive integer"),
        (["eval", "{run}", "--seed", "-1"], "--seed must be in [0, 2^32)"),
        (["eval", "{run}", "--episodes", "lots"], "not an integer"),
        (["train", "--eval-every", "0"], "--eval-every must be in [1, 2^31)"),
        (["train", "--eval-episodes", "3"], "--eval-episodes needs --eval-every"),
        (
            ["train", "--resume", "{run}", "--eval-every", "3"],
            "--eval-every 3 differs from the run's (2)",
        ),
    ],
)
def test_bad_eval_input_is_one_line_and_exit_2(argv, message, runs, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    paths = {
        "missing": tmp_path / "missing",
        "empty": tmp_path / "empty",
        "run": runs["ppo"][0],
    }
    argv = [a.format(**paths) for a in argv]
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_eval_of_a_run_without_checkpoint_is_one_line(runs, tmp_path, capsys):
    out = tmp_path / "fresh"
    out.mkdir()
    (out / "config.json").write_text((runs["ppo"][0] / "config.json").read_text())
    assert main(["eval", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint yet" in err and err.count("\n") == 1


def test_policies_see_observations_as_the_learner_did(runs):
    """With observation normalisation on, acting (eval, load_policy, the
    in-program evaluation) standardises obs with the checkpoint's statistics."""
    config, (out, _) = run_config("ppo"), runs["ppo"]
    if not getattr(config, "normalize_obs", False):
        pytest.skip("PPO has no observation normalisation")
    from ondevice_rl.normalize import normalize
    from ondevice_rl.train.use.loading import load_run

    run = load_run(out)
    stats = run.params.normalizer.obs
    assert float(stats.count) > 1  # the statistics were restored
    obs = jax.random.normal(jax.random.key(2), (64, 4)) * 3
    seen = normalize(stats, obs)
    logits = run.trainer.network.apply(run.params.network, seen).logits_or_mean
    acted, _ = run.trainer.policy(run.params, (), obs, None, True)
    np.testing.assert_array_equal(acted, jnp.argmax(logits, -1))
    raw = run.trainer.network.apply(run.params.network, obs).logits_or_mean
    assert np.any(np.asarray(acted) != np.asarray(jnp.argmax(raw, -1)))
