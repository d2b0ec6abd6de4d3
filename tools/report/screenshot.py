"""Render a `recordkit report` page in headless Chromium to a PNG screenshot.

    python tools/report/screenshot.py report.html report.png [--width 1200] [--height 3000]

Uses Debian's `chromium` package (`apt-get install -y chromium`); the page is opened from a
file:// URL with networking disabled (the page must be self-contained: nothing is fetched).
The window height is the screenshot's height: pick it tall enough for the part to show.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("screenshot.py: no chromium found: apt-get install -y chromium")


def screenshot(page: str, png: str, width: int = 1200, height: int = 3000) -> None:
    chromium = find_chromium()
    with tempfile.TemporaryDirectory(prefix="rk-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9",  # no network: a fetch would fail
               "--proxy-bypass-list=<-loopback>", f"--window-size={width},{height}",
               f"--screenshot={os.path.abspath(png)}", "file://" + os.path.abspath(page)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0 or not os.path.exists(png):
        sys.exit(f"screenshot.py: chromium failed ({out.returncode}):\n{out.stderr[-2000:]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("page")
    p.add_argument("png")
    p.add_argument("--width", type=int, default=1200)
    p.add_argument("--height", type=int, default=3000)
    a = p.parse_args(argv)
    screenshot(a.page, a.png, a.width, a.height)
    print(f"wrote {a.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
