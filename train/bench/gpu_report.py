"""The GPU suite's table (rich, stdout) and ``bench.png``: env stepping,
the population scaling curve and compile times (``gpu_suite.py``)."""

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ondevice_rl.train.bench.report import env_table, si


def _f(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def header(meta: dict) -> list[str]:
    """The lines that say what ran where."""
    libraries = meta.get("libraries") or {}
    versions = ", ".join(f"{k} {v}" for k, v in libraries.items() if v)
    limit = meta.get("memory_bytes_limit")
    memory = "-" if limit is None else f"{limit / 2**30:.1f} GiB limit"
    return [
        f"device: {meta['device']} ({meta['platform']}, {meta['device_count']} "
        f"device(s)), {meta.get('platform_version') or '-'}; memory {memory}",
        f"nvidia-smi: {meta.get('nvidia_smi') or '-'}",
        f"versions: python {meta['python']}, {versions}",
        f"matmul precision: {meta['matmul_precision']}; "
        f"XLA_FLAGS: {meta.get('xla_flags') or '-'}",
    ]


def _note(row: dict) -> str:
    if row.get("reference_failed"):
        return f"reference failed: {row['reference_failed']}"
    return row.get("skipped") or row.get("failed") or ""


def train_table(train: dict, scaling: dict) -> Table:
    table = Table(title="bench --suite gpu: training (SPS = env steps/s, one program)")
    columns = ["learner", "seeds", "SPS", "compile s", "run s", "return"]
    columns += ["est. GiB", "efficiency", "ref SPS", "SPS ×", "note"]
    for c in columns:
        table.add_column(c, justify="left" if c in ("learner", "note") else "right")
    for name, rows in train.items():
        efficiency = {p["seeds"]: p["efficiency"] for p in scaling.get(name, [])}
        for r in rows:
            ref, ratio = r.get("reference", {}), r.get("ratio", {})
            table.add_row(
                name,
                str(r["seeds"]),
                si(r.get("sps")),
                _f(r.get("compile_s"), ".1f"),
                _f(r.get("run_s"), ".2f"),
                _f(r.get("final_return"), ".1f"),
                f"{r['estimated_bytes'] / 2**30:.3f}",
                _f(efficiency.get(r["seeds"]), ".2f"),
                si(ref.get("sps")),
                _f(ratio.get("sps"), ".2f"),
                _note(r),
            )
    return table


def print_suite(results: dict, console: Console | None = None) -> None:
    console = console or Console(width=160)
    for line in header(results["meta"]):
        console.print(line, highlight=False)
    console.print(env_table(results["env"]))
    console.print(train_table(results["train"], results.get("scaling", {})))


def plot_suite(results: dict, path: Path) -> None:
    """Env steps/s against parallel envs, training SPS against seeds (ours
    solid, references dashed), compile time against seeds; log axes."""
    # lazy: matplotlib (0.6 s), which `--help` does not need
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig = Figure(figsize=(15, 4.6), layout="constrained")
    ax_env, ax_sps, ax_compile = fig.subplots(1, 3)
    colors = matplotlib.colormaps["tab10"].colors
    series: dict[str, list] = {}
    for r in results["env"]["results"]:
        if r.get("sps"):
            series.setdefault(r["env"], []).append((r["batch"], r["sps"]))
    for i, (name, points) in enumerate(series.items()):
        xs, ys = zip(*sorted(points), strict=True)
        ax_env.plot(xs, ys, "-o", ms=3, label=name, color=colors[i % len(colors)])
    for i, (name, rows) in enumerate(results["train"].items()):
        color = colors[i % len(colors)]
        ours = [(r["seeds"], r["sps"], r["compile_s"]) for r in rows if r.get("sps")]
        if ours:
            seeds, sps, compile_s = zip(*ours, strict=True)
            ax_sps.plot(seeds, sps, "-o", ms=3, color=color, label=name)
            ax_compile.plot(seeds, compile_s, "-o", ms=3, color=color, label=name)
        refs = [(r["seeds"], r["reference"]["sps"]) for r in rows if "reference" in r]
        if refs:
            ax_sps.plot(*zip(*refs, strict=True), "--s", ms=3, color=color,
                        label=f"{name} reference")  # fmt: skip
    device = results["meta"].get("device", "")
    ax_env.set(title=f"env stepping, random policy ({device})",
               xlabel="parallel envs", ylabel="env steps / s")  # fmt: skip
    ax_sps.set(title="training: population scaling", xlabel="seeds (one program)",
               ylabel="env steps / s")  # fmt: skip
    ax_compile.set(title="compile time", xlabel="seeds", ylabel="seconds")
    for ax in (ax_env, ax_sps, ax_compile):
        ax.set(xscale="log", yscale="log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    fig.savefig(path, dpi=110)
