"""The JAX suites' adapters beside the suites' own APIs: from the same state
and key, the same observations, rewards and episode ends; the time limit is a
truncation, exact at ``max_steps``; resets are fresh. Each suite is compared
in one small compiled program; full Craftax's comparison is slow."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ondevice_rl import envs
from ondevice_rl.env.wrappers import AutoReset

B, T = 16, 12  # envs × steps compared per suite


def _suite(module: str):
    return pytest.importorskip(module)


def _before_first_end(done: np.ndarray) -> np.ndarray:
    """``[B, T]``: True up to and including each row's first end."""
    done = np.asarray(done)
    return np.cumsum(done, axis=1) - done == 0


def _same(ours, theirs, where: np.ndarray) -> None:
    """``ours`` and ``theirs`` (``[B, T, ...]``) equal wherever ``where``."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    mask = where.reshape(where.shape + (1,) * (ours.ndim - 2))
    np.testing.assert_array_equal(np.where(mask, ours, 0), np.where(mask, theirs, 0))


def _rollouts(one_env, seed: int = 0):
    """``jit(vmap(one_env))`` over ``B`` keys."""
    keys = jax.random.split(jax.random.key(seed), B)
    return jax.device_get(jax.jit(jax.vmap(one_env))(keys))


def test_names_are_the_suites_own():
    from ondevice_rl.envs.jumanji_adapter import JUMANJI_IDS, JUMANJI_LEFT_OUT
    from ondevice_rl.envs.navix_adapter import NAVIX_IDS
    from ondevice_rl.envs.pgx_adapter import PGX_IDS
    from ondevice_rl.envs.popgym_adapter import POPGYM_IDS
    from ondevice_rl.envs.xminigrid_adapter import MINIGRID_IDS, XLAND_IDS

    checks = {
        "navix": lambda m: set(m.registry()) == set(NAVIX_IDS),
        "xminigrid": lambda m: (
            set(m.registered_environments()) == {*MINIGRID_IDS, *XLAND_IDS}
        ),
        "jumanji": lambda m: (
            m.registered_environments() == {*JUMANJI_IDS, *JUMANJI_LEFT_OUT}
        ),
        "popgym_arcade.registration": lambda m: (
            set(m.REGISTERED_ENVIRONMENTS) == set(POPGYM_IDS)
        ),
        # The adapter refuses a game with more than one player.
        "pgx": lambda m: set(PGX_IDS) <= set(m.available_envs()),
    }
    for module, agrees in checks.items():
        try:
            suite = importlib.import_module(module)
        except ImportError:
            continue
        assert agrees(suite), module


def test_left_out_envs_say_why_in_one_line():
    for name in ("jumanji/JobShop-v0", "jumanji/Sokoban-v0"):
        with pytest.raises(KeyError) as e:
            envs.make(name)
        assert "left out" in str(e.value) and "\n" not in str(e.value)


def test_missing_suites_say_what_to_install_in_one_line():
    modules = ("craftax", "navix", "xminigrid", "jumanji", "popgym_arcade", "pgx")
    names = ("craftax/Craftax-Classic-Symbolic-v1", "navix/Navix-Empty-8x8-v0")
    names += ("xminigrid/MiniGrid-Empty-8x8", "jumanji/Maze-v0")
    names += ("popgym/CartPoleEasy", "pgx/2048")
    code = (
        f"import sys\nfor m in {modules!r}: sys.modules[m] = None\n"
        "from ondevice_rl import envs\n"
        f"for name in {names!r}:\n"
        "    try:\n        envs.make(name)\n"
        "    except KeyError as e:\n        print(e.args[0])\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    lines = run.stdout.strip().splitlines()
    assert len(lines) == len(names), run.stdout + run.stderr
    for line, extra in zip(
        lines[:4], ("craftax", "navix", "xminigrid", "jumanji"), strict=True
    ):
        assert line.endswith(f"is not installed: pip install 'ondevice_rl[{extra}]'")
    assert lines[4].endswith(
        "pip install 'ondevice_rl[popgym]' && pip install --no-deps "
        "popgym-arcade==0.0.7"
    )
    assert lines[5].endswith("pip install 'ondevice_rl[pgx]'")


def test_navix_matches_navix_step():
    nx = _suite("navix")
    limit = T
    ours, params = envs.make("navix/Navix-Empty-5x5-v0", max_steps=limit)
    theirs = nx.make("Navix-Empty-5x5-v0", max_steps=limit)

    def one_env(key):
        obs, state = ours.reset(key, params)
        timestep = theirs.reset(key)
        actions = jax.random.randint(jax.random.fold_in(key, 1), (T,), 0, 3)

        def body(carry, action):
            state, timestep = carry
            ts = ours.step(key, state, action, params)
            timestep = theirs.step(timestep, action)  # resets after an end
            out = (ts.obs, ts.reward, ts.terminated, ts.truncated)
            return (ts.state, timestep), out + (
                timestep.observation,
                timestep.reward,
                timestep.step_type,
            )

        _, steps = jax.lax.scan(body, (state, timestep), actions)
        return (obs, timestep.observation), steps

    (first, their_first), steps = _rollouts(one_env)
    obs, reward, terminated, truncated, their_obs, their_reward, step_type = steps
    np.testing.assert_array_equal(first, their_first)
    assert first.dtype == np.uint8 and first.shape == (B, 5, 5, 3)
    ends = _before_first_end(step_type > 0)
    _same(obs, their_obs, ends)
    _same(reward, their_reward, ends)
    _same(terminated, step_type == 2, ends)
    # At the limit: Navix says TRUNCATION; ours is truncated, not terminated.
    _same(truncated & ~terminated, step_type == 1, ends)
    assert terminated[ends].any() and truncated[:, limit - 1].any()
    assert not truncated[:, : limit - 1].any()
    # The observation is carried once: not again inside the suite's timestep.
    _, state = jax.eval_shape(ours.reset, jax.random.key(0), params)
    assert state.navix_timestep.observation.shape == (0,)


def test_xminigrid_matches_xminigrid_step():
    xminigrid = _suite("xminigrid")
    ours, params = envs.make("xminigrid/MiniGrid-Empty-5x5", max_steps=T)
    theirs, their_params = xminigrid.make("MiniGrid-Empty-5x5", max_steps=T)

    def one_env(key):
        obs, state = ours.reset(key, params)
        timestep = theirs.reset(their_params, key)
        actions = jax.random.randint(jax.random.fold_in(key, 1), (T,), 0, 3)

        def body(carry, action):
            state, timestep = carry
            ts = ours.step(key, state, action, params)
            timestep = theirs.step(their_params, timestep, action)
            out = (ts.obs, ts.reward, ts.terminated, ts.truncated)
            return (ts.state, timestep), out + (
                timestep.observation,
                timestep.reward,
                timestep.last(),
                timestep.discount,
            )

        _, steps = jax.lax.scan(body, (state, timestep), actions)
        return (obs, timestep.observation), steps

    (first, their_first), steps = _rollouts(one_env)
    obs, reward, terminated, truncated, their_obs, their_reward, last, discount = steps
    np.testing.assert_array_equal(first, their_first)
    assert first.dtype == np.uint8
    ends = _before_first_end(last)
    _same(obs, their_obs, ends)
    _same(reward, their_reward, ends)
    _same(terminated, last & (discount == 0), ends)
    _same(truncated & ~terminated, last & (discount == 1), ends)
    assert terminated[ends].any() and truncated[:, T - 1].any()
    _, state = jax.eval_shape(ours.reset, jax.random.key(0), params)
    assert state.xminigrid_timestep.observation.shape == (0,)


def test_xland_rulesets_are_unavailable_offline_in_one_line(tmp_path):
    _suite("xminigrid")
    missing = tmp_path / "no_such_benchmark"
    with pytest.raises(ValueError) as e:
        envs.make("xminigrid/XLand-MiniGrid-R1-9x9", benchmark_path=str(missing))
    message = str(e.value)
    assert "unavailable offline" in message and "\n" not in message


def test_xland_draws_a_ruleset_per_episode_from_a_benchmark_on_disk(tmp_path):
    xminigrid = _suite("xminigrid")
    from xminigrid.benchmarks import Benchmark, save_bz2_pickle
    from xminigrid.core.constants import TILES_REGISTRY, Colors, Tiles
    from xminigrid.core.goals import AgentHoldGoal, AgentNearGoal
    from xminigrid.core.rules import EmptyRule

    ball = TILES_REGISTRY[Tiles.BALL, Colors.RED]
    square = TILES_REGISTRY[Tiles.SQUARE, Colors.GREEN]
    goals = [AgentNearGoal(tile=ball).encode(), AgentHoldGoal(tile=square).encode()]
    rules = EmptyRule().encode()[None]
    benchmark = dict(
        goals=np.stack(goals),
        rules=np.stack([rules, rules]),
        init_tiles=np.stack([ball[None], square[None]]),
        num_rules=np.array([1, 1]),
    )
    save_bz2_pickle(benchmark, str(tmp_path / "two_rulesets"))
    name = "xminigrid/XLand-MiniGrid-R1-9x9"
    ours, params = envs.make(name, benchmark_path=str(tmp_path / "two_rulesets"))
    theirs, their_params = xminigrid.make("XLand-MiniGrid-R1-9x9")

    def one_env(key):
        obs, state = ours.reset(key, params)
        # The suite's reset, given the ruleset and the key the adapter drew.
        drawn = Benchmark(**benchmark).get_ruleset(
            jnp.argmax((params.benchmark.goals == state[0].state.goal_encoding).all(1))
        )
        reset_key = jax.random.split(key)[0]
        timestep = theirs.reset(their_params.replace(ruleset=drawn), reset_key)
        return obs, state[0].state.goal_encoding, timestep.observation

    obs, goal, their_obs = _rollouts(one_env)
    np.testing.assert_array_equal(obs, their_obs)
    assert {tuple(g) for g in goal} == {tuple(g) for g in np.stack(goals)}


def test_jumanji_matches_jumanji_step_and_resets_fresh():
    jumanji = _suite("jumanji")
    ours, params = envs.make("jumanji/Maze-v0", max_steps=T)
    theirs = jumanji.make("Maze-v0", time_limit=T)
    auto = AutoReset(ours)

    def one_env(key):
        obs, state = ours.reset(key, params)
        their_state, timestep = theirs.reset(key)

        def body(carry, key):
            state, auto_state, their_state, mask = carry
            action = jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf))
            ts = ours.step(key, state, action, params)
            again = auto.step(key, auto_state, action, params)
            their_state, timestep = theirs.step(their_state, action)
            o = timestep.observation
            out = (ts.obs, ts.reward, ts.terminated, ts.truncated, again.obs)
            out += (o.walls, o.agent_position.row, o.agent_position.col)
            out += (o.action_mask, timestep.reward, timestep.last(), timestep.discount)
            carry = (ts.state, again.state, their_state, o.action_mask)
            return carry, out

        keys = jax.random.split(jax.random.fold_in(key, 1), T + 1)
        carry = (state, state, their_state, timestep.observation.action_mask)
        _, steps = jax.lax.scan(body, carry, keys)
        return (obs, timestep.observation.walls), steps

    (first, their_walls), steps = _rollouts(one_env)
    obs, reward, terminated, truncated, auto_obs = steps[:5]
    walls, row, col, mask, their_reward, last, discount = steps[5:]
    np.testing.assert_array_equal(first["walls"], their_walls)
    ends = _before_first_end(last[:, :T])
    cut = (slice(None), slice(0, T))
    _same(obs["walls"][cut], walls[cut], ends)
    _same(obs["agent_position"]["row"][cut], row[cut], ends)
    _same(obs["agent_position"]["col"][cut], col[cut], ends)
    _same(obs["action_mask"][cut], mask[cut], ends)
    _same(reward[cut], their_reward[cut], ends)
    # Jumanji ends at its time limit as a termination (discount 0): ours is
    # a truncation there, and a termination only before it.
    _same((terminated | truncated)[cut], last[cut], ends)
    at_limit = ends[:, T - 1] & ~terminated[:, T - 1]
    assert at_limit.any() and (discount[at_limit, T - 1] == 0).all()
    assert truncated[at_limit, T - 1].all()
    # After each env's first episode, AutoReset's new maze is a fresh one.
    fresh = auto_obs["walls"][:, T]
    assert not (fresh == first["walls"]).all(axis=(1, 2)).any()


def test_jumanji_joint_actions_are_flattened():
    jumanji = _suite("jumanji")
    ours, params = envs.make("jumanji/Minesweeper-v0")
    theirs = jumanji.make("Minesweeper-v0")
    assert ours.action_space(params).n == 100
    assert ours.observation_space(params)["action_mask"].shape == (100,)

    def one_env(key):
        obs, state = ours.reset(key, params)
        their_state, timestep = theirs.reset(key)
        index = jax.random.randint(jax.random.fold_in(key, 1), (), 0, 100)
        ts = ours.step(key, state, index, params)
        their_action = jnp.stack([index // 10, index % 10])  # row, column
        _, after = theirs.step(their_state, their_action)
        ours_out = (obs, ts.obs["board"], ts.reward, ts.terminated)
        theirs_out = (timestep.observation.action_mask, after.observation.board)
        return ours_out + theirs_out + (after.reward, after.last())

    obs, board, reward, terminated, mask, their_board, their_reward, last = _rollouts(
        one_env
    )
    np.testing.assert_array_equal(obs["action_mask"], mask.reshape(B, 100))
    np.testing.assert_array_equal(board, their_board)
    np.testing.assert_array_equal(reward, their_reward)
    np.testing.assert_array_equal(terminated, last)


def _egocentric(walls: np.ndarray, agent, target) -> tuple[np.ndarray, np.ndarray]:
    """NumPy: ``walls`` ``[H, W]`` seen from ``agent`` in a ``[2H-1, 2W-1]``
    frame (outside: walls), and the target one-hot in it."""
    (h, w), (r, c), (tr, tc) = walls.shape, agent, target
    frame = np.ones((2 * h - 1, 2 * w - 1), bool)
    frame[h - 1 - r : 2 * h - 1 - r, w - 1 - c : 2 * w - 1 - c] = walls
    seen = np.zeros_like(frame)
    seen[tr - r + h - 1, tc - c + w - 1] = True
    return frame, seen


def test_jumanji_maze_egocentric_is_maze_seen_from_the_agent():
    jumanji = _suite("jumanji")
    ours, params = envs.make("jumanji/Maze-v0-egocentric", max_steps=T)
    theirs = jumanji.make("Maze-v0", time_limit=T)
    assert ours.unwrapped is ours and ours.name == "jumanji/Maze-v0-egocentric"
    space = ours.observation_space(params)
    assert space["walls"].shape == space["target"].shape == (19, 19)

    def one_env(key):
        obs, state = ours.reset(key, params)
        their_state, timestep = theirs.reset(key)

        def body(carry, key):
            state, their_state, mask = carry
            action = jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf))
            ts = ours.step(key, state, action, params)
            their_state, timestep = theirs.step(their_state, action)
            o = timestep.observation
            out = (ts.obs, ts.reward, ts.terminated | ts.truncated, o.walls)
            out += (o.agent_position, o.target_position, o.action_mask)
            out += (timestep.reward, timestep.last())
            return (ts.state, their_state, o.action_mask), out

        keys = jax.random.split(jax.random.fold_in(key, 1), T)
        carry = (state, their_state, timestep.observation.action_mask)
        return obs, jax.lax.scan(body, carry, keys)[1]

    first, steps = _rollouts(one_env)
    obs, reward, done, walls, agent, target, mask, their_reward, last = steps
    ends = _before_first_end(last)
    for b, t in zip(*np.nonzero(ends), strict=True):
        frame, seen = _egocentric(
            walls[b, t],
            (agent.row[b, t], agent.col[b, t]),
            (target.row[b, t], target.col[b, t]),
        )
        np.testing.assert_array_equal(obs["walls"][b, t], frame)
        np.testing.assert_array_equal(obs["target"][b, t], seen)
        assert not obs["walls"][b, t, 9, 9]  # the agent's own cell
    _same(obs["action_mask"], mask, ends)
    _same(reward, their_reward, ends)
    _same(done, last, ends)
    assert first["target"].sum(axis=(1, 2)).tolist() == [1] * B


def test_pgx_matches_pgx_step():
    pgx = _suite("pgx")
    limit = 6
    ours, params = envs.make("pgx/2048", max_steps=limit)
    theirs = pgx.make("2048")

    def one_env(key):
        obs, state = ours.reset(key, params)
        their_state = theirs.init(key)

        def body(carry, key):
            state, their_state = carry
            legal = their_state.legal_action_mask
            action = jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf))
            ts = ours.step(key, state, action, params)
            their_state = theirs.step(their_state, action, key)
            out = (ts.obs, ts.reward, ts.terminated, ts.truncated)
            out += (their_state.observation, their_state.legal_action_mask)
            out += (their_state.rewards[0], their_state.terminated)
            return (ts.state, their_state), out

        keys = jax.random.split(jax.random.fold_in(key, 1), limit)
        (state, _), steps = jax.lax.scan(body, (state, their_state), keys)
        return (obs, their_state.observation, state), steps

    (first, their_first, state), steps = _rollouts(one_env)
    assert state.pgx_state.observation.shape[-1] == 0  # kept once, beside
    obs, reward, terminated, truncated, their_obs, legal, their_reward, ended = steps
    np.testing.assert_array_equal(first["observation"], their_first)
    assert first["observation"].dtype == np.bool_
    np.testing.assert_array_equal(obs["observation"], their_obs)
    np.testing.assert_array_equal(obs["action_mask"], legal)
    np.testing.assert_array_equal(reward, their_reward)
    np.testing.assert_array_equal(terminated, ended)
    # 2048 has no time limit of its own: ours truncates at max_steps only.
    assert truncated[:, limit - 1].all() and not truncated[:, : limit - 1].any()
    assert reward.any()


def test_popgym_arcade_matches_step_env_at_its_time_limit():
    _suite("popgym_arcade")
    ours, params = envs.make("popgym/CartPoleEasy")
    # popgym-arcade's game, its ``is_terminated`` pointed at its
    # ``is_terminal`` (gymnax 1.0.1's ``discount`` needs it; see the adapter).
    theirs, their_params = ours.popgym_env, params.env_params
    limit = int(params.max_steps)
    assert limit == theirs.max_steps_in_episode == 200
    start, steps_taken = limit - 3, 4  # the limit falls on the third step

    def one_env(key):
        obs, state = ours.reset(key, params)
        # Far into the episode, in both counters.
        state = state._replace(
            time=jnp.int32(start), popgym_state=state[0].replace(time=start)
        )
        their_state = state[0]

        def body(carry, key):
            state, their_state = carry
            action = jax.random.randint(key, (), 0, 5)
            ts = ours.step(key, state, action, params)
            o, their_state, r, done, _ = theirs.step_env(
                key, their_state, action, their_params
            )
            return (ts.state, their_state), (ts.obs, ts.reward, ts.terminated) + (
                ts.truncated,
                o,
                r,
                done,
            )

        keys = jax.random.split(key, steps_taken)
        _, out = jax.lax.scan(body, (state, their_state), keys)
        return obs, out

    keys = jax.random.split(jax.random.key(0), 2)
    first, steps = jax.device_get(jax.jit(jax.vmap(one_env))(keys))
    obs, reward, terminated, truncated, their_obs, their_reward, done = steps
    assert first.dtype == np.uint8 and first.shape == (2, 128, 128, 3)
    np.testing.assert_array_equal(obs, their_obs)
    np.testing.assert_array_equal(reward, their_reward)
    # Ours truncates on the step that reaches the limit. popgym-arcade's
    # CartPole reads its limit (and the pole) on the state before the step,
    # so its one ``done`` comes a step later, and is no termination either.
    np.testing.assert_array_equal(truncated, [[False, False, True, True]] * 2)
    np.testing.assert_array_equal(done, [[False, False, False, True]] * 2)
    assert not terminated.any()


def _compare_with_craftax(craftax_id: str, limit: int) -> None:
    _suite("craftax")
    ours, params = envs.make(f"craftax/{craftax_id}")
    # Craftax's own non-resetting environment and its jitted API: op by op,
    # the adapter calls the same compiled reset and step.
    theirs, their_params = ours.craftax_env, params.env_params
    assert int(params.max_steps) == int(their_params.max_timesteps) == limit
    assert AutoReset(ours).costly_reset  # resets for the ended envs only
    key = jax.random.key(0)
    obs, state = ours.reset(key, params)
    their_obs, _ = theirs.reset(key, their_params)
    np.testing.assert_array_equal(obs, their_obs)
    assert obs.dtype == np.float32

    def compare(state, action, key):
        ts = ours.step(key, state, jnp.int32(action), params)
        o, _, r, done, _ = theirs.step(
            key, state.craftax_state, jnp.int32(action), their_params
        )
        np.testing.assert_array_equal(ts.obs, o)
        assert float(ts.reward) == float(r)
        assert bool(ts.terminated | ts.truncated) == bool(done)
        return ts

    for i, action in enumerate((5, 1, 2)):  # do, move left, move right
        ts = compare(state, action, jax.random.fold_in(key, i))
        assert not (ts.terminated or ts.truncated)
        state = ts.state
    # At the time limit, Craftax's one ``done`` is our truncation ...
    last = state._replace(
        time=jnp.int32(limit - 1),
        craftax_state=state.craftax_state.replace(timestep=jnp.int32(limit - 1)),
    )
    ts = compare(last, 0, key)
    assert bool(ts.truncated) and not bool(ts.terminated)
    # ... and dying is a termination, whenever it happens.
    health = state.craftax_state.player_health
    dying = state._replace(
        craftax_state=state.craftax_state.replace(player_health=health * 0 - 1)
    )
    ts = compare(dying, 0, key)
    assert bool(ts.terminated) and not bool(ts.truncated)


@pytest.mark.slow  # ~8 s: compiling Craftax's own step; the default suite builds
# the adapter's learner on its observations (test_recipes.py's
# test_suite_recipes_build_their_learner) and test_names_are_the_suites_own
# checks its names.
def test_craftax_classic_matches_craftax_step():
    _compare_with_craftax("Craftax-Classic-Symbolic-v1", 10_000)


@pytest.mark.slow
def test_craftax_matches_craftax_step():
    _compare_with_craftax("Craftax-Symbolic-v1", 100_000)


@pytest.mark.slow
def test_craftax_achievements_example(tmp_path):
    """docs/examples/craftax_achievements.py on a one-update run: the
    trained and the random policy's returns, lengths and 22 rates."""
    _suite("craftax")
    run = tmp_path / "run"
    cli = "import sys; from ondevice_rl.train.cli import main; sys.exit(main())"
    train = [sys.executable, "-c", cli, "train"]
    train += ["--recipe", "craftax_classic_symbolic_ppo", "--num-envs", "8"]
    train += ["--num-steps", "8", "--total-timesteps", "64", "--out", str(run)]
    subprocess.run(train + ["--no-progress"], check=True, capture_output=True)
    example = (
        Path(__file__).parents[1] / "docs" / "examples" / "craftax_achievements.py"
    )
    out = tmp_path / "rates.json"
    play = [sys.executable, str(example), str(run), "--episodes", "4"]
    subprocess.run(play + ["--json", str(out)], check=True, capture_output=True)
    figures = json.loads(out.read_text())
    for label in ("trained", "random"):
        rates = figures[label]["achievement_rates"]
        assert len(rates) == 22 and all(0 <= r <= 1 for r in rates.values())
        assert figures[label]["mean_length"] > 1


