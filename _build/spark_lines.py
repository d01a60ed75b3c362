"""The Spark lines sparkstate builds a shim for, and where the build finds each line's jars.

Spark's state store API differs from line to line (3.5 is Scala 2.12, 4.x Scala 2.13; `init`, `getStore`,
the store's abstract methods and the metrics constructor change between 4.0, 4.1, 4.2 and 4.3), so one
compiled provider class cannot serve every line. The build compiles one jar per line from the shared
sources plus that line's source folders, against the jars of that line's newest pyspark release.

The jars of the pyspark in the build environment serve its own line. The other lines' jars come from
their pyspark release on the package index (`pip download`), unpacked once into a cache folder
(`SPARKSTATE_SPARK_JARS_CACHE`, default `~/.cache/sparkstate/spark-jars`), so a second build downloads
nothing. `SPARKSTATE_SPARK_LINES=4.3` (a comma-separated list) builds only some lines, e.g. offline.
"""
from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIM = os.path.join(ROOT, "jvm-shim", "src")


@dataclass(frozen=True)
class SparkLine:
    """One Spark line: the pyspark release its shim compiles against and the source folders it adds to
    the shared ones (jvm-shim/src/main/java)."""

    name: str  # "3.5", "4.0", ...
    pyspark: str  # the release whose jars the shim compiles against
    source_folders: tuple[str, ...]  # below jvm-shim/src, each holding java/

    @property
    def jar_name(self) -> str:
        return f"sparkstate-spark-{self.name}.jar"

    def sources(self) -> list[str]:
        folders = ["main"] + list(self.source_folders)
        return [os.path.join(SHIM, folder, "java") for folder in folders]


LINES: tuple[SparkLine, ...] = (
    SparkLine("3.5", "3.5.9", ("spark-3.5",)),
    SparkLine("4.0", "4.0.5", ("spark-4", "spark-4.0")),
    SparkLine("4.1", "4.1.4", ("spark-4", "spark-4.1-4.3", "spark-4.1-4.2")),
    SparkLine("4.2", "4.2.1", ("spark-4", "spark-4.1-4.3", "spark-4.1-4.2")),
    SparkLine("4.3", "4.3.0", ("spark-4", "spark-4.1-4.3", "spark-4.3")),
)
NEWEST = LINES[-1]

# The jars a shim compiles against; the rest of a pyspark release (about 250 jars) is not needed.
COMPILE_JARS = ("spark-*.jar", "scala-*.jar", "hadoop-client-api-*.jar", "py4j-*.jar", "jackson-*.jar",
                "slf4j-api-*.jar", "log4j-api-*.jar", "json4s-*.jar", "commons-lang3-*.jar", "kryo*.jar")


def line_of(version: str) -> str:
    """"4.1.4" -> "4.1"."""
    return ".".join(version.split(".")[:2])


def selected_lines() -> list[SparkLine]:
    wanted = os.environ.get("SPARKSTATE_SPARK_LINES", "").strip()
    if not wanted:
        return list(LINES)
    names = [w.strip() for w in wanted.split(",") if w.strip()]
    unknown = [n for n in names if n not in {line.name for line in LINES}]
    if unknown:
        raise RuntimeError(f"SPARKSTATE_SPARK_LINES names {', '.join(unknown)}; the Spark lines sparkstate "
                           f"builds for are {', '.join(line.name for line in LINES)}")
    return [line for line in LINES if line.name in names]


def _cache_dir() -> str:
    override = os.environ.get("SPARKSTATE_SPARK_JARS_CACHE")
    if override:
        return override
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sparkstate", "spark-jars")


def _build_env_pyspark() -> tuple[str, str] | None:
    """(version, jars folder) of the pyspark importable in the build environment, if any."""
    try:
        import pyspark
    except ImportError:
        return None
    return pyspark.__version__, os.path.join(os.path.dirname(pyspark.__file__), "jars")


def jars_dir(line: SparkLine) -> str:
    """A folder holding the compile jars of `line`: the build environment's pyspark if it is of that line,
    else the cache, filled from the package index on first use."""
    override = os.environ.get("SPARKSTATE_SPARK_JARS")  # one folder for the newest line (IDEs, Gradle)
    if override and line == NEWEST:
        return override
    own = _build_env_pyspark()
    if own and line_of(own[0]) == line.name and os.path.isdir(own[1]):
        return own[1]
    # The folder's name carries the jar patterns, so a build that needs more jars unpacks afresh.
    patterns = hashlib.sha256("\n".join(COMPILE_JARS).encode()).hexdigest()[:8]
    target = os.path.join(_cache_dir(), f"{line.pyspark}-{patterns}")
    if glob.glob(os.path.join(target, "spark-sql_*.jar")):
        return target
    _fetch(line.pyspark, target)
    return target


def _fetch(version: str, target: str) -> None:
    """Download pyspark `version` from the package index and unpack its compile jars into `target`."""
    with tempfile.TemporaryDirectory() as download:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", download,
                   f"pyspark=={version}"]
        # The build hooks' variables name this project's backend; a nested pip building pyspark's sdist
        # metadata would inherit them and look for setuptools in _build/.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("_PYPROJECT_HOOKS_", "PEP517_"))}
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        files = glob.glob(os.path.join(download, "pyspark-*"))
        if done.returncode != 0 or not files:
            raise RuntimeError(
                f"sparkstate's shim for Spark {line_of(version)} compiles against pyspark {version}'s jars, and "
                f"downloading it failed:\n{done.stderr.strip()[-2000:]}\nBuild without network with "
                "SPARKSTATE_SPARK_LINES set to the lines whose jars are at hand (the build environment's "
                f"pyspark, or {_cache_dir()}/<version>/)")
        partial = target + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(partial)
        _unpack_jars(files[0], partial)
        os.replace(partial, target)


def _wanted(name: str) -> bool:
    base = os.path.basename(name)
    return name.endswith(".jar") and "/jars/" in name and any(fnmatch.fnmatch(base, p) for p in COMPILE_JARS)


def _unpack_jars(archive: str, target: str) -> None:
    """Copy the compile jars out of a pyspark sdist (deps/jars/) or wheel (pyspark/jars/)."""
    if archive.endswith(".whl"):
        with zipfile.ZipFile(archive) as wheel:
            for name in wheel.namelist():
                if _wanted(name):
                    with wheel.open(name) as src, open(os.path.join(target, os.path.basename(name)), "wb") as dst:
                        shutil.copyfileobj(src, dst)
        return
    with tarfile.open(archive, "r:*") as sdist:
        for member in sdist:
            if member.isfile() and _wanted(member.name):
                src = sdist.extractfile(member)
                with src, open(os.path.join(target, os.path.basename(member.name)), "wb") as dst:
                    shutil.copyfileobj(src, dst)
