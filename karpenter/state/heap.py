"""The mirror's long-lived objects, kept out of the cyclic garbage collector's full runs.

A full (generation 2) collection walks every tracked object while holding the GIL, in whichever
thread triggers it. With a large cluster mirrored (3,000 nodes and 24,000 pods) one such run
took 0.26 s, and the event loop (watches, /healthz, Lease renewals) stood still for all of it
(``bench/responsiveness.py``). Once the informers have listed, the mirror is most of the heap
and lives as long as the process; freezing it moves it to the collector's permanent generation,
so later full runs walk only what was allocated since. The mirror's objects are acyclic (JSON
dicts and the frozen dataclasses decoded from them), so when an update replaces one, reference
counting still frees it; only cyclic garbage already present at the freeze would outlive it,
which is why the heap is collected first.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect once, then keep every object alive now out of future collections."""
    gc.collect()
    gc.freeze()
