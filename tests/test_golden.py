"""Every learner's exact float32 metrics and final parameters on a tiny config.

Pinned so that a refactor which must not change the arithmetic cannot
change it unnoticed. A change to these numbers that is meant goes in a
commit of its own that says why, with the file rewritten by::

    python tests/test_golden.py --write

Results depend on the compiler's flags (the default suite's compile-speed
flags, ``suite_flags.py``, or XLA's defaults) and on the CPU XLA:CPU compiles
for: its vector instructions (AVX-512, AVX2 or AVX) and LLVM's model of the
chip, which differs by vendor (an AMD EPYC with AVX-512, LLVM's ``znver4``,
rounds PPO's ``approx_kl`` differently from an Intel Xeon with AVX-512): float32
sums are associated differently. So the file keeps one set per flag profile
(``suite`` or ``default``), instruction set and vendor; ``--write`` computes
both profiles on this machine, each in a subprocess with its own flags, and
keeps the other machines' sets. On a machine that has no set yet, the
metrics are compared with the nearest set of the same profile within float32
rounding (rtol 1e-4): still a change of the arithmetic's meaning fails, and
``--write`` there pins it bitwise.
"""

import hashlib
import json
import os
import pathlib
import platform
import subprocess
import sys

import numpy as np
import pytest
from suite_flags import SUITE_XLA_FLAGS

GOLDEN = pathlib.Path(__file__).with_name("golden_metrics.json")
SUITE = SUITE_XLA_FLAGS

#: SAC's and TD3's shared tiny replay config on a continuous env.
CONTINUOUS_REPLAY = dict(
    env="Pendulum-v1",
    num_envs=2,
    total_timesteps=40,
    buffer_size=32,
    batch_size=8,
    learning_starts=8,
    hidden=(16, 16),
)

#: One tiny config per learner, covering its switches that change the program.
CONFIGS = {
    "ppo": dict(
        num_envs=4,
        num_steps=8,
        update_epochs=2,
        num_minibatches=2,
        total_timesteps=96,
        hidden=(16, 16),
        normalize_obs=True,
        normalize_rewards=True,
    ),
    "a2c": dict(num_envs=4, num_steps=5, total_timesteps=60, hidden=(16, 16)),
    "dqn": dict(
        num_envs=2,
        total_timesteps=40,
        buffer_size=32,
        batch_size=8,
        learning_starts=8,
        target_update_every=10,
        exploration_steps=20,
        double_dqn=True,
        n_step=2,
        hidden=(16, 16),
    ),
    "pqn": dict(
        exploration_steps=16,
        num_envs=4,
        num_steps=4,
        update_epochs=2,
        num_minibatches=2,
        total_timesteps=64,
        hidden=(16, 16),
    ),
    "sac": dict(CONTINUOUS_REPLAY, n_step=2),
    "td3": CONTINUOUS_REPLAY,
    "ppo_gru": dict(
        env="CartPole-NoVel-v1",
        num_envs=4,
        num_steps=8,
        update_epochs=2,
        num_minibatches=2,
        total_timesteps=64,
        hidden=(16,),
        memory="gru",
        memory_size=8,
    ),
}


def _learner(name: str) -> str:
    """The registered learner a pinned config runs (``ppo_gru`` → ``ppo``)."""
    return name.split("_")[0]


def _cpu() -> str:
    """The widest x86 vector extension this CPU has (what XLA:CPU targets) and
    its vendor, else the machine's architecture."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()

    def field(name: str) -> str:
        line = next((ln for ln in text.splitlines() if ln.startswith(name)), "")
        return line.partition(":")[2].strip()

    flags = set(field("flags").split())
    isa = next((f for f in ("avx512f", "avx2", "avx") if f in flags), None)
    vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(field("vendor_id"))
    return f"{isa} {vendor or 'x86'}" if isa else platform.machine()


def _profile() -> str:
    flags = os.environ.get("XLA_FLAGS", "").split()
    profile = "suite" if all(f in flags for f in SUITE.split()) else "default"
    return f"{profile} {_cpu()}"


def _golden() -> tuple[dict, bool]:
    """This machine's pins and whether they are its own (else the pins of
    another machine at the same optimisation level, one with the same
    instruction set first)."""
    table = json.loads(GOLDEN.read_text())
    profile = _profile()
    if profile in table:
        return table[profile], True
    level, isa = profile.split()[:2]
    same_level = [k for k in sorted(table) if k.split()[0] == level]
    same_isa = [k for k in same_level if k.split()[1] == isa]
    return table[(same_isa or same_level)[0]], False


def _digest(algo: str) -> dict:
    import jax

    from ondevice_rl.train import get_algorithm

    record = get_algorithm(_learner(algo))
    config = record.config(**CONFIGS[algo])
    out = jax.jit(record.make_train(config))(jax.random.PRNGKey(7), config.hyperparams)
    metrics = {
        name: np.asarray(value, np.float32).tobytes().hex()
        for name, value in sorted(out.metrics.items())
    }
    params = hashlib.sha256()
    for leaf in jax.tree.leaves(out.state.params):
        params.update(np.asarray(leaf).tobytes())
    return {"metrics": metrics, "params_sha256": params.hexdigest()}


@pytest.mark.parametrize("algo", sorted(CONFIGS))
def test_metrics_and_params_are_bitwise_pinned(algo):
    pins, own = _golden()
    golden = pins[algo]
    got = _digest(algo)
    assert sorted(got["metrics"]) == sorted(golden["metrics"])
    for name, hexed in golden["metrics"].items():
        expected = np.frombuffer(bytes.fromhex(hexed), np.float32)
        actual = np.frombuffer(bytes.fromhex(got["metrics"][name]), np.float32)
        if own:
            np.testing.assert_array_equal(actual, expected, err_msg=f"{algo} {name}")
        else:
            np.testing.assert_allclose(
                actual, expected, rtol=1e-4, atol=1e-6, err_msg=f"{algo} {name}"
            )
    if own:
        assert got["params_sha256"] == golden["params_sha256"]


def _write() -> None:
    table = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    for level, extra in (("suite", SUITE), ("default", "")):
        flags = " ".join(
            f for f in os.environ.get("XLA_FLAGS", "").split() if f not in SUITE.split()
        )
        env = dict(os.environ, XLA_FLAGS=f"{flags} {extra}", JAX_PLATFORMS="cpu")
        code = (
            "import json, sys; sys.path.insert(0, 'tests'); import test_golden; "
            "print(json.dumps({a: test_golden._digest(a) "
            "for a in test_golden.CONFIGS}))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, check=True, capture_output=True
        )
        digests = json.loads(out.stdout.decode().strip().splitlines()[-1])
        table[f"{level} {_cpu()}"] = digests
    GOLDEN.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_golden.py --write")
    _write()
