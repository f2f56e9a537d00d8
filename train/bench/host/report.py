"""``bench host``'s tables (rich) and plot: steps/s and busy share per backend."""

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ondevice_rl.train.bench.report import si


def _steps(timesteps) -> str:
    return f"{timesteps:,}" if isinstance(timesteps, int) else str(timesteps)


def _cell(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def env_table(result: dict, record: dict) -> Table:
    """One host env: a row per backend."""
    port = f", port {result['port']}" if result["port"] else ""
    config = result["config"]
    title = (
        f"bench host: {result['env']}{port}, {record['algo'].upper()} "
        f"({result['recipe'] or 'defaults'}), {config['num_envs']} envs × "
        f"{config['num_steps']} steps, {_steps(record['timesteps'])} steps × "
        f"{len(record['seeds'])} seed(s)"
    )
    table = Table(title=title)
    columns = ("backend", "env steps/s", "updates/s", "transfers/update",
               "final return", "busy share", "policy lag")  # fmt: skip
    for c in columns:
        table.add_column(c, justify="left" if c == "backend" else "right")
    for r in result["rows"]:
        if "skipped" in r:
            table.add_row(r["backend"], f"skipped: {r['skipped']}", *[""] * 5)
            continue
        finals = r["final_returns"]
        spread = f" [{min(finals):.0f}, {max(finals):.0f}]" if len(finals) > 1 else ""
        table.add_row(
            r["backend"], si(r["sps"]), _cell(r["updates_per_s"], ".2f"),
            _cell(r["transfers_per_update"], "g"),
            f"{r['final_return']:.1f}{spread}",
            _cell(r["busy_share"], ".3f"), _cell(r["policy_lag"], ".2f"),
        )  # fmt: skip
    return table


def lines(result: dict) -> list[str]:
    """What the table does not say: the lead, the return check, the port."""
    out = []
    lead = result.get("fused_lead")
    if lead:
        out.append(f"fused: {lead['sps_ratio']}× the steps/s of the best host "
                   f"backend ({lead['over']})")  # fmt: skip
    outside = [r["backend"] for r in result["rows"]
               if r.get("within_fused_range") is False]  # fmt: skip
    if outside:
        out.append("final returns outside the fused program's min-max over the "
                   f"same seeds: {', '.join(outside)}")  # fmt: skip
    if result.get("note"):
        out.append(result["note"])
    return out


def print_host(record: dict, console: Console | None = None) -> None:
    console = console or Console(width=160)
    for result in record["results"]:
        console.print(env_table(result, record))
        for line in lines(result):
            console.print(line)


def plot_host(record: dict, path: Path, machine: str) -> None:
    """Two panels per run: env steps/s (log) and the busy share per backend,
    one group of bars per host env."""
    from matplotlib.figure import Figure

    results = record["results"]
    backends = [b for b in dict.fromkeys(
        r["backend"] for res in results for r in res["rows"] if "skipped" not in r
    )]  # fmt: skip
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_sps, ax_busy = fig.subplots(1, 2)
    width = 0.8 / max(1, len(backends))
    for i, backend in enumerate(backends):
        xs, sps, busy = [], [], []
        for j, res in enumerate(results):
            row = next((r for r in res["rows"] if r["backend"] == backend
                        and "skipped" not in r), None)  # fmt: skip
            if row is not None:
                xs.append(j + i * width)
                sps.append(row["sps"])
                busy.append(row["busy_share"])
        ax_sps.bar(xs, sps, width, label=backend)
        ax_busy.bar(xs, busy, width, label=backend)
    ticks = [j + 0.4 - width / 2 for j in range(len(results))]
    for ax in (ax_sps, ax_busy):
        ax.set_xticks(ticks, [res["env"] for res in results])
        ax.grid(True, axis="y", alpha=0.3)
    ax_sps.set(yscale="log", ylabel="env steps / s", title="training speed")
    ax_busy.set(ylim=(0, 1.05), ylabel="device busy share",
                title="device busy share (compiled work / wall time)")  # fmt: skip
    ax_busy.legend(fontsize=7)
    fig.suptitle(
        f"bench host, {record['algo'].upper()}, {record['num_envs']} envs, "
        f"{_steps(record['timesteps'])} steps; {machine}", fontsize=9,
    )  # fmt: skip
    fig.savefig(path, dpi=110)
