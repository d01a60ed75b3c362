from ..engine.conftest import backend  # noqa: F401 - the backend fixture: every test runs on both backends
