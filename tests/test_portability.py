"""Every registered learner's whole-run program is GPU- and TPU-ready, checked
on this CPU-only machine, and the memory rule sizes it.

* Lowered for ``cuda`` and for ``tpu`` (``jax.export``, one platform at a
  time), at one seed and vmapped over seeds (the recurrent and image
  configs vmapped only), the program holds no host callback,
  infeed/outfeed or send/recv; none of the CPU-only constructs
  (``dense_matmul``'s optimisation barrier, the im2col image torso — it is a
  ``stablehlo.convolution`` there —, a per-member loop around the vmapped
  init, the one-operand sort of the minibatch order); and every
  ``dot_general`` and convolution at the config's matmul precision. A
  learner that cannot be lowered for a platform is listed in ``UNPORTABLE``
  with the reason, an expected failure.
* The memory rule's estimate of one run is at least what XLA's own
  ``memory_analysis()`` of the compiled CPU program says it holds
  (arguments + outputs + scratch: everything on the device while it runs)
  and at most twice that.

Lowering does not compile: the export checks cost a trace each.
"""

import json
import re

import jax
import pytest

from ondevice_rl.cpu.permutation import permutation
from ondevice_rl.train import algorithms, get_algorithm
from ondevice_rl.train.bench.transfers import host_ops
from ondevice_rl.train.services.memory import estimate_member_bytes

TINY = dict(num_envs=2, total_timesteps=16, hidden=(8,))
ON_POLICY = dict(TINY, num_steps=4)
REPLAY = dict(TINY, total_timesteps=8, buffer_size=16, batch_size=4)
REPLAY = dict(REPLAY, learning_starts=4)
#: name -> (learner, config fields): every learner, one with memory, one
#: with image observations.
CONFIGS = {
    "ppo": ("ppo", dict(ON_POLICY, update_epochs=1, num_minibatches=1)),
    "a2c": ("a2c", ON_POLICY),
    "dqn": ("dqn", REPLAY),
    "pqn": ("pqn", dict(ON_POLICY, num_minibatches=1)),
    "sac": ("sac", REPLAY),
    "td3": ("td3", REPLAY),
    "ppo-gru": ("ppo", dict(ON_POLICY, num_minibatches=1, memory="gru", memory_size=8)),
    "dqn-minatar": ("dqn", dict(REPLAY, env="gymnax/Breakout-MinAtar")),
}
PLATFORMS = ("cuda", "tpu")
SEEDS = 3  # the vmapped programs' population
#: ``(config name, platform) -> why`` for programs that cannot be lowered
#: there (none today); each is an expected failure, so a fix shows up.
UNPORTABLE: dict[tuple[str, str], str] = {}


def test_every_learner_is_covered():
    assert {algo for algo, _ in CONFIGS.values()} == set(algorithms())


def _config(name):
    algo, fields = CONFIGS[name]
    return get_algorithm(algo).config(**fields)


_JITTED: dict = {}


def _program(name: str, seeds: int | None):
    """``(jit(train), example arguments)``: one run, or ``seeds`` vmapped;
    one jitted function per program, so its trace serves every platform."""
    if (name, seeds) not in _JITTED:
        config = _config(name)
        train = get_algorithm(CONFIGS[name][0]).make_train(config)
        key = jax.random.key(0)
        if seeds is None:
            _JITTED[name, seeds] = jax.jit(train), (key, config.hyperparams)
        else:
            batched = jax.jit(jax.vmap(train, in_axes=(0, None)))
            keys = jax.random.split(key, seeds)
            _JITTED[name, seeds] = batched, (keys, config.hyperparams)
    return _JITTED[name, seeds]


def lowered_text(name: str, seeds: int | None, platform: str) -> str:
    """The StableHLO module exported for ``platform``."""
    fn, args = _program(name, seeds)
    return jax.export.export(fn, platforms=[platform])(*args).mlir_module()


#: TPU cases in the default suite: one on-policy learner and the image torso.
#: The other learners' TPU programs take the same non-CPU branches as their
#: CUDA case (every CUDA case is in the default suite), so they run under slow.
DEFAULT_TPU = ("ppo", "dqn-minatar")


