"""BrainScript configs that explode: nesting depth and what ``$name$``
expansion creates are bounded; each excess is a located error, in little time and memory."""
import resource
import subprocess
import sys

import pytest

from recordkit.compat import brainscript
from recordkit.errors import FormatError


def doubling_records(levels):
    return "\n".join(["r0 = [ a = 1 ]"] + [f"r{i} = [ p = $r{i-1}$ ; q = $r{i-1}$ ]" for i in range(1, levels)])


def doubling_text(levels):
    return "\n".join(['t0 = "xy"'] + [f't{i} = "$t{i-1}$$t{i-1}$"' for i in range(1, levels)])


@pytest.mark.parametrize("text, message", [
    (doubling_records(22), r"<config>:\d+:\d+: expanding '\$r\d+\$' makes the configuration larger than 100000 values"),
    (doubling_text(41), r"<config>:\d+:\d+: expanding '\$t\d+\$\$t\d+\$' makes a value of \d+ characters"),
    ("a = " + "[ b = " * 5000 + "1" + " ]" * 5000, r"<config>:1:605: '\[' nested deeper than 100 levels"),
    ("a = " + "{ b = " * 3000 + "1" + " }" * 3000, r"<config>:1:605: '\{' nested deeper than 100 levels"),
    ("a = " + "(" * 100000 + "1" + ")" * 100000, r"<config>:1:105: '\(' nested deeper than 100 levels"),
], ids=["records", "text", "brackets", "braces", "parentheses"])
def test_an_exploding_config_is_a_located_error(text, message):
    with pytest.raises(FormatError, match=message):
        brainscript.parse(text)


def test_the_record_bomb_fails_fast_and_small():
    """Was SIGABRT after 14 s under a 2 GiB limit; now an error in a child under 1 GiB."""
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from recordkit.compat import brainscript\n"
            "from recordkit.errors import FormatError\n"
            f"text = {doubling_records(22)!r}\n"
            "try:\n    brainscript.parse(text)\nexcept FormatError as e:\n    print('refused')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "refused", out.stderr[-500:]


def test_real_depth_and_reuse_are_still_fine():
    text = "\n".join(["base = [ dim = 3 ; format = dense ]"] +
                     [f"s{i} = [ x = $base$ ; y = $base$ ]" for i in range(50)] +
                     ["deep = " + "[ a = " * 90 + "1" + " ]" * 90])
    cfg = brainscript.parse(text)
    assert cfg["s49"]["y"]["dim"] == 3
    v = cfg["deep"]
    for _ in range(89):
        v = v["a"]
    assert v["a"] == 1
