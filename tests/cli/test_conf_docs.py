"""docs/configuration.md is what `sparkstate conf-docs --page` prints: the settings page is generated from
config.py, never edited by hand."""
from __future__ import annotations

import os

from sparkstate.cli import main
from sparkstate.cli.conf_docs import PAGE_COMMAND
from sparkstate.config import DECLARATIONS, PREFIX

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "configuration.md")


def test_the_settings_page_is_what_conf_docs_generates(capsys):
    assert main(["conf-docs", "--page"]) == 0
    generated = capsys.readouterr().out
    with open(PAGE, encoding="utf-8") as f:
        assert f.read() == generated, f"docs/configuration.md is stale: regenerate it with `{PAGE_COMMAND}`"


def test_the_page_lists_every_setting_and_says_how_it_is_made(capsys):
    assert main(["conf-docs", "--page"]) == 0
    page = capsys.readouterr().out
    assert PAGE_COMMAND in page.splitlines()[2]
    assert all(f"| `{PREFIX}{d.key}` |" in page for d in DECLARATIONS)


def test_the_plain_table_is_the_page_s_table(capsys):
    assert main(["conf-docs"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("| key | default |")
    assert main(["conf-docs", "--page"]) == 0
    assert table in capsys.readouterr().out
