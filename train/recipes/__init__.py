"""Recipes: the shipped TOML files of tuned settings, their loader, and the
results table they feed (``python -m ondevice_rl.train.recipes.results``)."""

from ondevice_rl.train.recipes.loader import (
    describe,
    list_recipes,
    load_recipe,
    recipe_algorithm,
    recipe_path,
)

__all__ = [
    "describe",
    "list_recipes",
    "load_recipe",
    "recipe_algorithm",
    "recipe_path",
]
