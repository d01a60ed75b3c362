"""PEP 517 backend: setuptools plus one step that compiles the JVM shim, one jar per Spark line.

Before building a wheel (or an editable install) it compiles, for every Spark line (`spark_lines.LINES`),
the shared sources `jvm-shim/src/main/java` plus that line's source folders with `javac --release 17`
against the jars of that line's pyspark, adds the settings declarations of provider/sparkstate/config.py
as `io/sparkstate/settings.json` (the shim's defaults and bounds come from there), the line it serves
(`io/sparkstate/spark-line`) and a build id (`build_id`; also written beside the jars, so a worker can
tell the JVM which build it is), and puts `sparkstate-spark-<line>.jar` inside the Python package, so
`pip install .` needs only pip and a JDK. `run_java_tests` compiles and runs the shim's unit tests
(jvm-shim/src/test/java) against the newest line's jar.
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (re-export every other hook)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spark_lines  # noqa: E402  (beside this file; the build runs it from _build/)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JAVA_TESTS = os.path.join(ROOT, "jvm-shim", "src", "test", "java")
SETTINGS_RESOURCE = "settings.json"
BUILD_ID_RESOURCE = "build-id"
LINE_RESOURCE = "spark-line"
OUT_DIR = os.path.join(ROOT, "provider", "sparkstate", "jars")
OUT_BUILD_ID = os.path.join(OUT_DIR, BUILD_ID_RESOURCE)


class JdkMissingError(RuntimeError):
    pass


def _jdk_tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    path = os.path.join(home, "bin", name) if home else shutil.which(name)
    if not path or not os.path.exists(path):
        raise JdkMissingError(
            f"sparkstate needs a JDK 17 to build its JVM shim, but `{name}` was not found "
            f"(JAVA_HOME={home!r}). Install one (Debian: apt-get install openjdk-17-jdk-headless) "
            "or point JAVA_HOME at it.")
    return path


def _settings_declarations() -> str:
    """The settings declarations of provider/sparkstate/config.py as JSON (read by ShimSettings.java)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from sparkstate.config import declarations_json; print(declarations_json())")
    return subprocess.check_output([sys.executable, "-c", code, os.path.join(ROOT, "provider")], text=True)


def build_id() -> str:
    """A digest of the shim's Java sources and the Python package's sources: the jar and the package of one
    build carry the same id, so a worker interpreter with another install of sparkstate is told apart."""
    digest = hashlib.sha256()
    python_sources = glob.glob(os.path.join(ROOT, "provider", "sparkstate", "**", "*.py"), recursive=True)
    java_sources = [path for folder in glob.glob(os.path.join(ROOT, "jvm-shim", "src", "*", "java"))
                    if os.path.abspath(folder) != os.path.abspath(JAVA_TESTS) for path in _sources(folder)]
    for path in sorted(java_sources + python_sources):
        digest.update(os.path.relpath(path, ROOT).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def _compile(sources: list[str], classpath: str, classes: str) -> None:
    subprocess.check_call([_jdk_tool("javac"), "--release", "17", "-encoding", "UTF-8", "-nowarn",
                           "-Xlint:none", "-cp", classpath, "-d", classes, *sources])


def _sources(root: str) -> list[str]:
    sources = sorted(glob.glob(os.path.join(root, "**", "*.java"), recursive=True))
    if not sources:
        raise RuntimeError(f"no Java sources under {root}")
    return sources


def build_jars() -> list[str]:
    """Compile the shim of every selected Spark line; returns the jars' paths. The jars replace those of an
    earlier build only once every line compiled, so a failed build (no JDK, a compile error) keeps them."""
    os.makedirs(OUT_DIR, exist_ok=True)
    settings = _settings_declarations()
    identity = build_id()
    with tempfile.TemporaryDirectory(dir=OUT_DIR) as staging:
        built = [_build_line_jar(line, settings, identity, staging) for line in spark_lines.selected_lines()]
        for stale in glob.glob(os.path.join(OUT_DIR, "*.jar")):
            os.remove(stale)
        jars = []
        for path in built:
            jars.append(os.path.join(OUT_DIR, os.path.basename(path)))
            os.replace(path, jars[-1])
    with open(OUT_BUILD_ID, "w", encoding="utf-8") as f:
        f.write(identity)
    return jars


def _build_line_jar(line: "spark_lines.SparkLine", settings: str, identity: str, out_dir: str) -> str:
    sources = [path for folder in line.sources() for path in _sources(folder)]
    classpath = os.path.join(spark_lines.jars_dir(line), "*")
    out = os.path.join(out_dir, line.jar_name)
    with tempfile.TemporaryDirectory() as classes:
        _compile(sources, classpath, classes)
        resources = os.path.join(classes, "io", "sparkstate")
        for name, text in ((SETTINGS_RESOURCE, settings), (BUILD_ID_RESOURCE, identity), (LINE_RESOURCE, line.name)):
            with open(os.path.join(resources, name), "w", encoding="utf-8") as f:
                f.write(text)
        subprocess.check_call([_jdk_tool("jar"), "--create", "--file", out, "-C", classes, "."])
    return out


def newest_jar() -> str:
    return os.path.join(OUT_DIR, spark_lines.NEWEST.jar_name)


def run_java_tests(jar: str | None = None) -> subprocess.CompletedProcess:
    """Compile jvm-shim/src/test/java against the shim jar and Spark's jars and run them (ShimTests: no
    test framework is reachable offline, so the runner is part of the tests). Returns the finished
    process; its output lists every test, exit code 0 when all passed."""
    jar = jar or newest_jar()
    classpath = os.pathsep.join([jar, os.path.join(spark_lines.jars_dir(spark_lines.NEWEST), "*")])
    with tempfile.TemporaryDirectory() as classes:
        _compile(_sources(JAVA_TESTS), classpath, classes)
        return subprocess.run([_jdk_tool("java"), "-cp", os.pathsep.join([classes, classpath]),
                               "io.sparkstate.ShimTests"], capture_output=True, text=True, timeout=600)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    build_jars()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    build_jars()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)


if __name__ == "__main__":  # `python _build/backend.py` rebuilds the jar in place during development
    print("\n".join(build_jars()))
