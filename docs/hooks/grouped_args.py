"""griffe extension: ``a, b: text`` in a docstring's ``Args:`` section.

The code's docstrings document parameters that share a shape together
(``rewards, values: [T, B] float32``); Google style wants one entry per
parameter. This extension repeats such an entry for each name before griffe
parses it, so each name is still checked against the signature.
"""

import re

import griffe

SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters):\s*$")
GROUPED = re.compile(r"^(\s+)(\w+(?:\s*,\s*\w+)+):(.*)$")


def split_grouped_args(text: str) -> str:
    """``text`` with each grouped ``Args:`` entry repeated per name."""
    lines = text.splitlines()
    out: list[str] = []
    section_indent = None
    i = 0
    while i < len(lines):
        line = lines[i]
        header = SECTION.match(line)
        if header:
            section_indent = len(header.group(1))
            out.append(line)
            i += 1
            continue
        if section_indent is not None and line.strip():
            indent = len(line) - len(line.lstrip())
            if indent <= section_indent:
                section_indent = None  # the section ended
        grouped = GROUPED.match(line) if section_indent is not None else None
        if grouped is None:
            out.append(line)
            i += 1
            continue
        indent, names, first = grouped.groups()
        body = [first]
        i += 1
        while i < len(lines) and (
            not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)
        ):
            if not lines[i].strip():
                break
            body.append(lines[i])
            i += 1
        for name in re.split(r"\s*,\s*", names):
            out.append(f"{indent}{name}:{body[0]}")
            out.extend(body[1:])
    return "\n".join(out)


class GroupedArgs(griffe.Extension):
    """Splits grouped ``Args:`` entries of every function's docstring."""

    def on_function_instance(self, *, func: griffe.Function, **kwargs) -> None:
        if func.docstring is not None:
            func.docstring.value = split_grouped_args(func.docstring.value)
