"""HTTP to the fleetscope API: one session, the caller's identity, and every failure mapped to a
ClientError (one boundary for requests' exceptions and the API's error answers).

`-v 6` (like kubectl) logs each request's method, URL, status and time to stderr; `-v 8` adds
the request headers, with the token masked. Nothing ever prints a token.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import requests
import urllib3
from requests.adapters import HTTPAdapter

from fleetscope.client.config import Target
from fleetscope.client.errors import (
    BadInput,
    ClientError,
    Refused,
    Unauthenticated,
    Unreachable,
)
from fleetscope.client.features import Features

USER_HEADER, GROUP_HEADER = "X-Remote-User", "X-Remote-Group"
Params = Sequence[tuple[str, str]]


class Api:
    def __init__(
        self, target: Target, timeout_s: float = 30.0, verbosity: int = 0, log: TextIO | None = None
    ) -> None:
        self.target = target
        self.timeout_s = timeout_s or None
        self.verbosity = verbosity
        self.log = log or sys.stderr
        self.session = requests.Session()
        if target.as_groups:
            adapter = RepeatedGroups(tuple(target.as_groups))
            self.session.mount("http://", adapter)
            self.session.mount("https://", adapter)
        self._headers: dict[str, str] | None = None
        self._features: Features | None = None

    def get(self, path: str, params: Params = ()) -> dict[str, Any]:
        """GET `path` (under the server URL) as the caller: the JSON object it answers."""
        return answer(self._send(path, params, self._identity()))

    def stream(self, path: str, params: Params, accept: str) -> requests.Response:
        """GET `path` as the caller asking for `accept`, the body left to read as it arrives
        (a CSV export); an error answer raises as `get` does."""
        resp = self._send(path, params, {**self._identity(), "Accept": accept}, stream=True)
        if not 200 <= resp.status_code < 300:
            answer(resp)  # raises the error the answer means
        if not resp.headers.get("Content-Type", "").startswith(accept):
            resp.close()
            raise ClientError(
                f"the server answered {resp.headers.get('Content-Type')!r}, not {accept}"
            )
        return resp

    def _send(
        self, path: str, params: Params, headers: dict[str, str], stream: bool = False
    ) -> requests.Response:
        """One GET of `path` (under the server URL), traced; failures to connect raised as the
        one-line ClientError they mean."""
        url = self.target.server + path
        started = time.monotonic()
        try:
            # `verify` per request: requests lets REQUESTS_CA_BUNDLE override a session's.
            resp = self.session.get(
                url,
                params=list(params),
                headers=headers,
                timeout=self._timeout(),
                verify=self.target.verify,
                stream=stream,
            )
        except requests.exceptions.RequestException as e:
            raise unreachable(self.target.server, e, self.timeout_s) from e
        self._trace(resp, headers, started)
        return resp

    def features(self) -> Features:
        """What this server offers, from its OpenAPI document (fetched once, when needed)."""
        if self._features is None:
            try:
                doc = self.get("/api/v1/openapi.json")
            except Refused:
                doc = {}  # an older server or a proxy that hides it: assume the basics only
            self._features = Features.from_openapi(doc)
        return self._features

    def close(self) -> None:
        self.session.close()

    def _identity(self) -> dict[str, str]:
        if self._headers is None:
            headers = {"Accept": "application/json", "User-Agent": "fleetscope-cli"}
            token = self.target.credential.token()
            if token:
                headers["Authorization"] = f"Bearer {token}"
            if self.target.as_user:
                headers[USER_HEADER] = self.target.as_user
            self._headers = headers
        return self._headers

    def _timeout(self) -> tuple[float, float] | None:
        if self.timeout_s is None:
            return None
        return min(10.0, self.timeout_s), self.timeout_s

    def _trace(self, resp: requests.Response, headers: dict[str, str], started: float) -> None:
        if self.verbosity < 6:
            return
        ms = (time.monotonic() - started) * 1000
        print(
            f"GET {resp.url} {resp.status_code} {resp.reason} in {ms:.0f} milliseconds",
            file=self.log,
        )
        if self.verbosity >= 8:
            for name, value in headers.items():
                shown = "Bearer <masked>" if name == "Authorization" else value
                print(f"    {name}: {shown}", file=self.log)
            for group in self.target.as_groups:  # each its own field (RepeatedGroups)
                print(f"    {GROUP_HEADER}: {group}", file=self.log)


class RepeatedGroups(HTTPAdapter):
    """Sends each `--as-group` as its own X-Remote-Group field, as kube-apiserver's request-header
    authenticator (and fleetscope's header mode) reads groups: one per field, commas included.
    requests keeps one value per header name, so the fields are added here, just before
    sending, to the urllib3 header dict that sends every value of a name as its own line."""

    def __init__(self, groups: tuple[str, ...]) -> None:
        super().__init__()
        self.groups = groups

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        headers = urllib3.HTTPHeaderDict(dict(request.headers))
        headers.discard(GROUP_HEADER)
        for group in self.groups:
            headers.add(GROUP_HEADER, group)
        request.headers = headers  # type: ignore[assignment]
        return super().send(request, *args, **kwargs)


def answer(resp: requests.Response) -> dict[str, Any]:
    """The JSON object of a 2xx answer; any other answer as the ClientError it means."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if 200 <= resp.status_code < 300:
        if not isinstance(body, dict):
            raise ClientError(
                f"the answer from {resp.url} is not a JSON object; is it the fleetscope API?"
            )
        return body
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        message = f"the server answered {resp.status_code} {resp.reason or ''}".strip()
    code = resp.status_code
    if code == 400:
        raise BadInput(message)
    if code == 401:
        raise Unauthenticated(message)
    if code in (403, 404):
        raise Refused(message, "forbidden" if code == 403 else "not found")
    err = ClientError(f"{message} (HTTP {code})")
    err.status = code
    raise err


def unreachable(
    server: str, e: requests.exceptions.RequestException, timeout_s: float | None
) -> ClientError:
    """requests' exception, as one line saying why `server` could not be reached."""
    text = str(e)
    if isinstance(e, requests.exceptions.InvalidURL | requests.exceptions.MissingSchema):
        return BadInput(f"invalid server URL {server!r}")
    if isinstance(e, requests.exceptions.Timeout):
        why = f"no answer within {timeout_s:g} s" if timeout_s else "timed out"
    elif isinstance(e, requests.exceptions.SSLError):
        why = "TLS failed: " + (
            "certificate verify failed (set certificate-authority to the server's CA)"
            if "CERTIFICATE_VERIFY_FAILED" in text
            else "handshake failed (is the server speaking TLS?)"
        )
    elif "Connection refused" in text:
        why = "connection refused"
    elif any(
        s in text
        for s in (
            "Name or service not known",
            "nodename nor servname",
            "Temporary failure in name resolution",
            "No address",
        )
    ):
        why = "host name not found (DNS)"
    else:
        why = "connection failed"
    return Unreachable(f"cannot reach {server}: {why}")
