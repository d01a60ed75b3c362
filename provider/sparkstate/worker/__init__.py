"""The Python store worker: one process per executor task slot, started by the JVM shim.

`python -m sparkstate.worker` connects back to the JVM over py4j (control calls), serves data frames
on a Unix domain socket, and exits when its JVM goes away (stdin EOF).
"""
