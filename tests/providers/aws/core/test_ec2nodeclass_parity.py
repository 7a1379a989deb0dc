"""The pydantic EC2NodeClass model agrees with the CRD on every case of the e2e truth table."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from karpenter.providers.aws.api.ec2nodeclass import EC2NodeClassDoc
from tests.support.ec2nodeclass_cases import CASES, Case, base, merge


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_model_accepts_what_the_apiserver_accepts(case: Case) -> None:
    """Accepted by the apiserver ⇔ accepted by the model (errors need not be worded alike)."""
    body = base()
    merge(body["spec"], case.spec)
    if case.error is None:
        EC2NodeClassDoc.model_validate(body)
    else:
        with pytest.raises(ValidationError):
            EC2NodeClassDoc.model_validate(body)
