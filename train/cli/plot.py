"""``ondevice-rl plot RUN_DIR... --out curves.png``: several runs' and
sweeps' learning curves on one figure, smoothed, with their spread over seeds
(``train/use/curves.py``, ``smoothing.py``, ``plots.py``)."""

import sys
from pathlib import Path

from ondevice_rl.train.cli.args import (
    check_out_file,
    one_line_errors,
    positive_int_arg,
)
from ondevice_rl.train.cli.errors import WRITE_FAILED, fail
from ondevice_rl.train.services.writes import WriteFailed
from ondevice_rl.train.use.curves import load_series
from ondevice_rl.train.use.smoothing import BANDS, SMOOTHINGS


def add_subcommands(subparsers, algo: str | None = None) -> None:
    del algo
    plot = subparsers.add_parser(
        "plot",
        help="overlay the learning curves of runs and sweeps",
        description="One curve per setting: run directories that differ only "
        "in the seed are one curve, and a sweep directory gives one per each "
        "of its best settings. Each seed is smoothed; the line is their mean, "
        "the band their spread (one seed: ± std of its values around the "
        "line). Runs lacking the metric are skipped with a warning.",
    )
    plot.add_argument("paths", type=Path, nargs="+", metavar="RUN_DIR")
    plot.add_argument(
        "--out", type=Path, default=Path("curves.png"), help="(default curves.png)"
    )
    plot.add_argument(
        "--metric",
        default="episode_return",
        help="a metrics.jsonl column (default episode_return; e.g. eval_return)",
    )
    plot.add_argument(
        "--smooth",
        choices=SMOOTHINGS,
        default="ema",
        help="exponential moving average (default), trailing window mean, or none",
    )
    plot.add_argument(
        "--span",
        type=positive_int_arg,
        metavar="N",
        help="points the smoothing spans (EMA alpha = 2/(N+1); window: N "
        "points); default 2%% of each curve's points",
    )
    plot.add_argument(
        "--band",
        choices=BANDS,
        default="minmax",
        help="spread over seeds: min-max (default), 25-75th percentile, ± std",
    )
    plot.add_argument(
        "--separate",
        action="store_true",
        help="one curve per run directory, even for runs that differ only in the seed",
    )
    plot.add_argument(
        "--top",
        type=positive_int_arg,
        default=10,
        metavar="N",
        help="settings per sweep, best first (default 10)",
    )
    plot.add_argument("--title", default="", help="figure title")
    plot.add_argument("--debug", action="store_true", help="show tracebacks")
    plot.set_defaults(func=_plot)
    one_line_errors(plot)


def _check_out(out: Path) -> None:
    """``--out`` a file matplotlib writes (by its suffix), in a directory."""
    # lazy: matplotlib (0.6 s), which `--help` does not need
    from matplotlib.backend_bases import FigureCanvasBase

    check_out_file(out)
    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = out.suffix[1:].lower()
    if suffix and suffix not in kinds:
        raise ValueError(
            f"--out {out}: cannot write .{suffix} (write {', '.join(sorted(kinds))})"
        )


def _plot(args) -> int:
    # lazy: matplotlib (0.6 s), which `--help` does not need
    from ondevice_rl.train.use.plots import plot_series

    def warn(message: str) -> None:
        print(f"ondevice-rl plot: warning: {message}", file=sys.stderr, flush=True)

    try:
        _check_out(args.out)
        series = load_series(
            args.paths, args.metric, args.top, warn, group=not args.separate
        )
        plot_series(
            series,
            args.out,
            args.metric,
            args.title,
            args.smooth,
            args.span,
            args.band,
        )
    except WriteFailed as e:
        if args.debug:
            raise
        return fail(
            "plot",
            f"{e}; free space or fix permissions, or give another --out",
            WRITE_FAILED,
        )
    except (ValueError, KeyError, OSError) as e:
        if args.debug:
            raise
        return fail("plot", e)
    print(f"wrote {args.out}: {len(series)} curve(s)")
    return 0
