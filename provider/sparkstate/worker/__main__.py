"""Entry point of a store worker: `python -m sparkstate.worker`, started by the JVM shim.

Environment (set by the shim; the secret is never on the command line):
  SPARKSTATE_GATEWAY_PORT    loopback port of the py4j GatewayServer the JVM made for this worker
  SPARKSTATE_GATEWAY_SECRET  its auth token
  SPARKSTATE_WORKER_ID       the id the JVM knows this worker by
  SPARKSTATE_SOCKET_DIR      private (0700) directory for the data socket and the heartbeat file
  SPARKSTATE_HEARTBEAT_INTERVAL_MS  how often to beat (worker/heartbeat.py)
The worker exits when stdin reaches EOF: the JVM holds the other end, so the worker dies with it, also
after kill -9. SIGUSR1 makes it write every thread's Python stack to stderr (the shim asks for that
before it kills a hung worker, so the task's error shows where it hung).
"""
from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading


def _exit_when_parent_goes(stdin_fd: int, on_exit: "list") -> None:
    try:
        while os.read(stdin_fd, 4096):
            pass
    except OSError:
        pass
    for action in on_exit:  # best effort: drop local working copies; the checkpoint is the durable copy
        try:
            action()
        except Exception:
            pass
    os._exit(0)


def _required_env(name: str) -> str:
    value = os.environ.pop(name, None)  # pop: children of this process must not inherit the secret
    if not value:
        sys.stderr.write(f"sparkstate.worker: {name} is not set; this module is started by the sparkstate "
                         "JVM shim, not by hand\n")
        sys.exit(2)
    return value


def main() -> None:
    port = int(_required_env("SPARKSTATE_GATEWAY_PORT"))
    secret = _required_env("SPARKSTATE_GATEWAY_SECRET")
    worker_id = _required_env("SPARKSTATE_WORKER_ID")
    socket_dir = _required_env("SPARKSTATE_SOCKET_DIR")

    on_exit: list = []
    threading.Thread(target=_exit_when_parent_goes, args=(sys.stdin.fileno(), on_exit),
                     name="sparkstate-parent-watch", daemon=True).start()
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    from .heartbeat import start_from_env
    start_from_env(socket_dir)

    # Imported after the watcher so a slow import never outlives the JVM.
    from py4j.java_gateway import CallbackServerParameters, GatewayParameters, JavaGateway

    from .control import WorkerControl
    from .data_server import DataServer
    from .registry import StoreRegistry

    registry = StoreRegistry()
    on_exit.append(registry.close_all)
    socket_path = os.path.join(socket_dir, "data.sock")
    server = DataServer(socket_path, registry.get)
    server.start()

    stop = threading.Event()
    gateway = JavaGateway(
        gateway_parameters=GatewayParameters(address="127.0.0.1", port=port, auth_token=secret,
                                             auto_convert=True),
        callback_server_parameters=CallbackServerParameters(address="127.0.0.1", port=0, auth_token=secret,
                                                            daemonize=True, daemonize_connections=True))
    callback_port = gateway.get_callback_server().get_listening_port()
    java_server = gateway.java_gateway_server
    java_server.resetCallbackClient(java_server.getCallbackClient().getAddress(), callback_port)

    control = WorkerControl(registry, on_shutdown=stop.set)
    gateway.entry_point.register(worker_id, control, socket_path, os.getpid())
    stop.wait()
    registry.close_all()
    os._exit(0)


if __name__ == "__main__":
    main()
