"""Which version of the resource facts the program writes, and which the pack reads.

The pack reads what the program writes (labels, annotations, records: this package), and the two need not
come from one commit: the prod `up` enforces the pack of the protected base (the commit before the change,
or a published pack version) on the program of the change. So the program stamps the version of the facts
it writes on the stack's cluster-identity record (``factsVersion``), and the pack refuses facts newer than
it reads, naming both versions (policy ``facts-readable``), instead of misreading them.

Change the encoding of a fact in two steps, expand then contract: first a change whose readers take the old
and the new facts and which raises ``READABLE_FACTS_VERSION`` (the program still writes the old ones); once
that pack is what judges (merged, or published and enabled), a change that writes the new facts and raises
``FACTS_VERSION``. A single change raising both is refused at its own deploy, by design.
"""

from __future__ import annotations

FACTS_VERSION = 2  # the facts this program writes
READABLE_FACTS_VERSION = 2  # the newest facts this pack reads (never below FACTS_VERSION)
# A record without the stamp was written before there was one: by a program that wrote version 1.
UNSTAMPED_FACTS_VERSION = 1
