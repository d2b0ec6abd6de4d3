"""The layers' import rules, checked on the source: imports point down the floors of
docs/architecture.md, no modules import one another in a circle, the engine names no framework;
and no tracked file outside the README and the change log names a numbered work item."""
import ast
import functools
import re
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "recordkit"


@functools.lru_cache(maxsize=None)  # every rule below reads the same files
def imports_of(path: Path) -> frozenset[str]:
    """Every recordkit module a file imports, at the top or inside a function."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("recordkit"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("recordkit"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return frozenset(out)


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


def reexports(init: Path) -> dict[str, str]:
    """What a package's ``__init__`` hands out: name -> the module it comes from (its imports, and
    its lazy tables' ``"recordkit...."`` module strings), so that ``from recordkit.engine import
    ChunkData`` counts as an import of ``recordkit.engine.chunk``."""
    out = {}
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("recordkit"):
            out.update({a.asname or a.name: node.module for a in node.names})
        elif isinstance(node, ast.Dict):
            out.update({k.value: v.value for k, v in zip(node.keys, node.values)
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
                        and isinstance(v.value, str) and v.value.startswith("recordkit.")})
    return out


@functools.lru_cache(maxsize=None)
def module_graph() -> dict[str, list[str]]:
    """recordkit's modules (package ``__init__``s only gather names) -> the modules each imports, at
    the top or inside a function, names taken from a package counted as their own module's."""
    files = sorted(SRC.rglob("*.py"))
    names = {module_name(f): f for f in files if f.name != "__init__.py"}
    handed = {module_name(f): reexports(f) for f in files if f.name == "__init__.py"}

    def resolve(target: str) -> str:
        package, _, name = target.rpartition(".")
        module = handed.get(package, {}).get(name)
        return module if module in names else target

    return {m: sorted({resolve(i) for i in imports_of(f)} & set(names) - {m}) for m, f in names.items()}


def import_circles() -> list[set[str]]:
    """Every set of recordkit modules that import one another in a circle (strongly connected
    components of the import graph)."""
    g = module_graph()
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


def test_the_circle_check_follows_the_names_a_package_hands_out():
    g = module_graph()
    assert "recordkit.storage.source" in g["recordkit.formats.sharding"]  # from recordkit.storage import open_source
    assert "recordkit.formats.ctf.reader" in g["recordkit.compose.convert"]  # from recordkit.formats.ctf import CTFReader


def test_storage_writes_through_one_atomic_file_and_the_old_name_still_imports():
    from recordkit.atomic import AtomicFile as old
    from recordkit.storage.atomic import AtomicFile
    assert old is AtomicFile
    assert "recordkit.storage.atomic" not in imports_of(SRC / "storage" / "location.py")


def test_the_engine_names_no_framework():
    for f in sorted((SRC / "engine").glob("*.py")):
        tree = ast.parse(f.read_text())
        modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
            n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not {m for m in modules if m.split(".")[0] in ("torch", "jax", "ray", "grain")}, f.name
        assert "sys.modules" not in f.read_text(), f.name


# The floors of docs/architecture.md, bottom first: a module imports its own package and the floors
# below it, never a floor above nor a package beside it on its floor.
FLOORS = [
    {"errors", "sizes", "_lazy"},                    # what every floor shares
    {"storage"},
    {"engine"},                                      # the Deserializer protocol and what works over any
    {"formats"},                                     # each reader implements the engine's protocol
    {"compose", "images"},                           # formats composed; images of any format
    {"compat", "integrations", "report"},
    {"cli"},
    {"__init__", "readers", "writers", "atomic"},    # the public face
]
# Arrows that run up by design: engine/environment registers the default framework providers.
ARROWS_UP = {("recordkit.engine.environment", "recordkit.integrations.torch_env")}


def floor_of(package: str) -> int:
    return next(k for k, floor in enumerate(FLOORS) if package in floor)


def package_of(target: str) -> str | None:
    """The package (or top-level module) an imported recordkit name lives in: ``engine`` for
    ``recordkit.engine.source``, ``errors`` for ``recordkit.errors``, the public face for a name the
    root hands out (``recordkit.open``); None for the root's ``__version__``, which every module may
    read (the root runs before any of its modules anyway)."""
    parts = target.split(".")
    if len(parts) == 1 or parts[1] == "__version__":
        return None
    return parts[1] if (SRC / parts[1]).is_dir() or (SRC / f"{parts[1]}.py").is_file() else "__init__"


def arrows_against_the_floors() -> list[str]:
    found = []
    for f in sorted(SRC.rglob("*.py")):
        rel = f.relative_to(SRC)
        here = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        targets = imports_of(f)
        for target in sorted(targets):
            if any(t.startswith(target + ".") for t in targets):
                continue  # a package named to reach its module or name: that one is checked
            there = package_of(target)
            if there is None or there == here or (module_name(f), target) in ARROWS_UP:
                continue
            if floor_of(there) >= floor_of(here):
                found.append(f"{rel.as_posix()} -> {target}")
    return found


def test_every_package_is_on_a_floor():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    modules = {p.stem for p in SRC.glob("*.py")}
    assert packages | modules == set().union(*FLOORS)


def test_imports_point_down_the_floors():
    found = arrows_against_the_floors()
    assert not found, "imports up or across the floors (docs/architecture.md):\n" + "\n".join(found)


def test_the_floor_rule_sees_the_arrows_it_forbids():
    assert floor_of(package_of("recordkit.compose.convert")) > floor_of(package_of("recordkit.engine.source"))
    assert floor_of(package_of("recordkit.formats.registry")) > floor_of(package_of("recordkit.engine.chunk"))
    assert floor_of(package_of("recordkit.engine.memory")) > floor_of(package_of("recordkit.storage.atomic"))
    assert package_of("recordkit.open") == "__init__" and package_of("recordkit.__version__") is None
    assert floor_of("integrations") == floor_of("report") == floor_of("compat")  # beside: not allowed either
    assert package_of("recordkit.sizes.parse_size") == "sizes" and floor_of("sizes") == 0


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
