"""Subprocess worker of tests/test_sharding.py (not collected: not test_*.py).

Usage::

    python tests/sharding_worker.py single OUT.npz
    python tests/sharding_worker.py multihost OUT.npz PORT NUM_PROCESSES ID
    python tests/sharding_worker.py dp-learn OUT.npz
    python tests/sharding_worker.py dp-segments OUT.npz

The parent sets ``JAX_PLATFORMS=cpu`` and ``XLA_FLAGS`` (``single`` expects
``--xla_force_host_platform_device_count=4``; each ``multihost`` process has
one CPU device and joins a loopback multi-controller run). Programs are
compiled with XLA's backend optimisation off: these sizes are tiny and
compiling dominates. Arrays are saved as ``<tag>/<name>`` by process 0:

* ``single``: ``pop4``/``pop2``/``pop1`` the same sweep over 4, 2, 1 devices,
  ``pop2-again1..3`` 3 more runs of the 2-device program (``compiles/pop2``:
  the programs built for all 4);
  ``dp2`` data-parallel PPO over 2 devices; ``dp1`` over 1 device and ``ref``
  ``make_train``; ``grad`` one data-parallel minibatch step vs. averaging the
  per-shard gradients by hand; and ``ondevice-rl train --devices all``
  (over the 4): ``cli/`` the CLI run's status, files, ``config.json`` and
  ``metrics.jsonl`` (with periodic evaluation); ``eval/`` ``ondevice-rl
  eval`` of the CLI run; ``refused/<i>`` the status, stderr and compile
  count of each of ``REFUSED``'s command lines.
* ``multihost``: ``pop2`` and ``dp2`` over the devices of all processes.
* ``dp-learn``: ``learn`` data-parallel CartPole over every device (100k
  steps, fully optimised; about 10 s).
* ``dp-segments`` (2 devices): the CLI run's Python twin,
  ``train_from_config(devices=2)``: ``seg`` a segmented run's rows and
  ``whole`` the one-shot program's metrics; ``resumed`` a run stopped
  after the first of two segments (``stopped``) and resumed, and
  ``straight`` the run without the stop (both with the segmented run's
  program).
"""

import contextlib
import io
import sys
import tempfile
from pathlib import Path

import numpy as np
from suite_flags import FAST

import ondevice_rl  # noqa: F401  (XLA CPU flags before JAX starts)
from ondevice_rl.devices import distributed

TINY = dict(
    total_timesteps=4 * 8 * 4,
    num_envs=4,
    num_steps=8,
    update_epochs=1,
    num_minibatches=2,
    hidden=(8,),
)


def _compile(fn, *args):
    import jax

    return jax.jit(fn).lower(*args).compile(compiler_options=FAST)


def population(save, tag, mesh=None, cache=None):
    """The sweep over ``mesh``, its programs from ``cache`` (a new one if
    None); returns the cache."""
    from ondevice_rl.train.ppo import PPOConfig
    from ondevice_rl.train.sweep import ProgramCache, run_sweep

    cache = cache or ProgramCache(compiler_options=FAST)
    result = run_sweep(
        PPOConfig(**TINY),
        seeds=3,
        search={"learning_rate": [1e-3, 1e-2]},
        env_params={"length": [0.5]},
        mesh=mesh,
        cache=cache,
    )
    for m in result.plan.members:
        for name, values in result.metrics[m.index].items():
            save[f"{tag}/{m.index}/{name}"] = values
    save[f"chunks/{tag}"] = np.int64(result.groups[0].chunk_size)
    return cache


def _save_train(save, tag, out):
    import jax

    from ondevice_rl.devices.sharding import to_host

    for name, values in to_host(out.metrics).items():
        save[f"{tag}/{name}"] = values
    for i, leaf in enumerate(jax.tree.leaves(out.state.params)):
        local = [np.asarray(s.data) for s in leaf.addressable_shards]
        replicated = all(np.array_equal(local[0], x) for x in local)
        save[f"{tag}/replicated{i}"] = np.bool_(replicated)
        save[f"{tag}/param{i}"] = local[0]


