"""What happens at a time after the load starts (a distillation student created, a fault fired), as
daemon timers the run cancels in its teardown."""

from __future__ import annotations

import threading
from collections.abc import Callable


class LoadSchedule:
    """Timers started when the load starts; ``cancel`` stops those that have not fired."""

    def __init__(self) -> None:
        self.timers: list[threading.Timer] = []
        #: called at :meth:`cancel`: what runs longer than one action (a fault process) stops there
        self.on_cancel: list[Callable[[], None]] = []

    def at(self, delay_s: float, action: Callable[[], None]) -> None:
        """Run ``action`` ``delay_s`` from now, in a thread of its own."""
        t = threading.Timer(delay_s, action)
        t.daemon = True
        t.start()
        self.timers.append(t)

    def cancel(self) -> None:
        for t in self.timers:
            t.cancel()
        for stop in self.on_cancel:
            stop()
