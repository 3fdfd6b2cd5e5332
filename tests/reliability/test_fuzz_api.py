"""API fuzzing with schemathesis against the served OpenAPI document (through the WSGI app, over
a kubesim fleet collected into the test Redis): no 5xx, and every answer (status, content type,
body, headers) conforms to the document. Bounded: a few dozen examples per operation.

Skipped when schemathesis is not installed (it is in the dev extra).
"""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip(
    "schemathesis", reason="schemathesis is not installed: pip install 'schemathesis>=4.0'"
)
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

from collector.jobs import collect_once  # noqa: E402
from tests.support.http import make_app  # noqa: E402
from tests.support.small_fleet import ADMIN  # noqa: E402

MAX_EXAMPLES = 25
EXCLUDED = [
    # Identity comes from the trusted proxy's headers here, so the document's bearer scheme is
    # ignored by design; test_identity.py covers token refusal.
    schemathesis.checks.ignored_auth,
    # A schema-valid `continue` is still only valid when this service signed it (opaque token).
    schemathesis.checks.positive_data_acceptance,
]


def test_api_conforms_and_never_5xx(sim, collector, settings) -> None:
    assert all(o.ok for o in collect_once(collector))
    app = make_app(settings)

    def from_loopback(environ, start_response):  # schemathesis' WSGI calls carry no address
        environ["REMOTE_ADDR"] = "127.0.0.1"
        return app(environ, start_response)

    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", from_loopback)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 5
    for operation in operations:
        fuzz(operation)


def fuzz(operation) -> None:
    """Schema-valid requests (negative generation would strip the identity headers that
    `header` mode needs; hostile input is test_proxy_abuse.py and tests/query/test_api.py)."""

    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def run(case) -> None:
        resp = case.call_and_validate(headers=ADMIN, excluded_checks=EXCLUDED)
        assert resp.status_code < 500

    run()