def data_parallel(save, tag, mesh=None):
    """Data-parallel PPO; host inputs, so the same call works on many hosts."""
    import jax

    from ondevice_rl.train.ppo import PPOConfig
    from ondevice_rl.train.ppo.data_parallel import make_train_dp

    config = PPOConfig(**TINY)
    train = make_train_dp(config, mesh)
    hp = jax.tree.map(np.asarray, config.hyperparams)
    seed = np.int32(0)
    compiled = _compile(lambda s, hp: train(jax.random.key(s), hp), seed, hp)
    _save_train(save, tag, compiled(seed, hp))


def single_device_ppo(save, tag):
    import jax

    from ondevice_rl.train.ppo import PPOConfig, make_train

    config = PPOConfig(**TINY)
    train = make_train(config)
    hp, seed = config.hyperparams, np.int32(0)
    compiled = _compile(lambda s, hp: train(jax.random.key(s), hp), seed, hp)
    _save_train(save, tag, compiled(seed, hp))


def gradient_average(save, mesh):
    """One data-parallel ``Trainer.learn`` step (1 epoch, 1 minibatch) on the
    mesh vs. per-shard GAE and gradients averaged by hand."""
    import jax
    import jax.numpy as jnp
    import optax
    from jax.flatten_util import ravel_pytree
    from jax.sharding import PartitionSpec as P

    from ondevice_rl.nn.networks import ActorCritic
    from ondevice_rl.returns import gae
    from ondevice_rl.rollout import Transition
    from ondevice_rl.train.kit.on_policy import on_policy_learn
    from ondevice_rl.train.kit.schedules import learning_rate_fn
    from ondevice_rl.train.ppo import (
        ActorExtras,
        Minibatch,
        PPOConfig,
        make_learner,
        make_trainer,
        ppo_loss,
    )

    devices, axis = mesh.devices.size, mesh.axis_names[0]
    T, B = 4, 2 * devices
    config = PPOConfig(
        num_envs=B,
        num_steps=T,
        update_epochs=1,
        num_minibatches=1,
        total_timesteps=T * B,
        hidden=(8,),
    )
    hp = config.hyperparams
    trainer = make_trainer(config, axis, devices)
    net = trainer.network
    params = net.init(jax.random.key(1), np.zeros(4, np.float32))
    rng = np.random.default_rng(2)

    def normal(*shape):
        return rng.normal(size=shape).astype(np.float32)

    traj = Transition(
        obs=normal(T, B, 4),
        action=rng.integers(0, 2, (T, B)).astype(np.int32),
        reward=normal(T, B),
        terminated=rng.random((T, B)) < 0.2,
        truncated=rng.random((T, B)) < 0.2,
        final_obs=normal(T, B, 4),
        extras=ActorExtras(
            log_prob=-rng.uniform(size=(T, B)).astype(np.float32), value=None
        ),
    )
    lr = learning_rate_fn("linear", hp.learning_rate, config.num_updates, 1)
    tx = optax.chain(
        optax.clip_by_global_norm(hp.max_grad_norm), optax.adam(lr, eps=1e-5)
    )  # PPO's optimiser
    opt_state = tx.init(ravel_pytree(params)[0])
    key = jax.random.key(3)

    learn = on_policy_learn(config, make_learner(config, trainer.setup), axis, devices)

    def step(params, opt_state, traj):
        return learn(params, opt_state, traj, key, hp)[0]

    traj_spec = jax.tree.map(lambda _: P(None, axis), traj)
    sharded = jax.shard_map(
        step, mesh=mesh, in_specs=(P(), P(), traj_spec), out_specs=P()
    )
    new_params = _compile(sharded, params, opt_state, traj)(params, opt_state, traj)

    def shard_grad(params, part):
        values = net.apply(params, part.obs, method=ActorCritic.value)
        next_values = net.apply(params, part.final_obs, method=ActorCritic.value)
        adv, targets = gae(
            part.reward,
            values,
            next_values,
            part.terminated,
            part.truncated,
            hp.gamma,
            hp.gae_lambda,
        )
        extras = part.extras
        batch = Minibatch(part.obs, part.action, extras.log_prob, values, adv, targets)
        batch = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), batch)
        return jax.grad(ppo_loss, argnums=1, has_aux=True)(
            net.apply, params, batch, hp
        )[0]

    def by_hand(params, opt_state, traj):
        """Per-shard gradients on one device, averaged, one optimiser step."""
        parts = jax.tree.map(
            lambda x: jnp.moveaxis(x.reshape((T, devices, -1) + x.shape[2:]), 1, 0),
            traj,
        )
        grads = jax.vmap(lambda part: shard_grad(params, part))(parts)
        mean = jax.tree.map(lambda g: g.mean(0), grads)
        flat_mean, unravel = ravel_pytree(mean)
        updates, _ = tx.update(flat_mean, opt_state, ravel_pytree(params)[0])
        updates = unravel(updates)
        spread = jnp.max(
            jnp.stack(
                jax.tree.leaves(jax.tree.map(lambda g: jnp.ptp(g, 0).max(), grads))
            )
        )
        return jax.tree.map(lambda p, u: p + u, params, updates), updates, spread

    expected, updates, spread = _compile(by_hand, params, opt_state, traj)(
        params, opt_state, traj
    )
    pairs = zip(jax.tree.leaves(new_params), jax.tree.leaves(expected), strict=True)
    save["grad/max_abs_err"] = np.float64(
        max(float(jnp.abs(a - b).max()) for a, b in pairs)
    )
    save["grad/update_size"] = np.float64(
        max(float(jnp.abs(u).max()) for u in jax.tree.leaves(updates))
    )
    # The shards' gradients differ, so averaging is not a no-op.
    save["grad/shard_difference"] = np.float64(spread)