def _cases():
    for name in CONFIGS:
        for platform in PLATFORMS:
            reason = UNPORTABLE.get((name, platform))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            if platform == "tpu" and name not in DEFAULT_TPU:
                marks.append(pytest.mark.slow)  # covered by f"{name}-cuda"
            yield pytest.param(name, platform, marks=marks, id=f"{name}-{platform}")


def _precisions(text: str, op: str) -> list[str]:
    """The precision attribute of every ``op`` in ``text`` ('' if unset)."""
    found = []
    for line in text.splitlines():
        if re.search(rf"stablehlo\.{op}\b", line):
            match = re.search(r"precision(?:_config)? = \[([^\]]*)\]", line)
            names = match.group(1) if match else ""
            found.append(re.sub(r"#stablehlo<precision (\w+)>", r"\1", names))
    return found


def _sort_operand_counts(text: str) -> list[int]:
    """How many arrays each ``stablehlo.sort`` in ``text`` sorts together."""
    sorts = re.findall(r'"stablehlo\.sort"\(([^)]*)\)', text)
    return [len(operands.split(",")) for operands in sorts]


@pytest.mark.parametrize("platform", ["cpu", *PLATFORMS])
def test_minibatch_order_is_chosen_per_platform(platform):
    # CPU: one sort of one uint32 key per sample, the index in its low bits;
    # elsewhere jax.random.permutation's sort of (key, index) pairs.
    fn = jax.jit(lambda key: permutation(key, 16))
    text = jax.export.export(fn, platforms=[platform])(jax.random.key(0))
    counts = _sort_operand_counts(text.mlir_module())
    assert counts == ([1] if platform == "cpu" else [2])


@pytest.mark.parametrize("name, platform", list(_cases()))
def test_whole_run_lowers_for_the_platform_without_cpu_tuning(name, platform):
    population = lowered_text(name, SEEDS, platform)
    texts = [population]
    if name in algorithms():  # the learners' plain configs: one run too
        single = lowered_text(name, None, platform)
        texts.append(single)
        # On CPU the vmapped init loops over the members (one QR each); here
        # it is batched: the population has the one-run program's loops.
        assert population.count("stablehlo.while") == single.count("stablehlo.while")
    for text in texts:
        assert host_ops(text) == []
        assert "stablehlo.optimization_barrier" not in text
        assert 1 not in _sort_operand_counts(text)
        dots = _precisions(text, "dot_general")
        assert dots and set(dots) == {"HIGHEST, HIGHEST"}
        convolutions = _precisions(text, "convolution")
        assert set(convolutions) <= {"HIGHEST, HIGHEST"}
        if name.endswith("minatar"):
            assert len(convolutions) >= 2  # the torso and its kernel's gradient
        else:
            assert not convolutions


def test_matmul_precision_is_the_configs_and_the_cpu_program_ignores_it():
    jitted = {}  # one jitted function per precision: one trace, every platform

    def exported(precision, platform):
        config = _config("ppo").replace(matmul_precision=precision)
        if config == _config("ppo"):  # the config's own: the whole-run program
            jitted[precision] = _program("ppo", None)
        elif precision not in jitted:
            train = jax.jit(get_algorithm("ppo").make_train(config))
            jitted[precision] = train, (jax.random.key(0), config.hyperparams)
        train, args = jitted[precision]
        return jax.export.export(train, platforms=[platform])(*args).mlir_module()

    assert set(_precisions(exported("high", "cuda"), "dot_general")) == {"HIGH, HIGH"}
    assert set(_precisions(exported("default", "cuda"), "dot_general")) == {""}

    def without_precision(text):
        text = re.sub(r", precision = \[[^\]]*\]", "", text)
        return re.sub(r"loc\(.*?\)|#loc\d*", "", text)

    cpu = {p: without_precision(exported(p, "cpu")) for p in ("highest", "default")}
    assert cpu["highest"] == cpu["default"]


