"""A leaf client whose RoleBinding list is handed over only when a test lets it go: a full RBAC
sync whose lists straddle a change on the leaf (tests/security/test_revocation_race.py,
tests/watch/test_events.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from common.leaf.client import LeafClient


class HeldAfterBindings(LeafClient):
    """`client`'s lists, as the leaf answers them; the RoleBindings' held after the answer
    (`listed` set) until `go` is set."""

    def __init__(self, client: LeafClient) -> None:
        self.__dict__.update(client.__dict__)
        self.listed, self.go = threading.Event(), threading.Event()

    def list_resource(self, api_version: str, plural: str) -> Iterator[dict[str, Any]]:
        items = list(super().list_resource(api_version, plural))
        if plural == "rolebindings":
            self.listed.set()
            assert self.go.wait(30), "the test did not let the sync go on"
        return iter(items)
