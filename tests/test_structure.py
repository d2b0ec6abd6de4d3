"""The layers' import rules, checked on the source: imports point down the floors of
docs/architecture.md, no modules import one another in a circle, the engine names no framework,
no engine module reaches another's private attributes; and no tracked file outside the README and
the change log names a numbered work item."""
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


def test_storage_writes_through_one_atomic_file_that_lives_in_storage():
    import importlib.util
    assert importlib.util.find_spec("recordkit.atomic") is None  # no shim beside storage/atomic.py
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
    {"__init__", "readers", "writers"},    # the public face
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


# No engine module reaches a private attribute of another: what one file uses of another's objects is
# a declared interface (public methods, properties, value objects, dataclass fields), so that each file
# can change its insides without breaking the other. Checked by name on the source, as follows.
# A private name (``_x``, not ``__x__``) is *defined* by a ``def``/``class``/assignment at a module's top
# level or in a class body (a bare annotation only in a dataclass, where it is a field; nothing under
# ``if TYPE_CHECKING:``, where a mixin lists what it expects of others), and by a store to ``self._x``
# (also ``self.__dict__["_x"]``, ``setattr(self, "_x", ...)``) in a method of the class. A *use* is
# ``obj._x``, ``getattr``/``hasattr``/``setattr``/``delattr(obj, "_x")``, ``obj.__dict__["_x"]`` (and its
# ``get``/``setdefault``/``pop``) or ``from recordkit.engine.m import _x``. Then:
# * ``self._x`` in a method of class C is a reach when a class of C's hierarchy (C, its bases, the classes
#   derived from it, across engine/) in another module defines ``_x``: a mixin reading its host's state,
#   a host calling its mixin's private methods, a base class reading what a subclass elsewhere sets;
# * any other ``obj._x`` is a reach when no class of its own module defines ``_x`` and another module
#   does, and a store to it is an undeclared attribute attached from outside even when none defines it;
# * importing a private name that another engine module defines is a reach.

def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _private(name) -> bool:
    return isinstance(name, str) and name.startswith("_") and not _dunder(name)


def _type_checking(node) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _named_uses(node):
    """(object node, private name, is a store) for each use of a private attribute in ``node``'s forms."""
    if isinstance(node, ast.Attribute) and _private(node.attr):
        yield node.value, node.attr, isinstance(node.ctx, (ast.Store, ast.Del))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2 and \
            node.func.id in ("getattr", "hasattr", "setattr", "delattr") and isinstance(node.args[1], ast.Constant) \
            and _private(node.args[1].value):
        yield node.args[0], node.args[1].value, node.func.id in ("setattr", "delattr")
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
            node.value.attr == "__dict__" and isinstance(node.slice, ast.Constant) and _private(node.slice.value):
        yield node.value.value, node.slice.value, isinstance(node.ctx, (ast.Store, ast.Del))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
            "get", "setdefault", "pop") and isinstance(node.func.value, ast.Attribute) and \
            node.func.value.attr == "__dict__" and node.args and isinstance(node.args[0], ast.Constant) and \
            _private(node.args[0].value):
        yield node.func.value.value, node.args[0].value, node.func.attr in ("setdefault", "pop")


def _body_names(body, dataclass_fields: bool):
    """Names a module or class body defines (not under ``if TYPE_CHECKING:``)."""
    for node in body:
        if _type_checking(node):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.If):
            yield from _body_names(node.body + node.orelse, dataclass_fields)
        elif isinstance(node, ast.Try):
            yield from _body_names(node.body + node.orelse + node.finalbody
                                   + [n for h in node.handlers for n in h.body], dataclass_fields)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from (a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.AnnAssign) and (node.value is not None or dataclass_fields):
            yield from (n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield from (n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))


class _Module:
    """One module's classes (name -> (base names, private names the class defines)), the private names
    its classes define (``attributes``) and it defines at all, its uses of private names and its private
    imports."""

    def __init__(self, text: str):
        tree = ast.parse(text)
        self.classes: dict[str, tuple[list, set]] = {}
        self.uses: list[tuple[int, str | None, str, bool]] = []  # (line, class of a self use, name, store)
        self.imports = [(node.lineno, node.module, a.name) for node in ast.walk(tree)
                        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("recordkit.engine")
                        for a in node.names if _private(a.name)]
        self._visit(tree, None)
        self.attributes = {n for _, names in self.classes.values() for n in names}
        self.defined = self.attributes | {n for n in _body_names(tree.body, False) if _private(n)}

    def _visit(self, node, cls):
        if isinstance(node, ast.ClassDef):
            dataclass = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
            self.classes[node.name] = ([ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases],
                                       {n for n in _body_names(node.body, dataclass) if _private(n)})
            cls = node.name
        for obj, name, store in _named_uses(node):
            on_self = cls is not None and isinstance(obj, ast.Name) and obj.id in ("self", "cls")
            self.uses.append((getattr(node, "lineno", 0), cls if on_self else None, name, store))
            if on_self and store:
                self.classes[cls][1].add(name)
        for child in ast.iter_child_nodes(node):
            self._visit(child, cls)


