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


def _entries(text: str) -> dict[str, str]:
    return dict(line.split(None, 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_archive_prints_one_block_for_a_shipped_environment(capsys):
    import sparkstate
    from sparkstate.config import PROVIDER_CLASS, Settings

    assert main(["conf-docs", "--archive", "env.tar.gz", "--executor-cores", "4", "--executor-memory", "8g",
                 "--state-in-memory", "512m"]) == 0
    entries = _entries(capsys.readouterr().out)
    assert entries["spark.archives"] == "env.tar.gz#environment"
    assert entries["spark.pyspark.python"] == "./environment/bin/python"
    assert entries[PREFIX + "pythonExec"] == "./environment/bin/python"  # the store workers' interpreter
    assert entries["spark.jars"] == sparkstate.jar_path()
    assert entries["spark.sql.streaming.stateStore.providerClass"] == PROVIDER_CLASS
    assert entries[PREFIX + "maxWorkers"] == "8"
    # max(384, 819.2) + 8 workers x (worker + 64 MiB block cache) + 512 MiB of state
    from sparkstate.cli.shipped_env import WORKER_BASE_MIB
    assert entries["spark.executor.memoryOverhead"] == f"{820 + 8 * (WORKER_BASE_MIB + 64) + 512}m"
    assert Settings.parse({k: v for k, v in entries.items() if k.startswith(PREFIX)}).max_workers == 8


def test_archive_with_its_own_directory_and_the_heap_backend(capsys):
    assert main(["conf-docs", "--archive", "/shared/envs/py.tar.gz#pyenv", "--backend", "heap"]) == 0
    entries = _entries(capsys.readouterr().out)
    assert entries["spark.archives"] == "/shared/envs/py.tar.gz#pyenv"
    assert entries[PREFIX + "pythonExec"] == "./pyenv/bin/python"
    assert entries[PREFIX + "backend"] == "heap"
    from sparkstate.cli.shipped_env import WORKER_BASE_MIB
    # Spark's default 384 MiB for a 1 GiB executor, 2 workers for its 1 core, no block cache on heap
    assert entries["spark.executor.memoryOverhead"] == f"{384 + 2 * WORKER_BASE_MIB}m"


def test_memory_sizes_read_as_spark_writes_them():
    from sparkstate.cli.shipped_env import parse_mib

    assert [parse_mib(s) for s in ("4g", "512m", "1024", "2G", "1536mb", "1.5g")] == [4096, 512, 1024, 2048, 1536, 1536]
