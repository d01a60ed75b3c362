import os
import socket

from sparkstate.worker import protocol as p
from sparkstate.worker.data_server import DataServer

from .fakes import DictStore, recv_exact


def test_pipelined_puts_then_get_over_a_unix_socket(tmp_path):
    store = DictStore()
    path = str(tmp_path / "data.sock")
    DataServer(path, lambda handle: store).start()
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(path)
    frames = b"".join(p.encode_request(p.OP_BATCH, 1, p.encode_batch([(b"key-%d" % i, b"v%d" % i)]))
                      for i in range(100))
    client.sendall(frames + p.encode_request(p.OP_GET, 1, b"key-99"))
    (vlen,) = p.INT.unpack(recv_exact(client, 4))
    assert recv_exact(client, vlen) == b"v99"
    client.close()
    assert len(store.data) == 100
