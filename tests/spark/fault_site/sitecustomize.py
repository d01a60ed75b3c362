"""Installs the fault plugin in every Python started with this directory on PYTHONPATH, when the file
named by SPARKSTATE_FAULTS_FILE exists: the way faults reach an executor's embedded interpreter (Jep),
which no pythonExec wrapper starts. Test-only (see fault_plugin.py)."""
import os

_path = os.environ.get("SPARKSTATE_FAULTS_FILE")
if _path and os.path.exists(_path):
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import fault_plugin

    with open(_path) as _f:
        fault_plugin.install(_f.read())
