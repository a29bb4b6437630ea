# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""How long reading an inventory may take and how much memory a template may take.

One ``ReadingBudget`` covers the whole read of an inventory (parsing its sources, resolving
every host's variables, rendering the gpuprov_* ones): it is set up once, so the cost of a
read does not grow with the number of variables, and a run out of time names the host and
variable it stopped at and the ones that took the most time.

Inside it, each template that renders gets its own limits, as before:

* at most ``TEMPLATE_SECONDS`` (``{% for i in range(10**9) %}`` would otherwise use the whole
  budget of every host after it);
* at most ``TEMPLATE_MEMORY_BYTES`` of growth of the process (``{{ 'x' * 10**10 }}`` asks for
  10 GB at once; RLIMIT_AS makes that a MemoryError instead of filling the machine).

Both are armed only for values that are templates: plain data is copied without Ansible's
templating (see inventory.render_host), so an inventory without templates pays nothing.
Signals reach Python only in the main thread: elsewhere the read runs without time limits.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import threading
import time

# The whole read: generous for 10,000 nodes on a slow machine, well under a CI step's patience.
DEFAULT_BUDGET_SECONDS = 30
MAX_BUDGET_SECONDS = 3600
TEMPLATE_SECONDS = 5
TEMPLATE_MEMORY_BYTES = 512 * 1024 * 1024
MEMORY_PROBLEM = ("cannot render: the template needs more than %d MiB of memory"
                  % (TEMPLATE_MEMORY_BYTES // (1024 * 1024)))
TEMPLATE_TIME_PROBLEM = "cannot render: the template ran longer than %d s" % TEMPLATE_SECONDS
# How many of the slowest variables a budget error names.
SLOWEST_SHOWN = 5


class TemplateTimeout(BaseException):
    """One template ran longer than TEMPLATE_SECONDS. A BaseException, so no ``except
    Exception`` in the templating code on the way can swallow it."""


class BudgetExhausted(BaseException):
    """The whole read ran past its budget (raised once; the budget is disarmed first)."""


class ReadingBudget:
    """The time budget of one inventory read, and the per-template limits inside it.

    Use as a context manager around the whole read; ``step()`` says what is being done (for
    the message when the budget runs out) and ``template()`` wraps one template's rendering.
    An alarm the caller had set (a test's watchdog, say) still fires at its time: its
    handler is called, and what is left of it is put back afterwards.
    """

    def __init__(self, seconds=DEFAULT_BUDGET_SECONDS):
        self.seconds = seconds
        self.deadline = None
        self.where = "parsing the inventory"
        # (seconds, "host: variable") of every template that rendered
        self.spent = []
        self._armed = False
        self._installed = False
        self._previous_handler = None
        self._caller_deadline = None
        self._caller_interval = 0.0
        self._in_template = False
        self._open = None
        self._statm = None
        self._resource = None

    # -- the whole read --------------------------------------------------------------------

    def __enter__(self):
        now = time.monotonic()
        self.deadline = now + self.seconds
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            self._previous_handler = signal.signal(signal.SIGALRM, self._expire)
            self._installed = True
            previous = signal.setitimer(signal.ITIMER_REAL, 0)
            if previous[0] > 0:
                self._caller_deadline, self._caller_interval = now + previous[0], previous[1]
            self._armed = True
            self._arm(self.seconds)
        self._open_memory_probe()
        return self

    def __exit__(self, *exc_info):
        self._armed = False
        if self._installed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous_handler)
            self._installed = False
            if self._caller_deadline is not None:
                signal.setitimer(signal.ITIMER_REAL, max(self._caller_deadline - time.monotonic(), 0.001),
                                 self._caller_interval)
                self._caller_deadline = None
        self.end_template()
        self._close_memory_probe()
        return False

    def _arm(self, seconds):
        """The timer, for ``seconds`` at most and never past the budget or the caller's alarm."""
        now = time.monotonic()
        until = self.deadline if self._caller_deadline is None else min(self.deadline, self._caller_deadline)
        signal.setitimer(signal.ITIMER_REAL, max(min(seconds, until - now), 0.001))

    def _expire(self, signum, frame):
        if not self._armed:
            return
        now = time.monotonic()
        if self._caller_deadline is not None and now >= self._caller_deadline - 0.001 \
                and self._caller_deadline <= self.deadline:
            self._caller_deadline = None
            if callable(self._previous_handler):
                self._arm(self.deadline - now)
                self._previous_handler(signum, frame)
            return
        if now >= self.deadline - 0.001:
            # Disarm first: the cleanup on the way out must not be interrupted again.
            self._armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            raise BudgetExhausted()
        if self._in_template:
            self._in_template = False
            self._arm(self.deadline - now)
            raise TemplateTimeout()
        self._arm(self.deadline - now)

    def left(self):
        return max(self.deadline - time.monotonic(), 0.0)

    def step(self, where):
        self.where = where

    def exhausted_message(self):
        """What ran out and who used the time, one line."""
        slowest = sorted(self.spent, key=lambda item: -item[0])[:SLOWEST_SHOWN]
        used = "; most time: %s" % ", ".join("%s (%.1f s)" % (name, seconds) for seconds, name in slowest) \
            if slowest else ""
        return ("reading the inventory took longer than its time budget of %g s (stopped while %s%s); "
                "raise it with --time-budget SECONDS" % (self.seconds, self.where, used))

    # -- one template ----------------------------------------------------------------------

    def template(self, label):
        """Context manager: the limits of one template while it renders."""
        return _OneTemplate(self, label)

    def begin_template(self, label):
        """Arm one template's memory cap and time limit."""
        self.end_template()
        restore = None
        if self._resource is not None:
            resource = self._resource
            current = self._address_space_bytes()
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            wanted = None if current is None else current + TEMPLATE_MEMORY_BYTES
            if wanted is not None and (hard == resource.RLIM_INFINITY or wanted <= hard) and \
                    (soft == resource.RLIM_INFINITY or wanted <= soft):
                resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
                restore = (soft, hard)
        started = time.monotonic()
        self._open = (label, started, restore)
        if self._armed:
            self._in_template = True
            self._arm(TEMPLATE_SECONDS)

    def end_template(self):
        """Put the process's limits back and record the time the template took. Idempotent:
        callers that catch a timeout or MemoryError call it again, since the signal may have
        arrived while an earlier call was on its way."""
        was_in_template, self._in_template = self._in_template, False
        if was_in_template and self._armed:
            self._arm(self.deadline - time.monotonic())
        opened, self._open = self._open, None
        if opened is not None:
            label, started, restore = opened
            if restore is not None:
                self._resource.setrlimit(self._resource.RLIMIT_AS, restore)
            self.spent.append((time.monotonic() - started, label))

    def _open_memory_probe(self):
        """/proc/self/statm, kept open so each template costs one pread, not an open."""
        try:
            import resource
            self._statm = os.open("/proc/self/statm", os.O_RDONLY)
            int(os.pread(self._statm, 64, 0).split()[0])
            self._resource = resource
        except (ImportError, OSError, AttributeError, ValueError, IndexError):
            self._close_memory_probe()

    def _close_memory_probe(self):
        if self._statm is not None:
            os.close(self._statm)
        self._statm = None
        self._resource = None

    def _address_space_bytes(self):
        try:
            return int(os.pread(self._statm, 64, 0).split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return None


class _OneTemplate:
    __slots__ = ("budget", "label")

    def __init__(self, budget, label):
        self.budget = budget
        self.label = label

    def __enter__(self):
        self.budget.begin_template(self.label)
        return self

    def __exit__(self, *exc_info):
        self.budget.end_template()
        return False
