"""Every example of README.md and docs/ runs (tests/docs_examples.py says how a page's blocks are
run), and the site builds with no warning: examples cannot rot and the API page cannot lose a name."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from docs_examples import PAGES, RUNNABLE, ROOT, blocks, runnable

BIN = Path(sys.executable).parent


def _env(tmp: Path) -> dict:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", MPLBACKEND="Agg",
               HF_DATASETS_OFFLINE="1", PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    return env


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("demo")
    subprocess.run([sys.executable, "-m", "recordkit.cli.main", "demo", "--dir", str(d)], check=True,
                   capture_output=True, env=_env(d))
    return d


def _copy_demo(src: Path, dst: Path) -> None:
    import shutil
    for p in src.iterdir():
        (shutil.copytree if p.is_dir() else shutil.copy2)(p, dst / p.name)


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=lambda p: p.name)
def test_examples_of_the_page_run(page, demo_data, tmp_path):
    _copy_demo(demo_data, tmp_path)
    env = _env(tmp_path)
    namespace_script = tmp_path / "_page_python.py"
    python_so_far: list[str] = []
    for block in runnable(page):
        if block.lang == "sh":
            out = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=300)
        else:  # a page's python blocks share one namespace: run them all again up to this one
            python_so_far.append(block.code)
            namespace_script.write_text("\n".join(python_so_far))
            out = subprocess.run([sys.executable, str(namespace_script)], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"{block.where}: the example failed:\n{block.code}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"


def test_every_skipped_example_says_why():
    for page in PAGES:
        for block in blocks(page):
            if block.not_run is not None:
                assert block.not_run, f"{block.where}: '<!-- not run: -->' without a reason"


def test_block_tags_are_known():
    known = set(RUNNABLE) | {"text", "console", ""}
    for page in PAGES:
        for block in blocks(page):
            assert block.lang in known, f"{block.where}: code block tagged {block.lang!r} (use one of {sorted(known)})"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
                    reason="mkdocs and mkdocstrings are not installed (the test extra has them)")
def test_docs_site_builds_with_no_warning(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert out.returncode == 0, out.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    import recordkit.readers
    import recordkit.writers
    for name in ["recordkit.open", "recordkit.convert", "recordkit.verify", "recordkit.validate", "MinibatchSource",
                 *recordkit.readers.__all__, *recordkit.writers.__all__]:
        assert f'id="{name}"' in api or f'.{name}"' in api, f"the API page lacks {name}"
