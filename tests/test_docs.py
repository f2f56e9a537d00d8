"""The documentation runs: every Python and shell snippet of README.md and
docs/*.md, the site's strict build, the README's links.

A small collector of our own rather than mktestdocs or pytest-markdown-docs:
those run Python fences only (mktestdocs also bash, but in the caller's
directory and without a per-fence skip), while these docs also hold shell
sessions that must run in a scratch directory, with the training commands
cut short, and a fence that cannot run here says why in its info string
(```` ```bash {skip="needs a GPU"} ````), counted below; a fence whose
paths cheaper default tests already run names them in a ``slow="..."``
attribute (``tests/FILE.py::TEST``, each checked to be in the default
suite) and runs under ``make test-slow``.

* Python fences run in this process (JAX is already imported, so a snippet
  costs its compiles only), each in a fresh namespace (an undefined name
  fails) with a scratch directory as the working directory.
* Shell fences (``bash``, ``sh``, ``shell``, and a ``console`` session's
  ``$`` commands) run in ``bash -e -o pipefail``
  as subprocesses in a scratch directory, with this interpreter's ``bin/``
  first on ``PATH`` (``ondevice-rl``), the suite's ``JAX_PLATFORMS`` and
  ``XLA_FLAGS``, and the suite's compilation cache (``conftest.py``).
  A fence's leading plain commands (no variables, pipes, redirections,
  heredocs) run one by one first, its ``ondevice-rl ...`` ones through the
  CLI's ``main`` in this process: each would otherwise spend seconds
  starting an interpreter and importing JAX (the fences that set
  ``XLA_FLAGS`` still run the console script); bash runs the rest.
* Training is cut short: ``--total-timesteps N`` and ``total_timesteps=N``
  become ``N // 100`` (at least 4096), which keeps their order above 409,600
  (a resume that extends a run still extends it) and leaves each learner a
  few updates: compiling, not running, is what a snippet costs, so the
  pages pick step counts whose cut runs plan one segment program.
  ``bench env`` likewise runs at its ``--quick`` scan lengths (64K env steps
  per batch size instead of 2M): it times a scan, and compiling it is what
  the snippet proves.
"""

import ast
import importlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from ondevice_rl.train.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON = {"python", "py"}
SHELL = {"bash", "sh", "shell"}
CONSOLE = {"console"}  # a session: "$ " lines are commands, the rest output
MAX_SKIPPED = 7
SCALE, FLOOR = 100, 4096  # total timesteps N -> max(N // SCALE, FLOOR)

OPENING = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
SKIP = re.compile(r'skip="(?P<reason>[^"]*)"')
SLOW = re.compile(r'slow="(?P<reason>[^"]*)"')
COVERED_BY = re.compile(r"tests/(?P<file>\w+\.py)::(?P<test>\w+)")
TIMESTEPS = re.compile(r"(--total-timesteps[ =]|total_timesteps=)(\d[\d_]*)")
BENCH_ENV = re.compile(r"(ondevice-rl bench env)(?!.*--quick)")
SHELL_SYNTAX = re.compile(r"[|&;<>$`(){}*?~\[\]\\]")  # left to bash
ASSIGNMENT = re.compile(r"^\w+=")