def learn(save, mesh):
    """Data-parallel CartPole on ``mesh``, fully optimised (about 10 s)."""
    import jax

    from ondevice_rl.train.ppo import PPOConfig
    from ondevice_rl.train.ppo.data_parallel import make_train_dp

    config = PPOConfig(total_timesteps=100_000, num_envs=8, num_steps=64)
    out = jax.jit(make_train_dp(config, mesh))(jax.random.key(0), config.hyperparams)
    save["learn/episode_return"] = np.asarray(out.metrics["episode_return"])


#: ``TINY`` as ``ondevice-rl train`` flags.
TINY_FLAGS = [
    "--total-timesteps", "128", "--num-envs", "4", "--num-steps", "8",
    "--update-epochs", "1", "--num-minibatches", "2", "--hidden", "8",
]  # fmt: skip
#: Data-parallel runs refused before anything compiles (with 4 devices).
REFUSED = [
    ["--devices", "2", "--num-envs", "3"],
    ["--devices", "2", "--num-minibatches", "32"],
    ["--devices", "2", "--normalize-obs"],
    ["--devices", "5"],
]


def _cli(argv: list[str]) -> tuple[int, str]:
    """``ondevice-rl ARGV`` in this process: its status and stderr."""
    from ondevice_rl.train.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    return status, err.getvalue()


def data_parallel_cli(save, root: Path):
    """``ondevice-rl train --devices``, its evaluation and its refusals."""
    from ondevice_rl.train.services.programs import PROGRAMS

    out = root / "cli"
    status, err = _cli(["train", "--devices", "all", *TINY_FLAGS, "--segments",
                        "2", "--eval-every", "2", "--eval-episodes", "2",
                        "--out", str(out), "--no-progress"])  # fmt: skip
    save["cli/status"], save["cli/stderr"] = np.int64(status), np.str_(err)
    save["cli/files"] = np.str_(" ".join(sorted(p.name for p in out.iterdir())))
    save["cli/config"] = np.str_((out / "config.json").read_text())
    save["cli/metrics"] = np.str_((out / "metrics.jsonl").read_text())
    status, err = _cli(["eval", str(out), "--episodes", "4"])
    save["eval/status"], save["eval/stderr"] = np.int64(status), np.str_(err)
    save["eval/files"] = np.str_(" ".join(sorted(p.name for p in out.iterdir())))
    for i, argv in enumerate(REFUSED):
        compiles = PROGRAMS.compiles
        status, err = _cli(["train", *TINY_FLAGS, *argv, "--no-progress",
                            "--out", str(root / f"refused-{i}")])  # fmt: skip
        save[f"refused/{i}/status"], save[f"refused/{i}/stderr"] = (
            np.int64(status),
            np.str_(err),
        )
        save[f"refused/{i}/compiles"] = np.int64(PROGRAMS.compiles - compiles)
        save[f"refused/{i}/made"] = np.bool_((root / f"refused-{i}").exists())


