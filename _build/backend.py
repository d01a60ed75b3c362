"""PEP 517 backend: setuptools plus one step that compiles the JVM shim.

Before building a wheel (or an editable install) it compiles `jvm-shim/src/main/java/**/*.java` with
`javac --release 17` against the jars of the pinned pyspark and puts `sparkstate.jar` inside the Python
package, so `pip install .` needs only pip and a JDK.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (re-export every other hook)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JAVA_SOURCES = os.path.join(ROOT, "jvm-shim", "src", "main", "java")
OUT_JAR = os.path.join(ROOT, "provider", "sparkstate", "jars", "sparkstate.jar")


class JdkMissingError(RuntimeError):
    pass


def _spark_jars_dir() -> str:
    override = os.environ.get("SPARKSTATE_SPARK_JARS")
    if override:
        return override
    import pyspark  # available through build-system.requires

    return os.path.join(os.path.dirname(pyspark.__file__), "jars")


def _jdk_tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    path = os.path.join(home, "bin", name) if home else shutil.which(name)
    if not path or not os.path.exists(path):
        raise JdkMissingError(
            f"sparkstate needs a JDK 17 to build its JVM shim, but `{name}` was not found "
            f"(JAVA_HOME={home!r}). Install one (Debian: apt-get install openjdk-17-jdk-headless) "
            "or point JAVA_HOME at it.")
    return path


def build_jar() -> str:
    sources = sorted(glob.glob(os.path.join(JAVA_SOURCES, "**", "*.java"), recursive=True))
    if not sources:
        raise RuntimeError(f"no Java sources under {JAVA_SOURCES}")
    classpath = os.path.join(_spark_jars_dir(), "*")
    with tempfile.TemporaryDirectory() as classes:
        subprocess.check_call([_jdk_tool("javac"), "--release", "17", "-encoding", "UTF-8", "-nowarn",
                               "-Xlint:none", "-cp", classpath, "-d", classes, *sources])
        os.makedirs(os.path.dirname(OUT_JAR), exist_ok=True)
        subprocess.check_call([_jdk_tool("jar"), "--create", "--file", OUT_JAR, "-C", classes, "."])
    return OUT_JAR


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    build_jar()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    build_jar()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)


if __name__ == "__main__":  # `python _build/backend.py` rebuilds the jar in place during development
    print(build_jar())
