"""A sweep's figures: the best settings' return curves, performance
profiles, and a search's lineage."""

from pathlib import Path

import numpy as np

from ondevice_rl.train.services.writes import write_whole
from ondevice_rl.train.sweep import stats
from ondevice_rl.train.sweep.result import SweepResult, format_values, scores


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(result: SweepResult, path: Path, top: int = 10) -> Path:
    """``curves.png``: mean ± std over seeds of the ``top`` best settings."""
    plt = _pyplot()
    curves = result.curves()
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for summary in result.ranking()[:top]:
        steps, returns = curves[summary.setting]
        mean, std = returns.mean(0), returns.std(0)
        label = format_values(summary.values) or "base config"
        (line,) = ax.plot(steps, mean, lw=1.5, label=label)
        ax.fill_between(
            steps, mean - std, mean + std, alpha=0.2, color=line.get_color()
        )
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episode return (mean ± std over seeds)")
    title = f"{result.plan.base.env}: {len(result.finished)} members"
    if len(curves) > top:
        title += f", best {top} of {len(curves)} settings"
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    write_whole(path, fig.savefig)
    plt.close(fig)
    return Path(path)


def plot_profile(result: SweepResult, path: Path, top: int = 10) -> Path:
    """``profile.png``: performance profiles of the ``top`` best settings
    (``last10pct_return`` over seeds) or, after a search, of the
    handed-back members' scores over search seeds."""
    lineage, env = result.lineage, result.plan.base.env
    if lineage is not None:
        picks = list(lineage.handed_back().values())
        final = lineage.final_scores()
        return stats.plot_performance_profiles(
            {lineage.name: [np.nan if p is None else final[p] for p in picks]},
            path,
            xlabel=f"handed-back member's score τ (last {lineage.score_episodes} "
            "episodes)",
            title=f"{env}: {len(picks)} search seed(s)",
        )
    nonfinite, ranked = result.nonfinite, result.ranking()[:top]
    by_setting = {}
    for s in ranked:
        members = [
            m
            for m in result.finished
            if m.setting == s.setting and m.index not in nonfinite
        ]
        label = format_values(s.values) or "base config"
        by_setting[label] = [
            scores(result.returns(m))["last10pct_return"] for m in members
        ]
    return stats.plot_performance_profiles(
        by_setting,
        path,
        xlabel="mean return over the last 10% of updates (τ)",
        title=f"{env}: runs above τ, best {len(ranked)} settings",
    )


def plot_lineage(result: SweepResult, path: Path, group: int = 0) -> Path:
    """``lineage.png``: one group's scores and searched hyperparameters
    over env steps, one line per member, copies and refills marked."""
    plt = _pyplot()
    lineage = result.lineage
    names = list(result.searched) or list(result.config.HYPERPARAMS._fields[:1])
    fig, axes = plt.subplots(
        1 + len(names), 1, figsize=(8, 2.6 * (1 + len(names))), dpi=100, sharex=True
    )
    steps = lineage.round_env_steps()
    members = [i for i in range(lineage.members) if lineage.group[i] == group]
    events = lineage["event"] if lineage.done else None
    series = [("score", lineage["score"] if lineage.done else None)]
    series += [(k, lineage[f"hp/{k}"] if lineage.done else None) for k in names]
    for ax, (name, values) in zip(np.atleast_1d(axes), series, strict=True):
        for i in members if values is not None else []:
            (line,) = ax.step(steps, values[:, i], where="post", lw=1.2)
            moved = events[:, i] != 0
            ax.plot(steps[moved], values[moved, i], "o", ms=3, color=line.get_color())
        ax.set_ylabel(name)
        positive = values is not None and np.all(values > 0)
        if name != "score" and positive and values.max() > 10 * values.min():
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[-1].set_xlabel("environment steps (per member)")
    np.atleast_1d(axes)[0].set_title(
        f"{result.plan.base.env} {lineage.name}: seed "
        f"{result.plan.seeds[group]}, {len(members)} members (dots: copied or "
        "refilled after the round)"
    )
    fig.tight_layout()
    write_whole(path, fig.savefig)
    plt.close(fig)
    return path
