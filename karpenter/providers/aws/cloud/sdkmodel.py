"""What the installed EC2 SDK model can express.

botocore validates every request against its bundled service model and refuses members it
does not know, so a field the installed model lacks (the pinned botocore 1.40 has no
CpuOptions.NestedVirtualization) would fail every launch instead of being ignored. Callers ask
here before sending such a field.
"""

from __future__ import annotations

import functools

import botocore.session


@functools.cache
def members(shape: str) -> frozenset[str]:
    """The member names of an EC2 request shape (empty when the model lacks the shape)."""
    model = botocore.session.get_session().get_service_model("ec2")
    try:
        return frozenset(model.shape_for(shape).members)
    except Exception:  # botocore raises NoShapeFoundError for an unknown shape
        return frozenset()


def nested_virtualization() -> bool:
    """Can a launch template's CpuOptions carry NestedVirtualization?"""
    return "NestedVirtualization" in members("LaunchTemplateCpuOptionsRequest")
