"""Storage: a few file verbs behind one interface, chosen by URI scheme (local, S3)."""
from .fileio import FileInfo, FileIO, fileio_for, join_path
from .local import LocalFileIO

__all__ = ["FileInfo", "FileIO", "LocalFileIO", "fileio_for", "join_path"]
