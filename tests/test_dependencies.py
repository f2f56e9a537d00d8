"""The runtime dependencies ``pyproject.toml`` declares are what the package
imports, and the package is licensed as it says."""

import ast
import importlib.metadata
import pathlib
import re
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = ("ondevice_rl", "envs", "train")
#: Declared though no module of ours imports them, and why.
NOT_IMPORTED = {
    "six": "gymnax 1.0.1 imports six without declaring it",
}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _dist(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _module_names() -> dict[str, set[str]]:
    """``dist -> {top-level import names}`` of the installed distributions."""
    names: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            names.setdefault(_dist(dist), set()).add(module)
    return names


def _imports() -> tuple[set[str], set[str]]:
    """``(at module level, anywhere)``: the top-level names of the
    third-party modules our sources import."""
    local = {"ondevice_rl", *sys.stdlib_module_names}
    module_level, anywhere = set(), set()
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for node in _module_level(tree.body):
                module_level |= _names(node)
            for node in ast.walk(tree):
                anywhere |= _names(node)
    return module_level - local, anywhere - local


def _module_level(body: list) -> list[ast.AST]:
    """The statements run on import: the body and, nested, the bodies of
    its ``try``/``except``/``if``/``with`` blocks (not of functions or
    classes)."""
    found = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                found += _module_level(inner)
    return found


def _names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name.split(".")[0] for alias in node.names}
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return {node.module.split(".")[0]}
    return set()


def test_runtime_dependencies_are_what_the_package_imports():
    declared = {_dist(r) for r in _project()["dependencies"]}
    installed = _module_names()
    provides = {d: installed.get(d, {d.replace("-", "_")}) for d in declared}
    module_level, anywhere = _imports()
    assert {"jax", "numpy", "optax", "orbax"} <= module_level  # the scan works

    provided = set().union(*provides.values())
    missing = module_level - provided
    assert not missing, f"imported on import but not declared: {sorted(missing)}"

    unused = {d for d, names in provides.items() if not names & anywhere}
    expected = set(NOT_IMPORTED) & declared
    assert unused == expected, (
        f"declared but not imported: {sorted(unused - expected)}; "
        f"imported after all: {sorted(expected - unused)}"
    )


def test_benchmark_and_test_only_packages_are_extras():
    project = _project()
    declared = {_dist(r) for r in project["dependencies"]}
    extras = {
        k: {_dist(r) for r in v} for k, v in project["optional-dependencies"].items()
    }
    assert not {"flashbax", "chex", "wandb", "tensorboard"} & declared
    assert "flashbax" in extras["bench"] and "flashbax" in extras["test"]
    assert "chex" in extras["test"]
    assert extras["wandb"] == {"wandb"} and extras["tensorboard"] == {"tensorboard"}


def test_the_licence_is_apache_2():
    assert _project()["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
