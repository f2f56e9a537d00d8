"""What an XLA:GPU program launches, read from XLA's dump: counts per update.

XLA's GPU compiler writes, with ``--xla_dump_to=DIR``, the runtime's thunk
sequence (``*thunk_sequence_after_thunk_passes.txt``: kernels, memcpys,
command buffers, while loops with their condition and body, in launch
order), the thunks' metadata (``*thunk_metadata.txt``: each thunk's HLO
instruction) and the optimised HLO (``*gpu_after_optimizations.txt``: each
while loop's ``known_trip_count`` and the source line it came from). This
module parses the three into a tree and counts, per execution:

* **work items**: kernels (fusions, GEMMs, sorts, library calls) and
  memcpys, wherever they run;
* **graph launches**: command buffers (CUDA graphs), each one launch;
* **launches outside graphs**: work items not inside a command buffer,
  each launched on its own.

A while loop's body counts ``trip_count`` times and its condition not at
all: with a known trip count XLA's while thunk runs the body that many
times without evaluating it (a loop without one is an error here). A
conditional's branches count by the share of updates that take them: for a
predicate, ``p_true`` given by the function that calls it, by default one
half each; a ``switch``'s branches one share each. Pure text
parsing: no JAX, no GPU.
"""

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_LINE = re.compile(r"^(\s*)(\d+): (k\w+)\s*\[[^\]]*\]\s*(.*)$")
_SECTION = re.compile(
    r"^\s*(condition|body|false_branch|true_branch|branch[ _]?\d+):\s*$"
)
_MEMCPY = {"kCopy", "kMemcpy", "kMemset32BitValue", "kMemzero", "kDeviceToDevice"}
_WRAPPERS = {"kSequential", "kDynamicSliceFusion"}  # run what they hold
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_FRAME = re.compile(r"stack_frame_id=(\d+)")


@dataclass
class Thunk:
    """One line of the thunk sequence and what runs under it."""

    kind: str
    ident: int
    name: str  # the kernel's name (a fusion's), or the kind again
    indent: int
    children: list["Thunk"] = field(default_factory=list)
    sections: dict[str, list["Thunk"]] = field(default_factory=dict)
    hlo: str = ""  # the HLO instruction (while loops)
    trip_count: int | None = None
    source: str = ""  # file:line (function) of a while loop's call site


@dataclass
class Counts:
    """Per-execution counts of a thunk list (floats: weights may split)."""

    items: float = 0.0
    memcpys: float = 0.0
    graph_launches: float = 0.0
    outside: float = 0.0  # launches outside graphs
    kinds: Counter = field(default_factory=Counter)

    def add(self, other: "Counts", weight: float = 1.0) -> None:
        self.items += weight * other.items
        self.memcpys += weight * other.memcpys
        self.graph_launches += weight * other.graph_launches
        self.outside += weight * other.outside
        for k, v in other.kinds.items():
            self.kinds[k] += weight * v

    @property
    def launches(self) -> float:
        """Launches the host makes: graphs plus loose work items."""
        return self.graph_launches + self.outside

    def as_dict(self) -> dict:
        return dict(
            items=round(self.items, 2),
            memcpys=round(self.memcpys, 2),
            graph_launches=round(self.graph_launches, 2),
            outside_graphs=round(self.outside, 2),
            launches=round(self.launches, 2),
            kinds={k: round(v, 2) for k, v in sorted(self.kinds.items())},
        )


def item_kind(thunk: Thunk) -> str:
    """A work item's kind: ``memcpy``, ``gemm``, ``custom_call``, ``sort``
    or ``fusion`` (every other kernel)."""
    if thunk.kind in _MEMCPY:
        return "memcpy"
    if thunk.kind == "kCustomCall":
        return "custom_call"
    name = thunk.name.split(" ", 1)[0]
    if "gemm" in name or thunk.kind in ("kGemm", "kCublasLtMatmul"):
        return "gemm"
    if name.startswith("sort"):
        return "sort"
    return "fusion"


