"""``kill -USR1 PID`` prints every thread's Python stack to stderr and the process goes on.

The way to see where a long or stuck run spends its time without stopping it: ``mmverify`` installs
the handler at start-up and every worker process of ``--workers N`` does too, so signalling the
``mmverify`` process or any of its workers shows that process's threads.  Not the whole process
group: multiprocessing's resource tracker, also in it, has no such handler and would end, as would
a worker still starting up.  Ray actors have their own tool (``ray stack``).
"""

from __future__ import annotations

import faulthandler
import io
import signal
import sys
from typing import TextIO


def dump_stacks_on_sigusr1(stream: TextIO | None = None) -> bool:
    """Make SIGUSR1 print all threads' stacks to ``stream`` (stderr by default); True once installed.

    Nothing happens where there is no SIGUSR1 (Windows) or no file descriptor to write to (a
    captured stderr); the handler runs in C, so it reports even a process whose threads all hold
    or wait for the GIL.
    """
    if not hasattr(signal, "SIGUSR1"):
        return False
    target = stream if stream is not None else sys.stderr
    try:
        faulthandler.register(signal.SIGUSR1, file=target, all_threads=True)
    except (AttributeError, ValueError, RuntimeError, io.UnsupportedOperation):  # no usable descriptor
        return False
    return True