def private_reaches(sources: dict[str, str]) -> list[str]:
    """``file:line: ...`` for every reach (see above) among ``sources`` (module file name -> text)."""
    modules = {name: _Module(text) for name, text in sources.items()}
    classes = {(m, c): bases for m, mod in modules.items() for c, (bases, _) in mod.classes.items()}

    def bases_of(key):
        """The classes ``key`` derives from, directly or not (a base found by its name in any module)."""
        out, todo = set(), [key]
        while todo:
            m, c = todo.pop()
            for b in classes[(m, c)]:
                found = [(m, b)] if (m, b) in classes else [k for k in classes if k[1] == b]
                todo += [k for k in found if k not in out and k != key]
                out.update(found)
        return out

    ancestors = {key: bases_of(key) for key in classes}
    found = []
    for name, m in modules.items():
        for line, cls, attr, store in m.uses:
            if cls is not None:
                me = (name, cls)
                family = {me} | ancestors[me] | {k for k, a in ancestors.items() if me in a}
                owners = sorted({f"{k[0]} ({k[1]})" for k in family
                                 if k[0] != name and attr in modules[k[0]].classes[k[1]][1]})
                if owners:
                    found.append(f"{name}:{line}: self.{attr} is defined in {', '.join(owners)}")
                continue
            if attr in m.attributes:
                continue
            owners = sorted(o for o, other in modules.items() if o != name and attr in other.defined)
            if owners:
                found.append(f"{name}:{line}: {attr} is defined in {', '.join(owners)}")
            elif store:
                found.append(f"{name}:{line}: {attr} is attached to another module's object undeclared")
        for line, module, attr in m.imports:
            source = module.rsplit(".", 1)[-1] + ".py"
            if source in modules and source != name and attr in modules[source].defined:
                found.append(f"{name}:{line}: imports {attr} from {source}")
    return found


def test_no_engine_module_reaches_a_private_attribute_of_another():
    sources = {f.name: f.read_text() for f in sorted((SRC / "engine").glob("*.py"))}
    found = private_reaches(sources)
    assert not found, "declare an interface instead:\n" + "\n".join(found)


def test_the_private_reach_rule_sees_the_forms_it_forbids():
    host = ("class Host(Mixin):\n    def __init__(self):\n        self._pos = 0\n        self._mixin_helper()\n"
            "    def _step(self):\n        return self._pos\n\ndef _helper():\n    pass\n")
    mixin = "class Mixin:\n    def _mixin_helper(self):\n        return 1\n"
    # a host calling its mixin's private method is a reach; its own state is not
    assert private_reaches({"host.py": host, "mixin.py": mixin}) == [
        "host.py:4: self._mixin_helper is defined in mixin.py (Mixin)"]
    host = host.replace("        self._mixin_helper()\n", "")
    for reach, what in [
            ("class Mixin:\n    def save(self):\n        return self._pos\n", "self._pos is defined in host.py (Host)"),
            ("class Mixin:\n    if TYPE_CHECKING:\n        _pos: int\n    def save(self):\n        return self._pos\n",
             "self._pos is defined in host.py (Host)"),
            ("class Mixin:\n    _pos: int\n    def save(self):\n        return self._pos\n",
             "self._pos is defined in host.py (Host)"),
            ("class Mixin:\n    _pos = 0\n", None),  # defined in both: a reach from the host's side
            ("class Mixin:\n    def load(self):\n        self.__dict__['_pos'] = 1\n",
             "self._pos is defined in host.py (Host)"),
            ("def save(src):\n    return src._pos\n", "_pos is defined in host.py"),
            ("_pos = None\ndef save(src):\n    return src._pos\n", "_pos is defined in host.py"),
            ("def save(src):\n    return getattr(src, '_pos')\n", "_pos is defined in host.py"),
            ("def save(src):\n    return src.__dict__['_pos']\n", "_pos is defined in host.py"),
            ("def save(src):\n    return src.__dict__.get('_pos')\n", "_pos is defined in host.py"),
            ("def save(src):\n    src._step()\n", "_step is defined in host.py"),
            ("def cache(chunk):\n    chunk._views = {}\n", "_views is attached to another module's object undeclared"),
            ("def cache(chunk):\n    chunk.__dict__['_views'] = {}\n",
             "_views is attached to another module's object undeclared"),
            ("from recordkit.engine.host import _helper\n", "imports _helper from host.py")]:
        found = private_reaches({"host.py": host, "mixin.py": reach})
        if what is None:
            assert found == ["host.py:3: self._pos is defined in mixin.py (Mixin)",
                             "host.py:5: self._pos is defined in mixin.py (Mixin)"], found
        else:
            assert [f.split(": ", 1)[1] for f in found if f.startswith("mixin.py")] == [what], (reach, found)
    fine = ("from dataclasses import dataclass\n@dataclass\nclass Chunk:\n    _views: dict | None = None\n"
            "    _steps: tuple = ()\n\ndef cache(chunk):\n    chunk._views = {}\n    return chunk._steps\n"
            "class Own:\n    def __init__(self):\n        self._n = 0\n    def bump(self, other):\n"
            "        other._n += self._n\n"
            "class Unrelated:\n    def __init__(self):\n        self._pos = 1\n")  # another class's _pos: no reach
    assert private_reaches({"host.py": host, "own.py": fine}) == []
