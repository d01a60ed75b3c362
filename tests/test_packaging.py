import os
import tomllib

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _packages_on_disk(folder: str, name: str) -> set[str]:
    found = set()
    for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
        if "__init__.py" in files and "__pycache__" not in dirpath:
            rel = os.path.relpath(dirpath, os.path.join(ROOT, folder))
            found.add(name if rel == "." else name + "." + rel.replace(os.sep, "."))
    return found


def test_every_package_folder_is_listed_in_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    on_disk = _packages_on_disk("provider/sparkstate", "sparkstate") | _packages_on_disk("python", "sparkstate_jobs")
    assert on_disk == listed


def test_installed_package_ships_the_shim_jar():
    import sparkstate

    assert os.path.getsize(sparkstate.jar_path()) > 10_000


def test_the_installed_package_and_its_jar_carry_one_build_id():
    """The id a worker reports (sparkstate.build_id) is the one in the jar: BuildId.java compares them."""
    import zipfile

    import sparkstate

    with zipfile.ZipFile(sparkstate.jar_path()) as jar:
        in_jar = jar.read("io/sparkstate/build-id").decode()
    assert sparkstate.build_id() is not None and sparkstate.build_id() == in_jar


@pytest.mark.slow
@pytest.mark.spark  # the build compiles the shim with javac
def test_the_wheel_holds_the_jar_and_installs_without_a_jdk(tmp_path):
    """`pip wheel .` compiles the jar into a pure wheel; installing that wheel runs no build step, so an
    executor's machine needs Python and a Java runtime, no JDK and no compiler: pip installs it here with
    nothing on PATH and no JAVA_HOME. Built from a copy of the sources, so the checkout's jars stay."""
    import shutil
    import subprocess
    import sys
    import zipfile

    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "*.jar", "build-id", "__pycache__", "build",
                                                                "dist", "*.egg-info", ".venv*", "demo-output"))
    dist = tmp_path / "dist"
    build_env = {**os.environ, "SPARKSTATE_SPARK_LINES": "4.3"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(dist)], check=True, env=build_env, timeout=600)
    (wheel,) = dist.glob("sparkstate-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), "a pure wheel: nothing to compile where it is installed"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        jar = zf.read("sparkstate/jars/sparkstate-spark-4.3.jar")
        build = zf.read("sparkstate/jars/build-id").decode()
    assert not [n for n in names if n.endswith((".c", ".java", "setup.py", ".pth"))], names

    target = tmp_path / "site"
    no_jdk = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PATH")}
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target),
                    str(wheel)], check=True, env={**no_jdk, "PATH": ""}, timeout=300)
    installed = target / "sparkstate" / "jars" / "sparkstate-spark-4.3.jar"
    assert installed.read_bytes() == jar
    code = ("import sparkstate; print(sparkstate.__file__); print(sparkstate.jar_path('4.3.0')); "
            "print(sparkstate.build_id())")
    probe = subprocess.run([sys.executable, "-c", code],
                           env={**no_jdk, "PATH": "", "PYTHONPATH": str(target)}, capture_output=True, text=True,
                           check=True, timeout=120)
    module, jar_path, build_id = probe.stdout.split()
    assert module.startswith(str(target)) and jar_path == str(installed) and build_id == build
