"""mkdocs hook: each learner's config fields as a table, read from the code.

A page line ``<!-- config-tables -->`` becomes, for every registered
learner, a section with the table of its config's fields (flag, default,
and for traced hyperparameters their valid range and help text), so the
documented learners and defaults are the code's when the site is built.
"""

import dataclasses
import re

MARKER = re.compile(r"^<!-- config-tables -->$", re.MULTILINE)


def _default(field: dataclasses.Field) -> str:
    value = field.default
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def config_table(name: str) -> str:
    """The Markdown table of learner ``name``'s config fields."""
    from ondevice_rl.train import get_algorithm

    config = get_algorithm(name).config
    ranges = getattr(config, "RANGES", {})
    lines = [
        "| field | flag | default | traced: valid range | about |",
        "|---|---|---|---|---|",
    ]
    for field in dataclasses.fields(config):
        flag = "--" + field.name.replace("_", "-")
        valid = str(ranges[field.name]) if field.name in ranges else ""
        about = field.metadata.get("help", "") or ""
        lines.append(
            f"| `{field.name}` | `{flag}` | `{_default(field)}` | {valid} | {about} |"
        )
    return "\n".join(lines)


def config_tables() -> str:
    """A ``###`` section per registered learner, with its config table."""
    from ondevice_rl.train import algorithms, get_algorithm

    sections = []
    for name in algorithms():
        title = get_algorithm(name).config.__name__
        sections.append(f"### `{name}`: `{title}`\n\n{config_table(name)}\n")
    return "\n".join(sections)


def on_page_markdown(markdown, page, config, files):
    return MARKER.sub(lambda m: config_tables(), markdown)
