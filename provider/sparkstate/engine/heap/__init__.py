"""The heap backend: state in memory, copy-on-write versions, a delta per commit, full snapshots in the
background."""
