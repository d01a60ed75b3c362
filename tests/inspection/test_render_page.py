"""scripts/render_inspect_page.sh: the inspect page rendered in headless Chromium, and a page that renders
blank refused (skipped without Chromium)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "render_inspect_page.sh")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")


def _render(out_dir: str, chromium: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "CHROMIUM": chromium}
    return subprocess.run(["bash", SCRIPT, "--sample", "3", out_dir], env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_page_renders_and_a_blank_one_is_refused(tmp_path):
    done = _render(str(tmp_path / "page"), CHROMIUM)  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr
    png = done.stdout.strip().splitlines()[-1]
    assert png == str(tmp_path / "page" / "inspect.png") and os.path.getsize(png) > 10_000

    blank = tmp_path / "blank-chromium"
    blank.write_text(f"#!{sys.executable}\nimport os, sys\n"
                     f"os.execv({CHROMIUM!r}, [{CHROMIUM!r}] + sys.argv[1:-1] + ['about:blank'])\n")
    blank.chmod(0o755)
    done = _render(str(tmp_path / "blank"), str(blank))
    assert done.returncode == 1 and "did not render" in done.stderr and done.stdout == ""
