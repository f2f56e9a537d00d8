"""mkdocs hook: the installed package layout, for the API reference.

The wheel maps ``ondevice_rl.envs`` to ``envs/`` and ``ondevice_rl.train`` to
``train/``; mkdocstrings reads sources from folders laid out as imported.
Before the build this keeps ``build/docs-src/ondevice_rl/`` as links to the
core's files and to ``envs/`` and ``train/`` (mkdocs.yml points the handler
there). Links are added and removed one by one, so two builds at once agree.
"""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "build" / "docs-src" / "ondevice_rl"
SUBPACKAGES = {"envs": ROOT / "envs", "train": ROOT / "train"}


def wanted_links() -> dict[str, Path]:
    """Name in the layout -> the file or folder it links to."""
    core = {
        path.name: path
        for path in (ROOT / "ondevice_rl").iterdir()
        if path.name != "__pycache__"
    }
    return {**core, **SUBPACKAGES}


def write_layout() -> Path:
    """Brings the linked layout up to date; returns the package folder."""
    LAYOUT.mkdir(parents=True, exist_ok=True)
    wanted = wanted_links()
    for entry in LAYOUT.iterdir():
        if not entry.is_symlink():
            continue  # nothing of ours
        if entry.name not in wanted or os.readlink(entry) != str(wanted[entry.name]):
            entry.unlink(missing_ok=True)
    for name, target in wanted.items():
        try:
            (LAYOUT / name).symlink_to(target, target_is_directory=target.is_dir())
        except FileExistsError:
            pass  # already there (or written by a build running beside this one)
    return LAYOUT


def on_startup(command, dirty):
    write_layout()


def on_config(config):
    write_layout()  # also for builds started without on_startup (mkdocs API)
    return config