class Snippet(NamedTuple):
    page: Path
    line: int  # of the opening fence, 1-based
    language: str  # "python" or "shell"
    code: str
    skip: str | None  # the reason, if it is not run here
    slow: str | None  # the default test that covers it, if it runs under slow

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def fences(text: str) -> list[tuple[int, str, str]]:
    """``(opening line, info string, code)`` of every fenced block (a fence
    inside a list item is dedented)."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opening = OPENING.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body, j = [], i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j])
            j += 1
        blocks.append((i + 1, opening["info"].strip(), "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def collect(pages: list[Path] = PAGES) -> list[Snippet]:
    snippets = []
    for page in pages:
        for line, info, code in fences(page.read_text()):
            words = info.replace("{", " ").split()
            language = words[0].lower() if words else ""
            if language not in PYTHON | SHELL | CONSOLE:
                continue
            skip, slow = SKIP.search(info), SLOW.search(info)
            kind = "python" if language in PYTHON else "shell"
            if language in CONSOLE:
                code = session_commands(code)
            snippets.append(
                Snippet(
                    page,
                    line,
                    kind,
                    code,
                    skip["reason"] if skip else None,
                    slow["reason"] if slow else None,
                )  # fmt: skip
            )
    return snippets


def session_commands(session: str) -> str:
    """The commands of a console session: its ``$ `` lines, with the lines
    a trailing backslash continues; output lines are left out."""
    commands, continued = [], False
    for line in session.splitlines():
        if line.startswith("$ ") or continued:
            commands.append(
                line[2:] if line.startswith("$ ") and not continued else line
            )
            continued = line.endswith("\\")
    return "\n".join(commands) + "\n"


def shortened(code: str) -> str:
    """``code`` with every total-timesteps count cut to a few updates' worth
    and ``bench env`` at its quick scan lengths."""

    def cut(match: re.Match) -> str:
        steps = int(match[2].replace("_", ""))
        return f"{match[1]}{max(steps // SCALE, FLOOR)}"

    return BENCH_ENV.sub(r"\1 --quick", TIMESTEPS.sub(cut, code))


def plain_commands(code: str) -> tuple[list[list[str]], str]:
    """The words of a shell fence's leading plain commands (a trailing
    backslash continues a line, comments dropped), and the rest of the fence
    from the first command that needs the shell itself: a variable, pipe,
    redirection, heredoc, glob or assignment."""
    commands, lines, first = [], code.splitlines(), 0
    while first < len(lines):
        last = first
        while lines[last].endswith("\\") and last + 1 < len(lines):
            last += 1
        command = " ".join(line.removesuffix("\\") for line in lines[first : last + 1])
        try:
            words = shlex.split(command, comments=True)
        except ValueError:  # a quote that a later line closes
            break
        if any(SHELL_SYNTAX.search(word) for word in words) or (
            words and ASSIGNMENT.match(words[0])
        ):
            break
        if words:
            commands.append(words)
        first = last + 1
    rest = "\n".join(lines[first:])
    return commands, rest + "\n" if rest else ""


SNIPPETS = collect()


def test_fences_are_found_and_few_are_skipped():
    skipped = [s for s in SNIPPETS if s.skip is not None]
    assert len(SNIPPETS) >= 20, [s.name for s in SNIPPETS]
    assert len(skipped) <= MAX_SKIPPED, [f"{s.name}: {s.skip}" for s in skipped]
    for snippet in skipped:
        assert snippet.skip.strip(), f"{snippet.name}: a skip needs its reason"


def test_the_collector_and_the_cut():
    text = (
        'Intro.\n\n```python\nx = 1\n```\n\n* item\n\n  ```bash {skip="no GPU"}\n'
        "  make train\n  ```\n\n```text\nnot code\n```\n"
    )
    found = [(line, info, code) for line, info, code in fences(text) if info != "text"]
    assert found == [
        (3, "python", "x = 1\n"),
        (9, 'bash {skip="no GPU"}', "make train\n"),
    ]
    assert shortened("run --total-timesteps 500000 and total_timesteps=1_000_000") == (
        "run --total-timesteps 5000 and total_timesteps=10000"
    )
    assert shortened("--total-timesteps 100000") == "--total-timesteps 4096"
    assert shortened("ondevice-rl bench env --envs X\nondevice-rl bench train") == (
        "ondevice-rl bench env --quick --envs X\nondevice-rl bench train"
    )
    assert shortened("ondevice-rl bench env --quick") == "ondevice-rl bench env --quick"
    session = "$ ls \\\n    -a\nout\n$ echo hi\nhi\n"
    assert session_commands(session) == "ls \\\n    -a\necho hi\n"
    fence = "ondevice-rl a \\\n  --b 1  # c\n\nls x\nX=1 ondevice-rl d\nls y | wc\n"
    assert plain_commands(fence) == (
        [["ondevice-rl", "a", "--b", "1"], ["ls", "x"]],
        "X=1 ondevice-rl d\nls y | wc\n",
    )
    assert plain_commands("python -c 'a\nb'\n") == ([], "python -c 'a\nb'\n")


def _is_default(source: str, test: str) -> bool:
    """Whether ``def test(`` is in ``source`` and runs in the default suite
    (neither its decorators, a slow param's included, nor its module's
    ``pytestmark`` name ``mark.slow``)."""
    module = ast.parse(source)
    marks = [
        node.value
        for node in module.body
        if isinstance(node, ast.Assign)
        and any(getattr(t, "id", None) == "pytestmark" for t in node.targets)
    ]
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == test:
            return not any(
                "mark.slow" in ast.unparse(m) for m in [*marks, *node.decorator_list]
            )
    return False


def test_a_slow_fence_names_the_default_tests_that_cover_it():
    slow = [s for s in SNIPPETS if s.slow is not None]
    assert slow, "no slow fences: drop the attribute's support"
    for snippet in slow:
        named = list(COVERED_BY.finditer(snippet.slow))
        assert named, f"{snippet.name}: slow= names no tests/FILE.py::TEST"
        for test in named:
            source = (ROOT / "tests" / test["file"]).read_text()
            assert _is_default(source, test["test"]), f"{snippet.name}: {test[0]}"
    source = "@pytest.mark.slow\ndef test_a():\n    pass\n\ndef test_b():\n    pass\n"
    assert not _is_default(source, "test_a") and _is_default(source, "test_b")
    assert not _is_default(source, "test_c")


@pytest.mark.parametrize(
    "snippet",
    [
        pytest.param(s, marks=pytest.mark.slow) if s.slow is not None else s
        for s in SNIPPETS
    ],
    ids=lambda s: s.name,
)
def test_snippet_runs(snippet, tmp_path, monkeypatch, suite_cache):
    if snippet.skip is not None:
        pytest.skip(snippet.skip)
    code = shortened(snippet.code)
    if snippet.language == "python":
        monkeypatch.chdir(tmp_path)
        # Blank lines first, so that a traceback names the page's own line.
        program = compile("\n" * snippet.line + code, str(snippet.page), "exec")
        exec(program, {"__name__": "__main__"})
        return
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["ONDEVICE_RL_CACHE_DIR"] = str(suite_cache)
    env["MPLBACKEND"] = "Agg"
    commands, rest = plain_commands(code)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for words in commands:
        if words[0] != "ondevice-rl":
            run_in_bash(snippet, shlex.join(words), tmp_path, env)
            continue
        try:
            status = main(words[1:])
        except SystemExit as stop:  # argparse's own exits (--help: 0)
            status = stop.code or 0
        assert status == 0, f"{snippet.name}: {shlex.join(words)} exited {status}"
    if rest:
        run_in_bash(snippet, rest, tmp_path, env)


def run_in_bash(snippet: Snippet, code: str, cwd: Path, env: dict[str, str]):
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, (
        f"{snippet.name} exited {done.returncode}\n--- code\n{code}"
        f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )


def test_readme_links_exist():
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if "://" not in t]
    assert local, "no relative links found"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, missing


@pytest.mark.parametrize("page", ["README.md", "docs/learners.md"])
def test_learner_tables_list_every_learner(page):
    """The first table whose header starts with ``| learner |`` names each
    registered learner once, in backticks."""
    from ondevice_rl.train import algorithms

    text = (ROOT / page).read_text()
    table = text[text.index("| learner |") :].split("\n\n")[0].splitlines()[2:]
    listed = [re.match(r"\| `([^`]+)` \|", row)[1] for row in table]
    assert sorted(listed) == sorted(algorithms()), listed


def test_api_reference_members_exist():
    """mkdocstrings leaves out a listed member that does not exist; this
    names it instead."""
    text = (ROOT / "docs" / "api.md").read_text()
    blocks = re.findall(r"^::: (\S+)\n(?:    .*\n)*?\s+members: (\[.*\])", text, re.M)
    assert blocks, "no member lists found in docs/api.md"
    for module, members in blocks:
        imported = importlib.import_module(module)
        names = ast.literal_eval(re.sub(r"(\w+)", r"'\1'", members))
        missing = [name for name in names if not hasattr(imported, name)]
        assert not missing, f"{module} has no {missing}"


def test_site_builds_strict(tmp_path):
    """``mkdocs build --strict``: a broken link, anchor or API reference fails."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict"]
        + ["-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert (tmp_path / "site" / "api" / "index.html").exists()
