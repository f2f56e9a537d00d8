"""griffe extension: the names a package face imports on first use.

``ondevice_rl`` and ``ondevice_rl.train`` export some names through a module
``__getattr__`` reading a ``{name: module}`` dict (``_LAZY``, ``_FACE``), so
that importing the package stays cheap. Static analysis cannot see those
names; this extension adds each as an alias of ``module.name``, so the API
reference documents them under the face (and fails if one is missing).
"""

import ast

import griffe

FACE_TABLES = ("_FACE", "_LAZY")


class LazyFaces(griffe.Extension):
    """Adds a module's lazily imported names as aliases."""

    def on_module_members(self, *, mod: griffe.Module, **kwargs) -> None:
        for table in FACE_TABLES:
            member = mod.members.get(table)
            if member is None or member.is_alias or member.value is None:
                continue
            for name, module in ast.literal_eval(str(member.value)).items():
                mod.set_member(name, griffe.Alias(name, f"{module}.{name}", parent=mod))
