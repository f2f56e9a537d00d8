"""A trained policy as one file that JAX alone runs: ``jax.export``.

``export_policy(run_dir, out)`` serializes the deterministic policy of a
run's newest checkpoint that verifies (the loader ``load_policy`` uses) as a
``jax.export`` artifact: the network's parameters and any observation
statistics are closed over as constants, so the file holds the whole policy
as StableHLO. It is lowered for CPU, CUDA, ROCm and TPU by default, with a
symbolic batch dimension ``b``. Loading it needs ``jax`` (with
``flatbuffers``, which jax's deserializer imports), not this package:

    exported = jax.export.deserialize(open("policy.bin", "rb").read())
    action = exported.call(obs)  # obs [B, *obs_shape] float32

* feed-forward policies: ``call(obs [B, *obs_shape]) -> action``, ``obs``
  of the observation space's dtype (float32 for the vector and image
  observations of the shipped envs; a pytree observation is the same tree,
  each leaf with the batch in front, an ``"action_mask"`` entry honoured);
* policies with memory: ``call(obs, carry) -> (action, carry)``, the carry
  ``[B, memory_size]`` f32 (an LSTM's a pair of them), zeros at an
  episode's start;
* ``action``: ``[B]`` int32 for discrete actions, ``[B, A]`` float32 for Box
  ones (clipped to the space) — the argmax of the logits or Q-values, the
  Gaussian mean, SAC's squashed mean, TD3's actor output.
"""

from pathlib import Path
from typing import Any

import jax

from ondevice_rl.train.kit.state import PolicyParams
from ondevice_rl.train.services.writes import write_whole
from ondevice_rl.train.use.loading import load_run

#: Platforms the artifact is lowered for, unless told otherwise.
PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


def _need_flatbuffers() -> None:
    try:
        # lazy: a presence check, so that a missing one is a one-line ValueError
        import flatbuffers  # noqa: F401  (jax's serializer needs it)
    except ImportError:
        raise ValueError(
            "exporting needs flatbuffers (jax's serializer): pip install flatbuffers"
        ) from None


def has_memory(trainer: Any) -> bool:
    """Whether ``trainer``'s policy carries a state between steps."""
    return bool(jax.tree.leaves(trainer.initial_carry(())))


def exported_policy(
    trainer: Any, params: PolicyParams, platforms: tuple[str, ...] = PLATFORMS
) -> jax.export.Exported:
    """``trainer``'s deterministic policy with ``params`` embedded, exported
    for ``platforms`` with a symbolic batch dimension (calling convention in
    the module docstring)."""
    (batch,) = jax.export.symbolic_shape("b")

    def batched(x):
        return jax.ShapeDtypeStruct((batch, *x.shape), x.dtype)

    obs = jax.tree.map(batched, trainer.setup.obs_spec)
    if has_memory(trainer):
        carry = jax.tree.map(batched, trainer.initial_carry(()))

        def act_with_memory(obs, carry):
            return trainer.policy(params, carry, obs, None, True)

        return jax.export.export(jax.jit(act_with_memory), platforms=platforms)(
            obs, carry
        )

    def act(obs):
        action, _ = trainer.policy(params, (), obs, None, True)
        return action

    return jax.export.export(jax.jit(act), platforms=platforms)(obs)


def signature(exported: jax.export.Exported) -> str:
    """The artifact's calling convention in one line, e.g. ``call(float32[b,4])
    -> int32[b]``."""

    def text(avals):
        return ", ".join(f"{a.dtype}[{','.join(map(str, a.shape))}]" for a in avals)

    outputs = text(exported.out_avals)
    if len(exported.out_avals) > 1:
        outputs = f"({outputs})"
    return f"call({text(exported.in_avals)}) -> {outputs}"


def check_platforms(platforms: tuple[str, ...]) -> tuple[str, ...]:
    """``platforms`` if each is one ``jax.export`` lowers for (ValueError,
    one line, otherwise)."""
    unknown = [p for p in platforms if p not in PLATFORMS]
    if unknown or not platforms:
        raise ValueError(
            f"--platforms takes some of {', '.join(PLATFORMS)}; got "
            f"{', '.join(platforms) or 'none'}"
        )
    return tuple(dict.fromkeys(platforms))


def export_policy(
    run_dir: str | Path,
    out: str | Path | None = None,
    platforms: tuple[str, ...] = PLATFORMS,
    **load_options: Any,
) -> jax.export.Exported:
    """The deterministic policy of ``run_dir`` (``load_run``, which also
    takes ``load_options``) as a ``jax.export.Exported``, its serialized
    bytes written to ``out`` when given (atomically).

    Raises:
        ValueError: one line, for a run that cannot be loaded, unknown
            platforms, or a missing ``flatbuffers``, before any lowering.
    """
    platforms = check_platforms(tuple(platforms))
    _need_flatbuffers()
    run = load_run(run_dir, **load_options)
    exported = exported_policy(run.trainer, run.params, platforms)
    if out is not None:
        write_artifact(exported, out)
    return exported


def write_artifact(exported: jax.export.Exported, out: str | Path) -> int:
    """Writes ``exported``'s serialized bytes to ``out`` atomically (a kill
    leaves the old file or the new one); returns their number."""
    blob = exported.serialize()
    write_whole(out, lambda tmp: tmp.write_bytes(blob))
    return len(blob)
