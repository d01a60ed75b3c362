"""Which latency mode is this VM in? (see docs/benchmarks/index.md, "Latency mode")

A synchronous round trip between two processes over a Unix socket costs about 6 µs when the vCPUs are
busy and 40-90 µs when they halt between messages (the hypervisor has to wake them). Any benchmark of a
provider that crosses a process boundary (ours does) depends on that mode, so the harness records it.

The probe forks a process that echoes one byte and times `rounds` ping-pongs from Python; Python adds a
few microseconds to the raw figure (about 12-18 us measured in fast mode on these VMs under load),
so the thresholds are generous: below 25 us is "fast", above 35 us "slow", in between "mixed".
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

FAST_BELOW_US = 25.0
SLOW_ABOVE_US = 35.0


@dataclass(frozen=True)
class Probe:
    p50_us: float
    p90_us: float
    rounds: int

    @property
    def mode(self) -> str:
        if self.p50_us < FAST_BELOW_US:
            return "fast"
        if self.p50_us > SLOW_ABOVE_US:
            return "slow"
        return "mixed"

    def describe(self) -> str:
        return f"{self.mode} (UDS ping p50 {self.p50_us:.1f} us, p90 {self.p90_us:.1f} us, {self.rounds} rounds)"


def probe(rounds: int = 2000) -> Probe:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # echo child: no Python cleanup, no atexit handlers of the parent
        ours.close()
        try:
            while True:
                data = theirs.recv(1)
                if not data:
                    break
                theirs.sendall(data)
        finally:
            os._exit(0)
    theirs.close()
    samples = []
    try:
        for _ in range(rounds):
            start = time.perf_counter_ns()
            ours.sendall(b"x")
            ours.recv(1)
            samples.append(time.perf_counter_ns() - start)
    finally:
        ours.close()
        os.waitpid(pid, 0)
    samples.sort()
    return Probe(p50_us=samples[len(samples) // 2] / 1000, p90_us=samples[int(len(samples) * 0.9)] / 1000,
                 rounds=rounds)


if __name__ == "__main__":
    print(probe().describe())
