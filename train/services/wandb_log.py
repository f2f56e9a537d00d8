"""A run's config and rows in a Weights & Biases run (the ``wandb`` extra).

``WandbLog.opener(project)`` checks, before anything compiles, that the
``wandb`` package is there (one-line ``RunArgError`` naming ``{wandb}``
otherwise) and gives the function that starts the W&B run once the run's
spec is known: its config is the run's ``config.json`` (learner, config,
hyperparameters, seed, ...), each row is logged against ``env_steps`` with
the tags TensorBoard uses (``charts/``, ``losses/``, ``eval/``), and the
summary gets the final status and return. The W&B run's id is kept in
``config.json`` (``wandb``), so a resumed run goes on logging into it
(``WandbLog.resumer``). ``WANDB_MODE=offline`` writes it locally, for
``wandb sync`` later.

W&B writes through its own process and threads; the run's own files do not
depend on it. When W&B fails mid-run (its directory full or read-only, its
process gone) the run says so in one line and goes on without it; while a
W&B run is open, a logging handler that cannot write (W&B's debug log on a
full disk) is not reported per record (``logging.raiseExceptions``).
"""

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ondevice_rl.train.run.artifacts import CONFIG_FILE, read_json
from ondevice_rl.train.run.checks import RunArgError
from ondevice_rl.train.services.progress import to_stderr
from ondevice_rl.train.services.tensorboard import metric_tag

#: ``config.json``'s key for the W&B project and run id.
INFO_KEY = "wandb"
STEP = "env_steps"

#: ``open(spec, info, out) -> WandbLog | None``, called once the run is set up.
Opener = Callable[[Any, dict, Path | None], "WandbLog | None"]


def _none(spec: Any, info: dict, out: Path | None) -> None:
    return None


def _import_wandb():
    try:  # lazy: wandb is an optional extra
        import wandb
    except ImportError:
        raise RunArgError(
            "{wandb} needs the wandb package: pip install 'ondevice_rl[wandb]'"
        ) from None
    return wandb


class WandbLog:
    """One W&B run: ``append`` rows, ``finish`` with the summary."""

    def __init__(self, run: Any, steps_per_update: int):
        self.run = run
        self.steps_per_update = steps_per_update
        self.failed: str | None = None  # why W&B stopped, if it did
        run.define_metric(STEP)
        run.define_metric("*", step_metric=STEP)

    def _call(self, call: Callable[[], Any]) -> None:
        """``call()`` unless W&B failed before; its failure is one line,
        after which the run goes on without W&B."""
        if self.failed is not None:
            return
        try:
            call()
        except Exception as e:  # noqa: BLE001  (W&B raises its own kinds)
            self.failed = _first_line(e)
            to_stderr(
                f"ondevice-rl: warning: W&B stopped ({self.failed}); training "
                "goes on without it, its own files unaffected"
            )

    @classmethod
    def opener(cls, project: str | None) -> Opener:
        """What starts a new W&B run in ``project`` (None: no W&B)."""
        if project is None:
            return _none
        if not str(project).strip():
            raise RunArgError("{wandb} must name a project, got an empty string")
        wandb = _import_wandb()

        def open_run(spec: Any, info: dict, out: Path | None) -> "WandbLog":
            name = out.name if out is not None else None
            log = cls._start(wandb, spec, project=project, name=name, config=info)
            info[INFO_KEY] = {"project": project, "id": log.run.id}
            return log

        return open_run

    @classmethod
    def resumer(cls, out: Path) -> Opener:
        """What goes on logging a resumed run into the W&B run its
        ``config.json`` names (nothing if it names none)."""

        def open_run(spec: Any, info: dict, out: Path | None) -> "WandbLog | None":
            stored = read_json(out / CONFIG_FILE).get(INFO_KEY)
            if not isinstance(stored, dict) or not stored.get("id"):
                return None
            wandb = _import_wandb()
            info[INFO_KEY] = stored
            return cls._start(
                wandb,
                spec,
                project=stored.get("project"),
                id=stored["id"],
                resume="allow",
                config=info,
            )

        return open_run

    @classmethod
    def _start(cls, wandb: Any, spec: Any, **kwargs: Any) -> "WandbLog":
        logging.raiseExceptions = False  # see the module's text
        try:
            run = wandb.init(reinit="create_new", **kwargs)
        except Exception as e:  # noqa: BLE001  (W&B raises its own kinds)
            raise ValueError(f"W&B could not start a run: {_first_line(e)}") from None
        return cls(run, spec.config.steps_per_update)

    def append(
        self, rows: dict[str, np.ndarray], updates: np.ndarray, sps: float
    ) -> None:
        """Logs the ``[R]`` rows ending at ``updates`` (non-finite values
        left out) and ``sps`` with the last."""
        per_update = self.steps_per_update
        columns = {k: np.asarray(v, np.float64).tolist() for k, v in rows.items()}
        count = len(updates)
        for i, update in enumerate(np.asarray(updates).tolist()):
            data = {
                metric_tag(k): v[i] for k, v in columns.items() if math.isfinite(v[i])
            }
            if i == count - 1:
                data[metric_tag("sps")] = float(sps)
            data.update({STEP: update * per_update, "update": update})
            self._call(lambda data=data: self.run.log(data))

    def finish(self, status: dict) -> None:
        """The summary (status, updates, final return, ...); ends the run."""
        for key, value in status.items():
            if isinstance(value, int | float | str):
                self._call(lambda k=key, v=value: self.run.summary.__setitem__(k, v))
        code = 0 if status.get("status") == "finished" else 1
        self._call(lambda: self.run.finish(exit_code=code))


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
