"""``ondevice-rl bench launches``: what each update launches on an NVIDIA
GPU, counted on a machine without one, ours beside a reference.

Each program (a learner's whole run, vmapped over ``S`` seeds) is compiled
by XLA for a GPU target (``targets/*.txtpb``: XLA's ``GpuTargetConfig`` of
the card, or a user's file) in a subprocess that has JAX's CUDA plugin on
its path (``deviceless.py``); the thunk sequence XLA writes is counted per
update (``thunks.py``). The plugin lives in a cache directory of its own,
installed there on first use, never in the project's environment:
installed beside JAX, it makes every CPU process print eight lines of
"Could not find cuda drivers" to stderr, ``JAX_PLATFORMS=cpu`` or not.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

TARGETS_DIR = Path(__file__).with_name("targets")
#: A learner's reference, by program name (``reference_<name>.py`` here).
REFERENCES = dict(ppo="reference_ppo", dqn="reference_dqn", sac="reference_sac")
REFERENCES["ppo-gru"] = "reference_ppo_rnn"
#: Every program of the GPU baseline: name -> (algo, recipe).
PROGRAMS = dict(ppo=("ppo", None), a2c=("a2c", None), dqn=("dqn", None))
PROGRAMS.update(pqn=("pqn", None), sac=("sac", None), td3=("td3", None))
PROGRAMS["ppo-gru"] = ("ppo", "cartpole_novel_ppo_gru")
FIELDS = ("items", "memcpys", "graph_launches", "outside_graphs", "launches")


class LaunchesError(Exception):
    """A missing plugin or compiler, or bad input: one line, exit 2."""


def targets() -> dict[str, Path]:
    """The shipped GPU targets by name (``h100``, ``h200``)."""
    return {p.stem: p for p in sorted(TARGETS_DIR.glob("*.txtpb"))}


def target_file(name: str) -> Path:
    """A shipped target's file, or a user's ``GpuTargetConfig`` file."""
    shipped = targets()
    if name in shipped:
        return shipped[name]
    path = Path(name)
    if not path.is_file():
        raise LaunchesError(
            f"--target: {name!r} is neither a shipped target "
            f"({', '.join(shipped)}) nor a file"
        )
    if "gpu_device_info" not in path.read_text(errors="replace"):
        raise LaunchesError(
            f"--target: {path} is not a GpuTargetConfig text proto (no gpu_device_info)"
        )
    return path


def plugin_packages() -> list[str]:
    """JAX's CUDA 12 plugin at the installed JAX's version."""
    v = version("jax")
    return [f"jax-cuda12-plugin=={v}", f"jax-cuda12-pjrt=={v}"]


def plugin_dir() -> Path:
    """Where the plugin is cached: ``$ONDEVICE_RL_CUDA_PLUGIN_DIR``, else
    ``$XDG_CACHE_HOME/ondevice_rl/cuda12-plugin-<jax version>``."""
    if os.environ.get("ONDEVICE_RL_CUDA_PLUGIN_DIR"):
        return Path(os.environ["ONDEVICE_RL_CUDA_PLUGIN_DIR"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "ondevice_rl" / f"cuda12-plugin-{version('jax')}"


def _install_command(where: Path, packages: list[str]) -> str:
    return f"{sys.executable} -m pip install --no-deps --target {where} " + " ".join(
        packages
    )


def ensure_plugin(log: Callable[[str], None]) -> Path:
    """The plugin's cache directory, installed there first if missing
    (with NVIDIA's ``ptxas`` when none is on ``PATH``)."""
    try:
        return _ensure_plugin(log)
    except OSError as e:
        raise LaunchesError(
            f"cannot write JAX's CUDA plugin into {plugin_dir()} ({e.strerror or e}); "
            "set ONDEVICE_RL_CUDA_PLUGIN_DIR to a writable directory"
        ) from None


def _ensure_plugin(log: Callable[[str], None]) -> Path:
    where = plugin_dir()
    if (where / ".complete").is_file():
        return where
    packages = plugin_packages()
    if shutil.which("ptxas") is None:
        packages.append("nvidia-cuda-nvcc-cu12")
    log(f"installing {', '.join(packages)} into {where} (once)")
    partial = where.with_name(f"{where.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
        + ["--target", str(partial)]
        + packages,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        reason = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise LaunchesError(
            f"JAX's CUDA plugin could not be installed ({reason}); "
            f"install it with: {_install_command(where, packages)}"
        )
    (partial / ".complete").write_text(" ".join(packages) + "\n")
    if (where / ".complete").is_file():  # another process finished first
        shutil.rmtree(partial, ignore_errors=True)
        return where
    shutil.rmtree(where, ignore_errors=True)  # an unfinished copy
    partial.rename(where)
    return where


def _ptxas_path(plugin: Path) -> str:
    """``PATH`` with NVIDIA's compiler wheel's ``bin`` when it is cached."""
    path = os.environ.get("PATH", "")
    wheel_bin = plugin / "nvidia" / "cuda_nvcc" / "bin"
    return f"{wheel_bin}{os.pathsep}{path}" if wheel_bin.is_dir() else path


def count_program(spec: dict, plugin: Path, target: Path) -> dict:
    """Compiles one program (``deviceless.py``'s spec) in a subprocess;
    its per-update counts."""
    with tempfile.TemporaryDirectory(prefix="odrl-launches-") as dump:
        env = dict(os.environ)
        env.pop("JAX_PLATFORMS", None)
        env.update(
            PYTHONPATH=os.pathsep.join(
                [str(plugin)] + [p for p in sys.path if p and Path(p).is_dir()]
            ),
            PATH=_ptxas_path(plugin),
            JAX_SKIP_CUDA_CONSTRAINTS_CHECK="1",
            CUDA_VISIBLE_DEVICES="-1",
            TF_CPP_MIN_LOG_LEVEL="3",
            XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_module_re=jit_train",
        )
        spec = dict(spec, target=str(target), dump=dump)
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "ondevice_rl.train.bench.deviceless",
                json.dumps(spec),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        noise = ("cudart_stub", "absl::InitializeLog")
        err = [
            ln for ln in result.stderr.splitlines() if not any(n in ln for n in noise)
        ]
        if any("ptxas" in ln for ln in err):
            raise LaunchesError(
                "no ptxas for the GPU compile; install NVIDIA's compiler with: "
                + _install_command(plugin, ["nvidia-cuda-nvcc-cu12"])
            )
        raise LaunchesError(
            f"compiling {spec.get('name', '?')} for the GPU failed: "
            + ((err or ["no output"])[-1])
        )
    return json.loads(lines[-1])


def reference_spec(name: str, module: str | None = None) -> dict | None:
    """The spec of ``name``'s reference (a shipped one, or ``module``: a
    module name or a ``.py`` file); None where it has none."""
    module = module or (
        f"ondevice_rl.train.bench.{REFERENCES[name]}" if name in REFERENCES else None
    )
    return None if module is None else dict(program="reference", module=module)


def run_launches(
    programs: list[tuple[str, str, str | None]],
    seeds: list[int],
    target: Path,
    reference: str | None,
    log: Callable[[str], None],
) -> list[dict]:
    """Counts for each ``(name, algo, recipe)`` at each seed count, each
    beside its reference (``reference``: ``"auto"``, ``"none"`` or a
    module/file for every program)."""
    plugin = ensure_plugin(log)
    rows = []
    for name, algo, recipe in programs:
        for s in seeds:
            log(f"compiling {name} at {s} seed(s) for {target.stem}")
            ours = count_program(
                dict(name=name, program="ours", algo=algo, recipe=recipe, seeds=s),
                plugin,
                target,
            )
            row = dict(program=name, seeds=s, target=target.stem, ours=ours)
            ref = None
            if reference != "none":
                ref = reference_spec(name, None if reference == "auto" else reference)
            if ref is not None:
                log(f"compiling {name}'s reference at {s} seed(s)")
                row["reference_module"] = ref["module"]
                row["reference"] = count_program(
                    dict(ref, name=f"{name} reference", seeds=s), plugin, target
                )
                row["ratio"] = {
                    f: _ratio(ours["update"][f], row["reference"]["update"][f])
                    for f in FIELDS
                }
            rows.append(row)
    return rows


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def _sides(row: dict) -> list[dict]:
    return [row["ours"]] + ([row["reference"]] if "reference" in row else [])


def format_table(rows: list[dict]) -> str:
    """Per update, ours and the reference's; then each loop per iteration."""
    head = (
        f"{'program':<10}{'seeds':>6}  {'side':<10}{'items':>8}{'memcpys':>9}"
        f"{'graphs':>8}{'loose':>8}{'launches':>10}"
    )
    out = ["per update (items: kernels + memcpys; launches: CUDA graphs + loose items)"]
    out.append(head)
    for r in rows:
        for side, c in zip(("ours", "reference"), _sides(r), strict=False):
            u = c["update"]
            out.append(
                f"{r['program']:<10}{r['seeds']:>6}  {side:<10}{u['items']:>8g}"
                f"{u['memcpys']:>9g}{u['graph_launches']:>8g}"
                f"{u['outside_graphs']:>8g}{u['launches']:>10g}"
            )
        if "ratio" in r:
            q = r["ratio"]
            q = {k: "–" if v is None else f"{v:.2f}" for k, v in q.items()}
            out.append(
                f"{'':<16}{'ours/ref':<10}{q['items']:>8}{q['memcpys']:>9}"
                f"{q['graph_launches']:>8}{q['outside_graphs']:>8}{q['launches']:>10}"
            )
    out.append("")
    out.append("loops inside one update, per iteration (depth, source, trip count)")
    for r in rows:
        for side, c in zip(("ours", "reference"), _sides(r), strict=False):
            out.append(f"{r['program']} x{r['seeds']} {side}:")
            kinds = ", ".join(f"{k} {v:g}" for k, v in c["update"]["kinds"].items())
            out.append(f"  one update's work items by kind: {kinds}")
            d = c["direct"]
            out.append(
                f"  update body, outside its loops: {d['items']:g} items "
                f"({d['memcpys']:g} memcpys), {d['launches']:g} launches"
            )
            for lp in c["loops"]:
                p = lp["per_iteration"]
                indent = "  " * lp["depth"]
                out.append(
                    f"{indent}{lp['source'] or '?'} x{lp['trip_count']}: "
                    f"{p['items']:g} items ({p['memcpys']:g} memcpys), "
                    f"{p['graph_launches']:g} graphs + {p['outside_graphs']:g} loose"
                )
    for r in rows:
        for side, c in zip(("ours", "reference"), _sides(r), strict=False):
            for cond in c.get("conditionals", []):
                how = "given" if cond["given"] else "unknown: half"
                out.append(
                    f"{r['program']} x{r['seeds']} {side}: conditional at "
                    f"{cond['source'] or '?'} takes its true branch in "
                    f"{cond['p_true']:.3g} of the updates ({how})"
                )
    out.append("")
    out.append(
        "Counts, not times: compiled without a device, so no autotuning (every "
        "dot a Triton GEMM with default tiles). A lax.cond whose predicate every "
        "seed shares stays a conditional; one that differs per seed is a select "
        "under vmap (both branches run)."
    )
    return "\n".join(out)
