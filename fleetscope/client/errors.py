"""What can go wrong for the client, each with its exit code (docs/cli.md has the table).

    ClientError(exit 1)         anything else: the server failed (5xx) or answered nonsense
    +-- BadInput(2)             a bad flag, kind or value; a feature this server does not offer
    +-- Unreachable(3)          connection refused, DNS, TLS, timeout
    +-- Unauthenticated(4)      401, or no credential could be obtained
    +-- Refused(5)              403 or 404: forbidden or not found (the API does not tell apart
                                a cluster you cannot see from one that does not exist)

Messages are one line and never contain a credential.
"""

from __future__ import annotations

from fleetscope.client.terminal import escape


class ClientError(Exception):
    exit_code = 1
    label = "server error"
    status: int | None = None
    """The HTTP status of the server's answer, when this is one."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))  # one line, whatever the server sent

    @property
    def message(self) -> str:
        return str(self.args[0])

    def line(self) -> str:
        """What the user sees on stderr (a leaf's words may be in it: escaped)."""
        return escape(f"error: {self.label}: {self.message}")


class BadInput(ClientError):
    exit_code = 2
    label = "bad input"


class Unreachable(ClientError):
    exit_code = 3
    label = "unreachable"


class Unauthenticated(ClientError):
    exit_code = 4
    label = "unauthenticated"


class Refused(ClientError):
    exit_code = 5

    def __init__(self, message: str, label: str = "not found") -> None:
        super().__init__(message)
        self.label = label
