"""Options for a component's children."""

from __future__ import annotations

import pulumi


def child_options(component: pulumi.ComponentResource, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """Children are parented to their component and wait for what the component waits for.

    A component's ``depends_on`` does not reach its children by itself (the engine only expands a
    dependency *on* a component to its children), so it is passed on here: a pool driver must not be
    applied before the PDBs and the pool's own labels exist.
    """
    return pulumi.ResourceOptions(parent=component, depends_on=opts.depends_on if opts is not None else None)