def test_peak_bytes_by_hand():
    import jax.numpy as jnp

    from ondevice_rl.train.services.program_bytes import peak_bytes

    def peak(fn, x):
        return peak_bytes(jax.make_jaxpr(fn)(x))

    vector = jnp.zeros((1024,), jnp.float32)  # 4 KiB, like every array below
    # Elementwise work fused into its reduction: only the scalar is stored
    # (one 64-byte aligned slot) beside the argument.
    assert peak(lambda x: jnp.sum(jnp.exp(x) * 2), vector) == 4096 + 64
    # A matmul's result is stored: the argument, m @ m, then the result.
    assert peak(lambda m: (m @ m) @ m, jnp.zeros((32, 32))) == 3 * 4096

    def doubled_then_filled(x):  # the loop writes into the doubled buffer
        x = 2 * x
        return jax.lax.fori_loop(0, 8, lambda i, b: b.at[i].set(1.0), x)

    assert 2 * 4096 < peak(doubled_then_filled, vector) < 3 * 4096


def test_scan_operand_groups_on_both_jax_scan_signatures():
    from ondevice_rl.train.services.program_bytes import _scan_counts

    table = jax.numpy.arange(3.0)  # a constant the body closes over

    def body(carry, x):
        a, b = carry
        return (a + table[0], b * x), a

    jaxpr = jax.make_jaxpr(lambda c, xs: jax.lax.scan(body, c, xs))((1.0, 2.0), table)
    [scan] = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    assert _scan_counts(scan.params, len(scan.invars)) == (1, 2)

    class Packed:  # later JAX: the operands' groups as a flat tree, ft_in
        def update(self, operands):
            return _Groups(operands)

    class _Groups:
        def __init__(self, operands):
            self.operands = operands

        def unpack(self):
            ops = self.operands
            return ops[:2], ops[2:5], ops[5:]

    assert _scan_counts({"ft_in": Packed(), "length": 4}, 7) == (2, 3)


def _xla_bytes(compiled) -> int:
    """What a compiled program holds on the device while it runs: its
    arguments, its outputs and XLA's scratch allocation, less buffers an
    output shares with a donated argument."""
    stats = compiled.memory_analysis()
    return (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        - stats.alias_size_in_bytes
    )


# One on-policy and one off-policy learner in the default suite; the rule is
# the kit's, so the others share its code (all of them under slow).
_SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "name",
    [
        "ppo",
        pytest.param("a2c", marks=_SLOW),
        "dqn",
        pytest.param("pqn", marks=_SLOW),
        pytest.param("sac", marks=_SLOW),
        pytest.param("td3", marks=_SLOW),
    ],
)
def test_memory_rule_is_at_least_xla_and_at_most_twice(name):
    fn, args = _program(name, None)
    actual = _xla_bytes(fn.lower(*args).compile())
    assert actual <= estimate_member_bytes(_config(name)) <= 2 * actual


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ppo-gru", "dqn-minatar"])
def test_memory_rule_holds_for_carries_and_images(name):
    test_memory_rule_is_at_least_xla_and_at_most_twice(name)


def test_a_member_that_cannot_fit_is_refused_in_one_line_before_it_compiles():
    from ondevice_rl.train.services.programs import ProgramCache
    from ondevice_rl.train.sweep import run_sweep

    config = _config("ppo")
    small = estimate_member_bytes(config) - 1
    cache = ProgramCache()
    with pytest.raises(ValueError, match="one member needs about") as err:
        run_sweep(config, seeds=2, memory_budget_bytes=small, cache=cache)
    assert "\n" not in str(err.value) and cache.compiles == 0


def test_config_json_records_the_precision_with_the_jax_version(tmp_path):
    from ondevice_rl.train.run.run_spec import RunSpec

    config = _config("ppo").replace(matmul_precision="high")
    stored = RunSpec.create(config).to_json()
    assert stored["config"]["matmul_precision"] == "high"
    assert stored["jax"]["version"] == jax.__version__
    path = tmp_path / "config.json"
    path.write_text(json.dumps(stored))
    assert RunSpec.load(path).config == config  # a resume keeps the precision
