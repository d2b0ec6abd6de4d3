"""Start-up: `recordkit --help`/`--version` import no library beyond the standard one, and each
command imports only what it uses (SciPy, protobuf, fsspec, Pillow, tqdm, torch... lazily)."""
import json
import subprocess
import sys

import pytest

from recordkit.cli import main as cli_main

HEAVY = ["numpy", "scipy", "google", "fsspec", "PIL", "tqdm", "orjson", "torch", "pyarrow", "ray", "matplotlib",
         "datasets", "webdataset", "tfrecord", "grain", "pandas"]
# Always lazy, whatever the command: only a code path that needs them imports them.
NEVER_FOR_HELP = [m for m in HEAVY if m not in ("numpy", "orjson")]


def imported_by(args: list[str], stdin_tty: bool = False) -> set[str]:
    """Top-level packages of HEAVY imported in a fresh interpreter running `recordkit ARGS`."""
    code = (
        "import sys, json\n"
        "from recordkit.cli.main import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))), file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return set(json.loads(out.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [["--help"], ["--version"], []])
def test_top_level_help_and_version_import_no_third_party_library(args):
    assert imported_by(args) == set()


@pytest.mark.parametrize("command", sorted(cli_main.COMMANDS))
def test_each_commands_help_imports_only_light_modules(command):
    assert imported_by([command, "--help"]) & set(NEVER_FOR_HELP) == set()


def test_stats_of_a_dense_cbf_file_imports_no_scipy_protobuf_or_tqdm(tmp_path):
    from recordkit.engine.streams import StreamSpec
    from recordkit.formats.cbf import CBFWriter
    import numpy as np
    path = tmp_path / "d.cbf"
    with CBFWriter(path, [StreamSpec("x", "dense", 3)]) as w:
        for i in range(5):
            w.write({"x": np.full((2, 3), i, dtype=np.float32)})
    mods = imported_by(["stats", str(path)])
    assert mods & {"scipy", "google", "fsspec", "PIL", "tqdm", "torch", "pyarrow"} == set()


def test_command_summaries_are_the_commands_own_help_texts():
    """The lazy registry shows COMMANDS' summaries; registering every module must give the same."""
    parser = cli_main.build_parser(all_commands=True)
    sub = next(a for a in parser._actions if a.dest == "command")
    own = {a.dest: a.help for a in sub._choices_actions}
    assert {name: summary for name, (_, summary) in cli_main.COMMANDS.items()} == own


def test_a_command_runs_with_only_its_own_module_registered(tmp_path, capsys):
    (tmp_path / "a.ctf").write_text("0 |x 1 2\n1 |x 3 4\n")
    assert cli_main.main(["stats", str(tmp_path / "a.ctf"), "--stream", "x=dense:2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sequences"] == 2


def _blas_setting(args: list[str], env_value) -> str:
    """OPENBLAS_NUM_THREADS as NumPy saw it when a fresh `recordkit ARGS` imported it."""
    import os
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    code = ("import os, sys\n"
            "import importlib.abc\n"
            "seen = []\n"
            "class Watch(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name == 'numpy' and not seen:\n"
            "            seen.append(os.environ.get('OPENBLAS_NUM_THREADS', 'unset'))\n"
            "sys.meta_path.insert(0, Watch())\n"
            "from recordkit.cli.main import main\n"
            f"main({args!r})\n"
            "print(seen[0] if seen else 'numpy not imported', file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    return out.stderr.strip().splitlines()[-1]


def test_commands_keep_openblas_to_one_thread_unless_the_user_chose(tmp_path):
    """OpenBLAS's threads spin ~0.1 s of CPU after NumPy starts; the CLI sets one thread before
    any command imports NumPy, and leaves a user's own setting alone."""
    from recordkit.engine.streams import StreamSpec
    from recordkit.formats.cbf import CBFWriter
    import numpy as np
    path = tmp_path / "d.cbf"
    with CBFWriter(path, [StreamSpec("x", "dense", 3)]) as w:
        w.write({"x": np.ones((2, 3), dtype=np.float32)})
    assert _blas_setting(["stats", str(path)], None) == "1"
    assert _blas_setting(["stats", str(path)], "4") == "4"


@pytest.mark.parametrize("to", ["tfrecord", "webdataset", "cbf"])
def test_reading_a_format_without_arrow_imports_no_pyarrow(tmp_path, to):
    """Format detection probes every registered format: a probe must not import another format's reader
    (the MDS and Parquet readers pull in pyarrow), so reading TFRecord, WebDataset or CBF pays for none."""
    from recordkit.engine.streams import StreamSpec
    from recordkit.formats.cbf import CBFWriter
    import numpy as np
    cbf = tmp_path / "d.cbf"
    with CBFWriter(cbf, [StreamSpec("x", "dense", 3)]) as w:
        for i in range(5):
            w.write({"x": np.full((1, 3), i, dtype=np.float32)})
    path = cbf
    if to != "cbf":
        path = tmp_path / f"d.{to}"
        subprocess.run([sys.executable, "-m", "recordkit.cli.main", "convert", str(cbf), str(path), "--to", to],
                       check=True, capture_output=True)
    assert "pyarrow" not in imported_by(["cat", str(path)])
