"""``kill -9`` at a chosen moment, for the tests that resume after it."""

import signal
import time
from pathlib import Path


def kill_9_when(proc, path: Path, timeout: float = 300.0) -> None:
    """SIGKILLs ``proc`` as soon as ``path`` exists (a checkpoint it writes),
    and checks that the signal is what ended it."""
    start = time.time()
    while proc.poll() is None and time.time() - start < timeout:
        if path.exists():
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "it ended before the kill"
