import os
import tomllib

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
