"""The built distribution holds every package folder and the recipes."""

import pathlib

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed_for_the_wheel():
    setup = _setuptools()
    found = set()
    for package, folder in setup["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            parts = init.parent.relative_to(base).parts
            if "__pycache__" in parts or any(p.startswith(".") for p in parts):
                continue
            found.add(".".join((package, *parts)))
    # A mapped folder nested in another root (none today) would be listed twice.
    assert found == set(setup["packages"])


def test_recipes_ship_as_package_data():
    data = _setuptools()["package-data"]["ondevice_rl.train.recipes"]
    assert data == ["*.toml"]
    assert list((ROOT / "train" / "recipes").glob("*.toml"))
