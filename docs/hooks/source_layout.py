"""mkdocs hook: the installed package layout, for the API reference.

The wheel maps ``ondevice_rl.envs`` to ``envs/`` and ``ondevice_rl.train`` to
``train/``; mkdocstrings reads sources from folders laid out as imported.
Before the build this writes ``build/docs-src/ondevice_rl/`` with links to
the core's files and to ``envs/`` and ``train/`` (mkdocs.yml points the
handler there).
"""

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "build" / "docs-src" / "ondevice_rl"
SUBPACKAGES = {"envs": ROOT / "envs", "train": ROOT / "train"}


def write_layout() -> Path:
    """Writes the linked layout; returns the package folder."""
    if LAYOUT.exists():
        shutil.rmtree(LAYOUT)
    LAYOUT.mkdir(parents=True)
    for path in (ROOT / "ondevice_rl").iterdir():
        if path.name != "__pycache__":
            (LAYOUT / path.name).symlink_to(path)
    for name, path in SUBPACKAGES.items():
        (LAYOUT / name).symlink_to(path, target_is_directory=True)
    return LAYOUT


def on_startup(command, dirty):
    write_layout()


def on_config(config):
    write_layout()  # also for builds started without on_startup (mkdocs API)
    return config
