"""The layers' import rules, checked on the source: no import circle in storage/, the
engine names no framework, formats know nothing of the CLI; and no tracked file outside the README
and the change log names a numbered work item."""
import ast
import re
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "recordkit"


def imports_of(path: Path) -> set[str]:
    """Every recordkit module a file imports, at the top or inside a function."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("recordkit"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("recordkit"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def graph(package: str) -> dict[str, set[str]]:
    files = sorted((SRC / package.replace("recordkit.", "").replace(".", "/")).glob("*.py"))
    # the package's __init__ only gathers names; a module's `from recordkit.storage import x` means x
    names = {module_name(f): f for f in files if f.name != "__init__.py"}
    return {m: {i for i in imports_of(f) if i in names and i != m} for m, f in names.items()}


def test_storage_imports_form_no_circle():
    g = graph("recordkit.storage")
    seen, done = set(), set()

    def visit(m, trail):
        assert m not in seen or m in done, f"import circle: {' -> '.join(trail + [m])}"
        if m in done:
            return
        seen.add(m)
        for n in sorted(g[m]):
            visit(n, trail + [m])
        done.add(m)

    for m in sorted(g):
        visit(m, [])
    assert "recordkit.storage.atomic" in g and "recordkit.storage.checksum" in g


CIRCLES_LEFT: list[set[str]] = []


def import_circles() -> list[set[str]]:
    """Every set of recordkit modules that import one another in a circle (strongly connected
    components of the import graph, imports inside functions included)."""
    files = sorted(SRC.rglob("*.py"))
    names = {module_name(f): f for f in files if f.name != "__init__.py"}
    g = {m: sorted(i for i in imports_of(f) if i in names and i != m) for m, f in names.items()}
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_between_recordkit_modules():
    """cli/convert and cli/verify_cmd share cli/sources' argument helpers; engine/environment asks
    integrations/torch_env for its providers; report/stats and report/ofrecord_stats fill
    report/summaries' classes."""
    circles = [c for c in import_circles() if c not in CIRCLES_LEFT]
    assert not circles, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in circles)


def test_storage_writes_through_one_atomic_file_and_the_old_name_still_imports():
    from recordkit.atomic import AtomicFile as old
    from recordkit.storage.atomic import AtomicFile
    assert old is AtomicFile
    assert "recordkit.storage.atomic" not in imports_of(SRC / "storage" / "location.py")


def test_the_engine_names_no_framework_and_no_command():
    for f in sorted((SRC / "engine").glob("*.py")):
        tree = ast.parse(f.read_text())
        modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
            n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not {m for m in modules if m.split(".")[0] in ("torch", "jax", "ray", "grain")}, f.name
        assert "sys.modules" not in f.read_text(), f.name
        found = {i for i in imports_of(f) if i.startswith(("recordkit.cli", "recordkit.compat"))}
        assert not found, (f.name, found)
        if f.name != "environment.py":  # the one place that wires the default providers
            assert not {i for i in imports_of(f) if i.startswith("recordkit.integrations")}, f.name


def test_formats_know_nothing_of_the_cli():
    for f in sorted((SRC / "formats").rglob("*.py")):
        assert not {i for i in imports_of(f) if i.startswith("recordkit.cli")}, f


# A format's name compared as a string (`kind == "ctf"`, `fmt in ("cbf", ...)`): outside formats/, a command asks
# the registry's Format entry (its flags and hooks) instead, so that a new format is its package plus one entry.
FORMAT_NAMES = ("ctf", "cbf", "ofrecord", "singa", "kvfile", "binfile", "csv", "parquet", "hf", "lance", "webdataset",
                "tfrecord", "mds")
NAME_COMPARISON = re.compile(r"""(==|!=)\s*["'](%s)["']|["'](%s)["']\s*(==|!=)|\bin\s*\(\s*["'](%s)["']"""
                             % (("|".join(FORMAT_NAMES),) * 3))


def test_no_format_name_is_compared_outside_formats():
    found = []
    for f in sorted(SRC.rglob("*.py")):
        rel = f.relative_to(SRC).as_posix()
        if rel.startswith("formats/"):
            continue
        for number, line in enumerate(f.read_text().splitlines(), 1):
            if NAME_COMPARISON.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "ask the format registry instead:\n" + "\n".join(found)


def test_the_name_comparison_rule_sees_the_forms_it_forbids():
    for text in ('if kind == "ctf":', "if fmt != 'mds':", 'if target in ("cbf", "ofrecord"):', '"hf" == name'):
        assert NAME_COMPARISON.search(text), text
    assert not NAME_COMPARISON.search('registry.get("ctf")')


# Numbered work items ("<word> 12", "<word>s #3"): the product speaks of what it does, not of the
# steps that made it. The words are joined here so that this file does not match its own pattern.
WORK_ITEM = re.compile(r"\b(" + "|".join(("st" + "op", "is" + "sue")) + r")s? ?#?[0-9]+", re.IGNORECASE)
WORK_ITEMS_ALLOWED: set[str] = set()  # every tracked file, the README and the change log included


def test_no_tracked_file_names_a_numbered_work_item():
    root = SRC.parent.parent
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    found = []
    for name in sorted(n for n in listed.stdout.decode().split("\0") if n and n not in WORK_ITEMS_ALLOWED):
        path = root / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # binary: compiled or golden data, not prose
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if WORK_ITEM.search(line):
                found.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not found, "\n".join(found)