def data_parallel_segments(save, root: Path):
    """``train_from_config(devices=2)``: segmented, one-shot, stopped and
    resumed."""
    import jax
    from suite_flags import PRODUCT_EMITTERS, product_emitters

    from ondevice_rl.train.ppo import PPOConfig
    from ondevice_rl.train.ppo.data_parallel import make_train_dp
    from ondevice_rl.train.run.runner import resume_training, train_from_config

    config = PPOConfig(**TINY)
    with product_emitters():
        seg = train_from_config(config, devices=2, num_segments=2, progress=False)
    for name, values in seg.metrics.items():
        save[f"seg/{name}"] = values
    key, hp = jax.random.key(0), config.hyperparams
    lowered = jax.jit(make_train_dp(config)).lower(key, hp)
    whole = lowered.compile(compiler_options=PRODUCT_EMITTERS)(key, hp)
    for name, values in whole.metrics.items():
        save[f"whole/{name}"] = np.asarray(values)

    def stop_after_two_updates(done, steps, latest):  # the first segment's
        if done == 2:
            raise KeyboardInterrupt

    # The segmented run's program again (its segments, its compiler options):
    # straight, stopped after its first segment and resumed, no new compile.
    run = dict(devices=2, num_segments=2, checkpoint_every=1, progress=False)
    stopped = root / "stopped"
    with product_emitters():
        straight = train_from_config(config, **run)
        first = train_from_config(
            config, out_dir=stopped, on_segment=stop_after_two_updates, **run
        )
        resumed = resume_training(stopped, progress=False)
    save["stopped/updates"] = np.int64(first.env_steps // config.batch_size)
    for name, values in resumed.metrics.items():
        save[f"resumed/{name}"] = values
        save[f"straight/{name}"] = straight.metrics[name]


def main(argv: list[str]) -> int:
    mode, out = argv[0], argv[1]
    if mode == "multihost":
        port, num, pid = argv[2:5]
        distributed.initialize_from_env(
            f"127.0.0.1:{port}", int(num), int(pid), timeout_s=120
        )
    import jax

    from ondevice_rl.devices.sharding import DATA_AXIS, make_mesh

    save = {
        "device_count": np.int64(jax.device_count()),
        "process_count": np.int64(jax.process_count()),
    }
    if mode == "single":
        devices = jax.devices()
        population(save, "pop4")
        # Two devices executing the program again and again: the run the
        # scheduler flag keeps from deadlocking (ondevice_rl/cpu/flags.py).
        two = make_mesh(devices=devices[:2])
        cache = population(save, "pop2", two)
        for i in range(1, 4):
            population(save, f"pop2-again{i}", two, cache)
        save["compiles/pop2"] = np.int64(cache.compiles)
        population(save, "pop1", make_mesh(devices=devices[:1]))
        data_parallel(save, "dp2", make_mesh(DATA_AXIS, devices[:2]))
        data_parallel(save, "dp1", make_mesh(DATA_AXIS, devices[:1]))
        single_device_ppo(save, "ref")
        gradient_average(save, make_mesh(DATA_AXIS, devices[:2]))
        with tempfile.TemporaryDirectory() as root:
            data_parallel_cli(save, Path(root))
    elif mode == "multihost":
        population(save, "pop2")
        data_parallel(save, "dp2")
    elif mode == "dp-learn":
        learn(save, make_mesh(DATA_AXIS))
    elif mode == "dp-segments":
        with tempfile.TemporaryDirectory() as root:
            data_parallel_segments(save, Path(root))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    if jax.process_index() == 0:
        np.savez(out, **save)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
