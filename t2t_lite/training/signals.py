"""Turns SIGINT / SIGTERM into a request to stop at the next safe point: the next step boundary of the
training loop (after an evaluation under way), or the next checkpoint read while averaging."""
import contextlib
import signal
import threading


class StopRequest:
    """Set by a signal handler; the training loop checks it after every step."""

    def __init__(self):
        self.signal_name: str | None = None

    @property
    def requested(self) -> bool:
        return self.signal_name is not None


@contextlib.contextmanager
def stop_on_signals():
    """Within the block, SIGINT and SIGTERM set the yielded StopRequest instead of killing the process.

    A second signal restores the default behaviour, so an impatient Ctrl-C
    still ends a run that is stuck. Outside the main thread, where Python
    cannot install handlers, signals keep their behaviour and the request is
    never set.
    """
    request = StopRequest()
    previous = {}

    def handler(signum, frame):
        request.signal_name = signal.Signals(signum).name
        for sig, old in previous.items():
            signal.signal(sig, old)

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield request
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
