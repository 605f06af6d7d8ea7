"""The config map the running Pulumi program received, for ``fleetspec.load.spec_from_config``.

It lives here, not in ``fleetspec/``, because reading it needs the Pulumi SDK and ``fleetspec`` imports no Pulumi
(the import contracts in pyproject.toml hold that); the CLI builds the same map from the stack file instead.
"""

from __future__ import annotations

import json

from pulumi.runtime import config as runtime_config_module


def runtime_config() -> dict[str, str]:
    """The config map the running Pulumi program received (engine or mocks), structured values as JSON."""
    merged = dict(runtime_config_module.get_config_env())
    merged.update(runtime_config_module.CONFIG.get())
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in merged.items()}
