"""``ondevice-rl plot RUN_DIR... --out curves.png``: several runs' and
sweeps' learning curves on one figure (``train/use/plots.py``)."""

import sys
from pathlib import Path

from ondevice_rl.train.cli.args import one_line_errors, positive_int_arg
from ondevice_rl.train.cli.errors import fail


def add_subcommands(subparsers, algo: str | None = None) -> None:
    del algo
    plot = subparsers.add_parser(
        "plot",
        help="overlay the learning curves of runs and sweeps",
        description="One curve per run directory; per sweep directory, the "
        "mean ± std over seeds of each of its best settings.",
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


def _plot(args) -> int:
    from ondevice_rl.train.use.plots import load_curves, plot_curves

    def warn(message: str) -> None:
        print(f"ondevice-rl plot: warning: {message}", file=sys.stderr, flush=True)

    try:
        curves = load_curves(args.paths, args.metric, args.top, warn)
        path = plot_curves(curves, args.out, args.metric, args.title)
    except (ValueError, KeyError, OSError) as e:
        if args.debug:
            raise
        return fail("plot", e)
    print(f"wrote {path}: {len(curves)} curve(s)")
    return 0
