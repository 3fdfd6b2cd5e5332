"""Kubernetes `Status` errors: what kubesim answers instead of an object when a request fails.

`KubeError` carries the HTTP code, the machine `reason` (`NotFound`, `Forbidden`, `Expired`, ...)
and a message worded like kube-apiserver's, so clients' error handling sees what it expects.
"""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """A failed request, rendered as a `Status` object with `code`."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = details or {}
        self.headers: dict[str, str] = {}

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            out["details"] = self.details
        return out

    def body(self) -> bytes:
        return json.dumps(self.status(), separators=(",", ":")).encode()

    @staticmethod
    def _details(res: Any, name: str) -> dict[str, Any]:
        return {"name": name, "group": res.group, "kind": res.plural}

    @classmethod
    def not_found(cls, res: Any, name: str) -> KubeError:
        return cls(404, "NotFound", f'{res.resource} "{name}" not found', cls._details(res, name))

    @classmethod
    def already_exists(cls, res: Any, name: str) -> KubeError:
        msg = f'{res.resource} "{name}" already exists'
        return cls(409, "AlreadyExists", msg, cls._details(res, name))

    @classmethod
    def conflict(cls, res: Any, name: str) -> KubeError:
        msg = (
            f'Operation cannot be fulfilled on {res.resource} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again"
        )
        return cls(409, "Conflict", msg, cls._details(res, name))

    @classmethod
    def invalid(cls, res: Any, name: str, why: str) -> KubeError:
        msg = f'{res.kind} "{name}" is invalid: {why}'
        return cls(422, "Invalid", msg, cls._details(res, name))

    @classmethod
    def bad_request(cls, message: str) -> KubeError:
        return cls(400, "BadRequest", message)

    @classmethod
    def expired(cls, message: str) -> KubeError:
        return cls(410, "Expired", message)

    @classmethod
    def unauthorized(cls) -> KubeError:
        return cls(401, "Unauthorized", "Unauthorized")

    @classmethod
    def forbidden(cls, message: str) -> KubeError:
        return cls(403, "Forbidden", message)

    @classmethod
    def path_not_found(cls, path: str) -> KubeError:
        return cls(404, "NotFound", f"the server could not find the requested resource ({path})")

    @classmethod
    def method_not_allowed(cls, method: str) -> KubeError:
        return cls(405, "MethodNotAllowed", f"the server does not allow this method ({method})")
