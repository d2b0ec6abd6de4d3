"""Names a public module re-exports but imports only on first use.

``import recordkit`` and ``recordkit --help`` pay for no NumPy, pyarrow or datasets: a public
module lists its names here as ``name -> "module"`` and resolves them in ``__getattr__``, so a
command imports only what it touches (``tests/test_cli_startup.py``).
"""
from __future__ import annotations

import importlib
from typing import Any


def resolver(module_name: str, table: dict[str, str]):
    """A module ``__getattr__`` that imports ``table[name]`` on first use and caches the value."""
    module_globals = importlib.import_module(module_name).__dict__

    def __getattr__(name: str) -> Any:
        source = table.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        module_globals[name] = value
        return value

    return __getattr__
