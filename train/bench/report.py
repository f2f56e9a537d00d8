"""Tables on stdout (rich), ``bench.json`` and ``bench.png`` (matplotlib Agg)."""

import json
import math
from pathlib import Path

from rich.console import Console
from rich.table import Table


def si(x: float | None) -> str:
    """``1234567 -> '1.23M'``; None/NaN -> '-'."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def env_table(env: dict) -> Table:
    rows = env["results"]
    batches = sorted({r["batch"] for r in rows})
    table = Table(title="bench env: random-policy steps/s (best of 3)")
    table.add_column("env", no_wrap=True)
    table.add_column("impl")
    for b in batches:
        table.add_column(f"B={b}", justify="right")
    series = {}
    for r in rows:
        cell = si(r["sps"]) if r.get("sps") else r.get("skipped", "-")
        series.setdefault((r["env"], r["impl"]), {})[r["batch"]] = cell
    for (name, impl), cells in series.items():
        table.add_row(name, impl, *(cells.get(b, "") for b in batches))
    ratios = env.get("ratio_vs_gymnax") or {}
    if ratios:
        cells = [f"{ratios[b]:.2f}×" if b in ratios else "" for b in batches]
        table.add_row("CartPole-v1 ours / gymnax", "ratio", *cells)
    for name, by_batch in (env.get("ratio_vs_suite") or {}).items():
        by_batch = {int(b): x for b, x in by_batch.items()}  # JSON keys: str
        cells = [f"{by_batch[b]:.2f}×" if b in by_batch else "" for b in batches]
        table.add_row(f"{name} ours / suite", "ratio", *cells)
    return table


def train_table(train: dict) -> Table:
    algo = train.get("algo", "ppo").upper()
    env = train.get("env", "CartPole-v1")
    table = Table(title=f"bench train: {algo} {env} (SPS = env steps/s)")
    has_ref = any("reference" in r for r in train["results"])
    peak = train.get("matmul_peak_gflops")
    if peak:
        table.title += f"; one device's matmul peak {peak:.0f} GFLOP/s"
    columns = ["seeds", "devices", "steps/seed", "SPS", "compile s", "run s", "return"]
    columns += ["GFLOP/s", "% peak"]
    if has_ref:
        columns += ["ref SPS", "ref compile s", "ref return", "SPS ×", "median ×"]
        columns += ["compile ×"]
    for c in columns:
        table.add_column(c, justify="right")
    for r in train["results"]:
        row = [
            str(r["seeds"]),
            str(r.get("devices", 1)),
            si(r["timesteps"] / r["seeds"]),
            si(r["sps"]),
            f"{r['compile_s']:.1f}",
            f"{r['run_s']:.2f}",
            f"{r['final_return']:.0f}",
            f"{r.get('matmul_gflops', math.nan):.1f}",
            f"{100 * r.get('peak_fraction', math.nan):.0f}",
        ]
        if has_ref:
            ref, ratio = r.get("reference", {}), r.get("ratio", {})
            row += [
                si(ref.get("sps")),
                f"{ref.get('compile_s', math.nan):.1f}",
                f"{ref.get('final_return', math.nan):.0f}",
                f"{ratio.get('sps', math.nan):.2f}",
                f"{ratio.get('sps_median', math.nan):.2f}",
                f"{ratio.get('compile', math.nan):.2f}",
            ]
        table.add_row(*row)
    return table


def print_tables(results: dict, console: Console | None = None) -> None:
    console = console or Console(width=160)
    if "env" in results:
        console.print(env_table(results["env"]))
        ratios = results["env"].get("ratio_vs_gymnax") or {}
        b = results["env"]["compare_batch"]
        if b in ratios:
            console.print(
                f"AutoReset(CartPole) vs gymnax CartPole at {b} envs: {ratios[b]:.2f}×"
            )
    if "train" in results:
        console.print(train_table(results["train"]))


def write_json(results: dict, path: Path) -> None:
    path.write_text(json.dumps(results, indent=2, default=float) + "\n")


def plot(results: dict, path: Path) -> None:
    """SPS vs parallel environments, log-log: env stepping | training."""
    # lazy: matplotlib (0.6 s), which `--help` does not need
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    train_only = "env" not in results and "train" in results
    fig = Figure(figsize=(6.5 if train_only else 12, 4.8), layout="constrained")
    if train_only:  # `bench train` alone: its panel only
        ax_train = fig.subplots(1, 1)
        ax_env = None
    else:
        ax_env, ax_train = fig.subplots(1, 2)
    styles = {"ondevice_rl": ("-", "o"), "adapter": (":", "o")}
    if "env" in results:
        series = {}
        for r in results["env"]["results"]:
            if r.get("sps"):
                key = (r["env"], r["impl"])
                series.setdefault(key, []).append((r["batch"], r["sps"]))
        colors = matplotlib.colormaps["tab20"].colors
        for i, ((name, impl), points) in enumerate(series.items()):
            xs, ys = zip(*sorted(points), strict=True)
            line, marker = styles.get(impl, ("--", "s"))
            ax_env.plot(
                xs,
                ys,
                line,
                marker=marker,
                ms=3,
                label=name,
                color=colors[i % len(colors)],
            )
    if ax_env is not None:
        ax_env.set(
            title="env stepping, random policy",
            xlabel="parallel envs",
            ylabel="env steps / s",
            xscale="log",
            yscale="log",
        )
    per_seed, algo, env, peak_note = 4, "PPO", "CartPole-v1", ""
    if results.get("train", {}).get("matmul_peak_gflops"):
        peak = results["train"]["matmul_peak_gflops"]
        peak_note = (
            f"\nlabels: share of the matmul peak ({peak:.0f} GFLOP/s per device)"
        )
    if "train" in results:
        rows = results["train"]["results"]
        per_seed = rows[0].get("num_envs", 4)
        algo = results["train"].get("algo", "ppo").upper()
        env = results["train"].get("env", env)
    ticks = [per_seed]
    if "train" in results:
        xs = [per_seed * r["seeds"] for r in rows]
        ticks = sorted(set(xs) | {per_seed})
        ax_train.plot(xs, [r["sps"] for r in rows], "-o", label="ours (fused, vmap)")
        for x, r in zip(xs, rows, strict=True):
            if "peak_fraction" in r:  # the share of the device's matmul peak
                ax_train.annotate(
                    f"{100 * r['peak_fraction']:.0f}%",
                    (x, r["sps"]),
                    textcoords="offset points",
                    xytext=(0, 6),
                    ha="center",
                    fontsize=7,
                )
        refs = [
            (per_seed * r["seeds"], r["reference"]["sps"])
            for r in rows
            if "reference" in r
        ]
        if refs:
            ax_train.plot(*zip(*refs, strict=True), "--s", label="reference")
    if "host" in results:
        rows = {r["backend"]: r for r in results["host"]["results"][0]["rows"]}
        for backend, marker in (("gym-sync", "v"), ("fused", "^")):
            if "sps" in rows.get(backend, {}):
                x = results["host"]["num_envs"]
                label = f"bench host: {backend}, 1 seed"
                ax_train.plot([x], [rows[backend]["sps"]], marker, ms=9, label=label)
    ax_train.set(
        title=f"{algo} {env} ({per_seed} envs per seed)" + peak_note,
        xlabel=f"parallel envs (seeds × {per_seed})",
        ylabel="env steps / s",
        xscale="log",
        yscale="log",
    )
    meta = results.get("meta")
    if meta:  # the machine the figures belong to
        fig.suptitle(
            f"{meta.get('processor', meta.get('machine', ''))}, "
            f"{meta.get('cpu_count')} cores, {meta.get('devices')} "
            f"{meta.get('backend', '')} device(s), jax {meta.get('jax')}",
            fontsize=9,
        )
    for ax in (ax for ax in (ax_env, ax_train) if ax is not None):
        ax.grid(True, which="both", alpha=0.3)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, ncol=2 if ax is ax_env else 1)
    ax_train.set_xticks(ticks)
    fig.savefig(path, dpi=110)
