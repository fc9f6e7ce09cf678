"""Ctrl-C at safe points only.

A KeyboardInterrupt raised while numba's dispatcher types the arguments of a compiled function or
returns from it can crash the process with SIGSEGV (seen with `bpparse relax`, which calls kernels
per sentence: 4 of 6 interrupts), and one raised between writing a batch of CoNLL-U and its
marginals leaves the two files out of step. Inside a `deferred` block a SIGINT only sets a flag;
the KeyboardInterrupt is raised when the block ends. A second Ctrl-C acts at once (a write to a
pipe nobody reads must stay interruptible). Outside such blocks Ctrl-C acts at once as usual.
"""
import signal
import threading
from contextlib import contextmanager

_pending = []


def _defer(signum, frame):
    if _pending:
        _pending.clear()
        raise KeyboardInterrupt
    _pending.append(signum)


@contextmanager
def deferred():
    """Defer SIGINT to the end of the block (main thread, default handler only; else a no-op)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    signal.signal(signal.SIGINT, _defer)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if _pending:
            _pending.clear()
            raise KeyboardInterrupt
