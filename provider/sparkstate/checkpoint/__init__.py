"""Checkpoint bookkeeping: per-version manifests, remote file names, the local file cache, retention."""
from .file_manager import CheckpointFileManager, CleanupResult, UploadResult
from .manifest import Manifest, PrivateFile, SharedFileRef, StoreIdentity

__all__ = ["CheckpointFileManager", "CleanupResult", "UploadResult", "Manifest", "PrivateFile", "SharedFileRef",
           "StoreIdentity"]