def parse_sequence(text: str) -> list[Thunk]:
    """The thunk sequence's top level, each thunk with its children and, for
    a while loop, its ``condition`` and ``body`` sections."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    pos = 0

    def block(min_indent: int) -> list[Thunk]:
        """Thunks at indentation ≥ ``min_indent`` from ``pos`` on."""
        nonlocal pos
        out: list[Thunk] = []
        while pos < len(lines):
            line = lines[pos]
            if _SECTION.match(line):
                return out  # the enclosing loop's next section
            m = _LINE.match(line)
            if m is None:
                raise ValueError(f"unreadable thunk line: {line!r}")
            indent = len(m.group(1))
            if indent < min_indent:
                return out
            pos += 1
            rest = m.group(4).strip()
            thunk = Thunk(m.group(3), int(m.group(2)), rest or m.group(3), indent)
            thunk.children = block(indent + 1)
            while (
                thunk.kind in ("kWhile", "kConditional")
                and pos < len(lines)
                and (s := _SECTION.match(lines[pos]))
            ):
                pos += 1
                thunk.sections[s.group(1)] = block(indent + 1)
            out.append(thunk)
        return out

    top = block(0)
    if pos != len(lines):
        raise ValueError(f"thunk sequence not read past line {pos + 1}")
    return top


def _annotations(metadata: str) -> dict[int, str]:
    """``thunk_id -> HLO instruction`` from ``*thunk_metadata.txt``."""
    out = {}
    for entry in metadata.split("thunk_metadata {")[1:]:
        name = re.search(r'profile_annotation: "([^"]*)"', entry)
        ident = re.search(r"thunk_id: (\d+)", entry)
        if name and ident:
            out[int(ident.group(1))] = name.group(1)
    return out


def _sources(hlo: str) -> tuple[dict[str, int | None], dict[str, str]]:
    """Each while loop's trip count and each loop's or conditional's call
    site (``file:line (function)``, after the innermost ``jax.named_scope``
    around it when there is one), from the optimised HLO's text and its
    stack-frame tables."""
    trips, frames, scopes = {}, {}, {}
    for m in re.finditer(
        r"^\s*%?((?:while|cond|conditional)[\w.\-]*) = .*$", hlo, re.M
    ):
        line, name = m.group(0), m.group(1)
        trip = _TRIP.search(line)
        trips[name] = int(trip.group(1)) if trip else None
        frame = _FRAME.search(line)
        if frame:
            frames[name] = int(frame.group(1))
        op_name = re.search(r'op_name="([^"]*)"', line)
        scopes[name] = _scope(op_name.group(1)) if op_name else ""
    table = _frame_table(hlo)
    sources = {}
    for name in trips:
        site = table.get(frames.get(name, -1), "")
        sources[name] = f"{scopes[name]}: {site}" if scopes[name] else site
    return trips, sources


_JAX_PATH = re.compile(
    r"^(jit|pjit|vmap|jvp|transpose|checkpoint|remat|custom_jvp_call|"
    r"custom_vjp_call|shard_map|xmap)\b|^(while|body|cond|closed_call|"
    r"branch_\d+_fun|scan|switch)$"
)


def _scope(op_name: str) -> str:
    """The innermost ``jax.named_scope`` in an op_name path, or ""."""
    parts = [p for p in op_name.split("/") if p and not _JAX_PATH.match(p)]
    return parts[-1] if parts else ""


def _frame_table(hlo: str) -> dict[int, str]:
    """``stack_frame_id -> "file:line (function)"`` of the frame itself."""

    def section(name: str) -> dict[int, str]:
        m = re.search(rf"^{name}\n((?:\d+ .*\n?)*)", hlo, re.M)
        rows = m.group(1).splitlines() if m else []
        return dict((int(r.split(" ", 1)[0]), r.split(" ", 1)[1]) for r in rows)

    files = {
        k: v.strip('"').rsplit("/", 1)[-1] for k, v in section("FileNames").items()
    }
    funcs = {k: v.strip('"') for k, v in section("FunctionNames").items()}
    locs = {}
    for k, v in section("FileLocations").items():
        f = re.search(r"file_name_id=(\d+) function_name_id=(\d+) line=(\d+)", v)
        if f:
            fn = funcs.get(int(f.group(2)), "?").rsplit(".", 1)[-1]
            locs[k] = f"{files.get(int(f.group(1)), '?')}:{f.group(3)} ({fn})"
    out = {}
    for k, v in section("StackFrames").items():
        loc = re.search(r"file_location_id=(\d+)", v)
        if loc:
            out[k] = locs.get(int(loc.group(1)), "")
    return out


def load_program(dump_dir: Path, module: str = "jit_") -> list[Thunk]:
    """The thunk tree of the one GPU module in ``dump_dir`` whose name
    contains ``module``, while loops annotated with trip counts and sources."""
    seqs = sorted(dump_dir.glob("*thunk_sequence_after_thunk_passes.txt"))
    seqs = [p for p in seqs if module in p.name] or seqs
    if not seqs:
        raise FileNotFoundError(f"no thunk sequence in {dump_dir}")
    seq = max(seqs, key=lambda p: p.stat().st_size)  # the program, not helpers
    prefix = seq.name.split(".thunk_sequence")[0]
    meta = dump_dir / f"{prefix}.thunk_metadata.txt"
    hlo = next(dump_dir.glob(f"{prefix}.*gpu_after_optimizations.txt"))
    return annotate(seq.read_text(), meta.read_text(), hlo.read_text())


def annotate(sequence: str, metadata: str, hlo: str) -> list[Thunk]:
    """``parse_sequence`` with each while loop's HLO name, trip count and
    call site filled in."""
    top = parse_sequence(sequence)
    names = _annotations(metadata)
    trips, sources = _sources(hlo)
    for thunk in walk(top):
        if thunk.kind in ("kWhile", "kConditional"):
            thunk.hlo = names.get(thunk.ident, "")
            thunk.trip_count = trips.get(thunk.hlo)
            thunk.source = sources.get(thunk.hlo, "")
    return top


def walk(thunks: list[Thunk]):
    """Every thunk of the tree, depth first."""
    for t in thunks:
        yield t
        yield from walk(t.children)
        for section in t.sections.values():
            yield from walk(section)


def count(
    thunks: list[Thunk],
    in_graph: bool = False,
    p_true: dict[int, float] | None = None,
) -> Counts:
    """Counts of one execution of ``thunks`` (nested loops by their trip
    counts); ``in_graph``: they run inside a command buffer; ``p_true``:
    ``id(conditional) -> `` the share of executions taking its true branch
    (default one half)."""
    total = Counts()
    p_true = p_true or {}
    for t in thunks:
        if t.kind == "kCommandBuffer":
            total.graph_launches += 0 if in_graph else 1
            total.add(count(t.children, True, p_true))
        elif t.kind == "kWhile":
            if t.trip_count is None:
                raise ValueError(f"while loop {t.hlo or t.ident} has no trip count")
            body = count(t.sections.get("body", []), in_graph, p_true)
            total.add(body, t.trip_count)
        elif t.kind == "kConditional":
            names = list(t.sections)
            for name, section in t.sections.items():
                if name in ("true_branch", "false_branch"):
                    # XLA's conditional thunk runs its first branch when the
                    # predicate holds (the HLO's true_computation), though
                    # the dump labels that one false_branch: by position.
                    w = p_true.get(id(t), 0.5)
                    w = w if name == names[0] else 1.0 - w
                else:
                    w = 1.0 / len(t.sections)
                total.add(count(section, in_graph, p_true), w)
        elif t.kind in _WRAPPERS:
            total.add(count(t.children, in_graph, p_true))
        else:
            total.items += 1
            total.memcpys += t.kind in _MEMCPY
            total.outside += 0 if in_graph else 1
            total.kinds[item_kind(t)] += 1
    return total


def loops(thunks: list[Thunk], depth: int = 0, in_graph: bool = False):
    """``(depth, loop, in_graph)`` for every while loop under ``thunks``."""
    for t in thunks:
        graph = in_graph or t.kind == "kCommandBuffer"
        if t.kind == "kWhile":
            yield depth, t, in_graph
            for section in t.sections.values():
                yield from loops(section, depth + 1, in_graph)
        else:
            yield from loops(t.children, depth, graph)
            for section in t.sections.values():
                yield from loops(section, depth, graph)


def update_loop(thunks: list[Thunk], num_updates: int) -> Thunk:
    """The outermost while loop that runs ``num_updates`` times."""
    for _, loop, _ in loops(thunks):
        if loop.trip_count == num_updates:
            return loop
    trips = sorted({lp.trip_count for _, lp, _ in loops(thunks)}, key=str)
    raise ValueError(f"no loop of {num_updates} iterations (loops of {trips})")


def per_update(
    thunks: list[Thunk],
    num_updates: int,
    p_true: dict[str, list[float]] | None = None,
) -> dict:
    """One update's counts, and each loop inside it per iteration:
    ``{"update", "direct", "loops", "conditionals"}``. ``p_true``: by the
    function a conditional is called from, the share of updates that take
    the true branch of each of its conditionals, in the order they run
    (a conditional not given: one half)."""
    loop = update_loop(thunks, num_updates)
    body = loop.sections.get("body", [])
    given = {k: list(v) for k, v in (p_true or {}).items()}
    shares, conditionals = {}, []
    for t in walk(body):
        if t.kind == "kConditional":
            function = t.source.rpartition("(")[2].rstrip(")")
            queue = given.get(function, [])
            share = queue.pop(0) if queue else None
            shares[id(t)] = 0.5 if share is None else share
            conditionals.append(
                dict(source=t.source, p_true=shares[id(t)], given=share is not None)
            )
    direct = count([t for t in body if t.kind != "kWhile"], False, shares)
    rows = []
    for depth, inner, in_graph in loops(body):
        per_iter = count(inner.sections.get("body", []), in_graph, shares)
        rows.append(
            dict(
                depth=depth + 1,
                source=inner.source,
                trip_count=inner.trip_count,
                per_iteration=per_iter.as_dict(),
            )
        )
    return dict(
        update=count(body, False, shares).as_dict(),
        direct=direct.as_dict(),
        loops=rows,
        conditionals=conditionals,
    )
