"""One fair queue for the app's jobs: Gradio's queue, shared among its clients by the core's rules.

Gradio serves queued events first come, first served, and its queue (64 places) is everyone's: 30 /saliency calls
from one gradio_client made another visitor's /saliency take 185 s where it took 0.5 s alone. Here, across every
queued endpoint (explanations and work over datasets alike):

- a client (its address, `api.client_key`) may have at most `client_jobs` jobs running and waiting together; the
  door (`ShareAtTheDoor`) answers a join past that with 429, the wait until one of its jobs should end, and
  Retry-After, before Gradio reads the request;
- a freed slot goes to the waiting job whose client holds fewest (`api.turns`): every client's next job comes
  before anyone's second;
- the queue takes `QUEUE_ROOM` jobs from clients that have one there already and as many again from clients that
  have none: many addresses each filling their share no longer leave a new visitor "queue full".

This is glue to Gradio's `Queue` (its `get_events`, `event_queue_per_concurrency_id`, `active_jobs` and
`process_time_per_fn`); tests/test_hostile.py fails at once where a Gradio release changes them.
"""
from __future__ import annotations

import time
from collections import Counter

from app.core import api

QUEUE_ROOM = 64  # waiting jobs from clients that have one there already; Gradio's own limit is twice this


class FairQueue:
    """Gradio's `queue` made fair: `most` jobs per client, running and waiting; turns by `api.turns`."""

    def __init__(self, queue, most: int, proxies: int | tuple = 0, room: int | None = None):
        self.queue, self.most, self.proxies, self.room = queue, most, proxies, room
        self.joining: Counter[str] = Counter()  # joins the door let through that Gradio has not queued yet
        taken = queue.get_events

        def get_events():
            self._order()
            got = taken()
            if got:
                for event in got[0]:
                    event.lens_started = time.monotonic()
            return got

        queue.get_events = get_events

    def client(self, event) -> str:
        """The client an event came from, read once from the request that queued it."""
        key = getattr(event, "lens_client", None)
        if key is None:
            request = getattr(event, "request", None)
            peer = getattr(getattr(request, "client", None), "host", None)
            key = event.lens_client = api.client_key(peer, getattr(request, "headers", None), self.proxies)
        return key

    def _running(self) -> list:
        return [e for job in list(self.queue.active_jobs) if job for e in job]

    def _order(self) -> None:
        """Each group's waiting events put in the order their turns come (called under Gradio's queue lock)."""
        running = Counter(self.client(e) for e in self._running())
        for group in self.queue.event_queue_per_concurrency_id.values():
            if len(group.queue) > 1:
                waiting = group.queue
                group.queue[:] = [waiting[i] for i in api.turns([self.client(e) for e in waiting], running)]

    def held(self, client: str) -> tuple[int, int, float | None]:
        """(jobs running, jobs waiting or joining, seconds until the first of its running jobs should end: the
        server's mean time for that endpoint less the time it has run; None when not known)."""
        now = time.monotonic()
        running = [e for e in self._running() if self.client(e) == client]
        waiting = sum(self.client(e) == client for g in list(self.queue.event_queue_per_concurrency_id.values())
                      for e in list(g.queue)) + self.joining[client]
        left = []
        for e in running:
            spent = self.queue.process_time_per_fn.get(e.fn)
            if spent is not None and spent.count:
                left.append(max(0.0, spent.avg_time - (now - getattr(e, "lens_started", now))))
        return len(running), waiting, (min(left) if left else None)

    def refusal(self, client: str) -> tuple[str, int] | None:
        """(why `client` may not queue another job, the seconds to say in Retry-After), or None where it may."""
        running, waiting, wait_s = self.held(client)
        queued = len(self.queue) + sum(self.joining.values())
        why = api.over_share(running, waiting, self.most, wait_s, queued=queued, room=self.room)
        if why is None:
            return None
        return why, api.retry_after(wait_s) or 5  # not known yet: a few seconds
