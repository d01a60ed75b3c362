"""Storage: a few file verbs behind one interface, chosen by URI scheme (local now, S3 later)."""
from .fileio import FileIO, fileio_for
from .local import LocalFileIO

__all__ = ["FileIO", "LocalFileIO", "fileio_for"]
