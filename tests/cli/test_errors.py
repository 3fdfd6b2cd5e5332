"""Each error class gives its exit code and one line on stderr (docs/cli.md): 2 bad input
(flags, kinds, the API's 400s), 3 unreachable (refused, TLS), 4 unauthenticated, 5 forbidden or
not found, 1 the server failing. TLS is checked against the CA given, or skipped on request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from common.redis_server import free_port
from kubesim.tls import make_serving_cert
from tests.support.cli import Stack
from tests.support.fakeapi import FakeApi
from tests.support.http import make_app, serve

ADMIN = ["--as", "admin-0", "--as-group", "fleet-admins"]


def one_line(err: str, prefix: str) -> None:
    assert err.startswith(prefix) and err.endswith("\n") and err.count("\n") == 1, err


def test_bad_input_is_exit_2(stack: Stack, cli) -> None:
    s = ["--server", stack.base, *ADMIN]
    cases = {
        (
            "get",
            "nosuchkind",
            *s,
        ): "error: bad input: unknown kind 'nosuchkind'; this server knows ",
        ("get", "--no-such-flag", *s): "error: bad input: unrecognized arguments: --no-such-flag",
        ("get", "--chunk-size", "501", *s): "error: bad input: argument --chunk-size: ",
        ("get", "-o", "xml", *s): "error: bad input: argument -o/--output: invalid choice",
        ("get", "--name", "a_b", *s): "error: bad input: name: a substring of object names",
        ("get", "-A", "-n", "x", *s): "error: bad input: argument -n/--namespace: not allowed",
        (
            "describe",
            "c/ns/ks",
            *s,
        ): "error: bad input: 'c/ns/ks' is not CLUSTER/NAMESPACE/KIND/NAME",
        (
            "get",
            "--as-group",
            "g",
            "--server",
            stack.base,
        ): "error: bad input: --as-group needs --as",
        ("get",): "error: bad input: no server: pass --server URL, set FLEETSCOPE_SERVER",
        ("get", "--server", "ftp://x"): "error: bad input: server 'ftp://x' must be an http",
    }
    for args, prefix in cases.items():
        res = cli(*args)
        assert res.code == 2, (args, res.err)
        one_line(res.err, prefix)


def test_unreachable_is_exit_3(cli) -> None:
    server = f"http://127.0.0.1:{free_port()}"
    res = cli("get", "--server", server)
    assert res.code == 3
    assert res.err == f"error: unreachable: cannot reach {server}: connection refused\n"


def test_unauthenticated_is_exit_4(stack: Stack, cli) -> None:
    res = cli("get", "--server", stack.base)  # header mode, and no --as: no identity at all
    assert res.code == 4
    assert res.err == "error: unauthenticated: the trusted proxy sent no X-Remote-User header\n"


def test_not_found_is_exit_5(stack: Stack, cli) -> None:
    res = cli("describe", "nowhere/ns/ks/x", "--server", stack.base, *ADMIN)
    assert res.code == 5
    assert res.err == "error: not found: no cluster named 'nowhere' is registered\n"


@pytest.fixture
def failing() -> Iterator[FakeApi]:
    api = FakeApi(
        {
            "/api/v1/objects": (
                503,
                {"error": "unavailable", "message": "the index (Redis) is not answering; retry"},
            ),
            "/api/v1/status": (502, b"<html><body><h1>502 Bad Gateway</h1>\n</body></html>"),
            "/api/v1/access": (200, b"<html>login page</html>"),
        }
    )
    yield api
    api.close()


def test_server_errors_are_exit_1(failing: FakeApi, cli) -> None:
    s = ["--server", failing.url]
    down = cli("get", *s)
    assert (down.code, down.err) == (
        1,
        "error: server error: the index (Redis) is not answering; retry (HTTP 503)\n",
    )
    proxy = cli("status", *s)
    assert (proxy.code, proxy.err) == (
        1,
        "error: server error: the server answered 502 Bad Gateway (HTTP 502)\n",
    )
    html = cli("access", *s)
    assert html.code == 1
    one_line(html.err, f"error: server error: the answer from {failing.url}/api/v1/access is not")


@pytest.fixture(scope="module")
def tls_server(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    cert = make_serving_cert(["127.0.0.1"])
    ca = tmp_path_factory.mktemp("tls") / "ca.pem"
    ca.write_bytes(cert.ca_pem)
    with serve(make_app(stack.settings), cert.server_context()) as host:
        yield f"https://{host}", ca


def test_tls_is_verified_against_the_given_ca(tls_server: tuple[str, Path], cli) -> None:
    url, ca = tls_server
    untrusted = cli("get", "--server", url, *ADMIN)
    assert untrusted.code == 3
    assert untrusted.err == (
        f"error: unreachable: cannot reach {url}: TLS failed: certificate verify failed "
        "(set certificate-authority to the server's CA)\n"
    )
    trusted = cli(
        "get", "--limit", "2", "--server", url, "--certificate-authority", str(ca), *ADMIN
    )
    assert trusted.code == 0 and len(trusted.out.splitlines()) == 3, trusted.err
    skipped = cli("get", "--limit", "1", "--server", url, "--insecure-skip-tls-verify", *ADMIN)
    assert skipped.code == 0, skipped.err
    plain = cli("get", "--server", url.replace("https", "http"), *ADMIN, "--request-timeout", "5s")
    assert plain.code in (1, 3), plain.err  # an HTTP request to a TLS port: refused or garbage
    assert plain.err.count("\n") == 1
