"""The project's own words, each spelled once: the kinds of trigger a watch reports, the kinds of ``--json`` error
document, the policy ids and the check ids (each a ``StrEnum``, so it reads and prints as its string), and the one
mechanism by which the policy registry and the check catalogue gather what their modules declare
(:mod:`vocabulary.declarations`).

Below every package that speaks these words (``fleetspec`` names trigger kinds in the fleet file's ``haltOn``;
``policy``, ``checks`` and ``rollout`` the rest); it imports only ``gpu_knowledge`` (a trigger kind that is the GPU
Operator's state keeps the operator's spelling), so the policy pack carries it stand-alone.
"""
