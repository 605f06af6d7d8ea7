"""Why a verb stops, and with which exit code: the exit codes (:mod:`refusals.exits`) and the refusals
(:mod:`refusals.errors`), one hierarchy whose classes carry their code and their kind. The engines raise them,
and ``rollout.cli.run`` alone turns one into an exit code, a message on stderr and the ``--json`` error document."""
