"""The names of the JAX suites' environments, registered without importing
the suites: ``craftax/``, ``navix/``, ``xminigrid/``, ``jumanji/``,
``popgym/`` and ``pgx/`` followed by the suite's own id. A suite that is not
installed has its prefix registered as unavailable, with the line saying
what to install; environments left out say why.
"""

import importlib.util
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from ondevice_rl.env.types import Environment
from ondevice_rl.envs.craftax_adapter import CRAFTAX_IDS, CraftaxAdapter
from ondevice_rl.envs.jumanji_adapter import (
    JUMANJI_IDS,
    JUMANJI_LEFT_OUT,
    JumanjiAdapter,
)
from ondevice_rl.envs.jumanji_views import maze_egocentric
from ondevice_rl.envs.navix_adapter import NAVIX_IDS, NavixAdapter
from ondevice_rl.envs.pgx_adapter import PGX_IDS, PgxAdapter
from ondevice_rl.envs.popgym_adapter import (
    HOW_TO_INSTALL,
    POPGYM_IDS,
    PopgymArcadeAdapter,
)
from ondevice_rl.envs.registry import register, register_unavailable
from ondevice_rl.envs.suite_adapter import missing_suite_reason
from ondevice_rl.envs.xminigrid_adapter import (
    MINIGRID_IDS,
    XLAND_IDS,
    XMiniGridAdapter,
)


class Suite(NamedTuple):
    module: str  # the suite's import name
    distribution: str  # its name on PyPI
    extra: str  # ours: pip install 'ondevice_rl[extra]'
    adapter: Callable[..., Environment]  # called with the suite's id
    ids: tuple[str, ...]
    how: str = ""  # how to install, when the extra alone is not enough


#: prefix → the suite behind ``prefix/<suite id>``.
SUITES = {
    "craftax": Suite("craftax", "craftax", "craftax", CraftaxAdapter, CRAFTAX_IDS),
    "navix": Suite("navix", "navix", "navix", NavixAdapter, NAVIX_IDS),
    "xminigrid": Suite(
        "xminigrid",
        "xminigrid",
        "xminigrid",
        XMiniGridAdapter,
        MINIGRID_IDS + XLAND_IDS,
    ),
    "jumanji": Suite("jumanji", "jumanji", "jumanji", JumanjiAdapter, (*JUMANJI_IDS,)),
    "popgym": Suite(
        "popgym_arcade",
        "popgym-arcade",
        "popgym",
        PopgymArcadeAdapter,
        POPGYM_IDS,
        HOW_TO_INSTALL,
    ),
    "pgx": Suite("pgx", "pgx", "pgx", PgxAdapter, (*PGX_IDS,)),
}
#: Views of suite environments laid out for a network: name → factory,
#: registered when the suite (the name's prefix) is installed.
VIEWS = {"jumanji/Maze-v0-egocentric": maze_egocentric}
#: Environments of the suites that are not adapted, and why.
LEFT_OUT = {f"jumanji/{name}": why for name, why in JUMANJI_LEFT_OUT.items()}


def register_suites() -> None:
    """Registers every suite's names (or its prefix as unavailable)."""
    for prefix, suite in SUITES.items():
        if importlib.util.find_spec(suite.module) is None:
            reason = missing_suite_reason(suite.distribution, suite.extra, suite.how)
            register_unavailable(f"{prefix}/", reason)
            continue
        for suite_id in suite.ids:
            register(f"{prefix}/{suite_id}", partial(suite.adapter, suite_id))
        for name, factory in VIEWS.items():
            if name.startswith(f"{prefix}/"):
                register(name, factory)
    for name, why in LEFT_OUT.items():
        register_unavailable(name, f"left out: {why}")
