"""Options for a component's children: the one way a component builds them (tests/components/test_options.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi


def child_options(
    component: pulumi.Resource,
    opts: pulumi.ResourceOptions | None = None,
    *,
    depends_on: Sequence[pulumi.Resource] | None = None,
    providers: Sequence[pulumi.ProviderResource] | None = None,
    transformations: Sequence[pulumi.ResourceTransformation] | None = None,
    import_: str | None = None,
) -> pulumi.ResourceOptions:
    """Children are parented to their component and wait for what the component waits for.

    A component's ``depends_on`` does not reach its children by itself (the engine only expands a
    dependency *on* a component to its children), so it is passed on here: a pool driver must not be
    applied before the PDBs and the pool's own labels exist.

    ``opts`` is the component's own options (only its ``depends_on`` is passed on); the parent is always
    ``component``. ``depends_on`` is what this child waits for besides, ``providers`` and ``transformations``
    are its own (the stack's Kubernetes provider, the AKS pool's alias filter), ``import_`` the ID of the cloud pool
    it adopts (Pulumi's ``import``: the engine reads the existing one into the stack instead of creating it).
    """
    inherited = pulumi.ResourceOptions(parent=component, depends_on=opts.depends_on if opts is not None else None)
    if depends_on is None and providers is None and transformations is None and import_ is None:
        return inherited
    # ResourceOptions.merge joins the dependencies whatever their shape (a list, one resource, an Output).
    return inherited.merge(pulumi.ResourceOptions(
        depends_on=list(depends_on) if depends_on is not None else None,
        providers=list(providers) if providers is not None else None,
        transformations=list(transformations) if transformations is not None else None,
        import_=import_,
    ))