def test_bench_env_sets_a_suite_beside_its_own_auto_reset(monkeypatch):
    _suite("navix")
    from ondevice_rl.train.bench import env_speed

    monkeypatch.setattr(env_speed, "REPEATS", 1)  # one timed run per row
    name = "navix/Navix-Empty-5x5-v0"
    env = env_speed.run_env_bench((name,), (2,), True, True, lambda _: None)
    rows = {(r["env"], r["impl"]): r for r in env["results"]}
    ours, theirs = rows[name, "adapter"], rows[f"{name} (suite's auto-reset)", "suite"]
    assert ours["steps"] == theirs["steps"] == 512 and ours["sps"] > 0
    assert env["ratio_vs_suite"][name][2] == ours["sps"] / theirs["sps"]
    # 2 envs × 512 random steps, episodes of at most 100 steps on both sides.
    assert ours["episodes"] >= 10 and theirs["episodes"] >= 10


def test_bench_env_scans_shrink_for_costly_suites_down_to_a_floor():
    from ondevice_rl.train.bench import env_speed

    steps = env_speed.num_steps_for
    craftax = "craftax/Craftax-Classic-Symbolic-v1"
    # 2**21 / 128 env steps over the batch, 16384 / 128 steps at most, at
    # least MIN_SUITE_STEPS.
    assert steps(64, False, craftax) == 128
    assert steps(1024, False, craftax) == 16
    assert steps(4096, False, craftax) == env_speed.MIN_SUITE_STEPS == 4
    assert steps(4096, False, "CartPole-v1") == 512
    assert steps(1, False, "CartPole-v1") == 16384
