"""Identity against a query service in `oidc` mode: a token from FLEETSCOPE_TOKEN, a token file,
or an exec credential plugin (ExecCredential JSON or a bare token, as kubectl's plugins print),
chosen through config file contexts; bad or missing tokens are exit 4; no token ever shows,
not even in `-v 8` traces or error messages."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.cli import Stack
from tests.support.http import make_app, serve
from tests.support.oidc import Issuer


@pytest.fixture(scope="module")
def oidc(stack: Stack) -> Iterator[tuple[str, Issuer]]:
    issuer = Issuer()
    issuer.add_key("rsa1", "RS256")
    settings = stack.settings.replace(
        auth_mode="oidc", oidc_issuer_url=issuer.url, oidc_client_id="fleetscope"
    )
    with serve(make_app(settings)) as host:
        yield f"http://{host}", issuer
    issuer.server.shutdown()
    issuer.server.server_close()


def admin_token(issuer: Issuer) -> str:
    return issuer.token(sub="admin-0", groups=["fleet-admins"])


def names(out: str) -> list[str]:
    return out.splitlines()


def write_config(home: Path, contexts: list[dict], current: str = "") -> Path:
    path = home / ".config" / "fleetscope" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"current-context": current, "contexts": contexts}))
    return path


def plugin(directory: Path, name: str, stdout: str, code: int = 0) -> Path:
    """An executable that records KUBERNETES_EXEC_INFO and its arguments, then prints `stdout`."""
    script = directory / name
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$KUBERNETES_EXEC_INFO" "$*" "$PLUGIN_ENV" > "{directory}/{name}.seen"\n'
        f"cat <<'EOF'\n{stdout}\nEOF\n"
        f"exit {code}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_env_token_reaches_the_server(stack: Stack, oidc, cli) -> None:
    url, issuer = oidc
    want = [
        f"{r['cluster']}/{r['namespace'] or '_'}/{r['kind']}/{r['name']}"
        for r in stack.api_rows(stack.users["admin-0"])
    ]
    token = admin_token(issuer)
    res = cli(
        "get", "-o", "name", "-v", "8", env={"FLEETSCOPE_SERVER": url, "FLEETSCOPE_TOKEN": token}
    )
    assert res.code == 0, res.err
    assert names(res.out) == want
    assert "Authorization: Bearer <masked>" in res.err and token not in res.err


def test_exec_plugin_printing_an_exec_credential(stack: Stack, oidc, cli, home: Path) -> None:
    url, issuer = oidc
    token = admin_token(issuer)
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token, "expirationTimestamp": "2099-01-01T00:00:00Z"},
    }
    bin_dir = home / ".config" / "fleetscope" / "bin"
    bin_dir.mkdir(parents=True)
    plugin(bin_dir, "get-token", json.dumps(credential))
    write_config(
        home,
        [
            {
                "name": "prod",
                "server": url,
                "exec": {
                    "command": "./bin/get-token",
                    "args": ["--issuer", issuer.url],
                    "env": [{"name": "PLUGIN_ENV", "value": "from-config"}],
                },
            }
        ],
        current="prod",
    )
    res = cli("get", "-o", "name", "-v", "8")
    assert res.code == 0, res.err
    assert len(names(res.out)) == len(stack.api_rows(stack.users["admin-0"]))
    info, args, env = (bin_dir / "get-token.seen").read_text().splitlines()
    assert json.loads(info)["kind"] == "ExecCredential"
    assert args == f"--issuer {issuer.url}" and env == "from-config"
    assert token not in res.err + res.out


def test_exec_plugin_printing_a_bare_token_and_contexts(
    oidc, cli, home: Path, tmp_path: Path
) -> None:
    url, issuer = oidc
    plugin(tmp_path, "bare", issuer.token(sub="solo", groups=[]))
    plugin(tmp_path, "broken", "", code=7)
    write_config(
        home,
        [
            {"name": "solo", "server": url, "exec": {"command": str(tmp_path / "bare")}},
            {"name": "broken", "server": url, "exec": {"command": str(tmp_path / "broken")}},
            {
                "name": "missing",
                "server": url,
                "exec": {"command": "no-such-helper", "installHint": "install no-such-helper"},
            },
        ],
        current="broken",
    )
    solo = cli("access", "--context", "solo")
    assert solo.code == 0 and "User:    solo" in solo.out, solo.err
    broken = cli("get")
    assert broken.code == 4
    assert (
        broken.err
        == f"error: unauthenticated: credential command '{tmp_path}/broken' failed with exit status 7\n"
    )
    missing = cli("get", "--context", "missing")
    assert missing.code == 4 and "(install no-such-helper)" in missing.err
    unknown = cli("get", "--context", "nope")
    assert unknown.code == 2
    assert unknown.err.startswith("error: bad input: no context 'nope' in ")


def test_token_file_and_precedence(stack: Stack, oidc, cli, home: Path, tmp_path: Path) -> None:
    url, issuer = oidc
    (tmp_path / "token").write_text(admin_token(issuer) + "\n")
    write_config(
        home,
        [
            {
                "name": "file",
                "server": "http://127.0.0.1:9/unused",
                "token-file": str(tmp_path / "token"),
            },
            {"name": "stale", "server": url, "token": "not-a-jwt"},
        ],
        current="file",
    )
    # the context's server is dead: --server (flag) wins, the context's token file still counts
    flag = cli("get", "-o", "name", "--server", url)
    assert flag.code == 0, flag.err
    assert len(names(flag.out)) == len(stack.api_rows(stack.users["admin-0"]))
    env = cli("get", "-o", "name", env={"FLEETSCOPE_SERVER": url})
    assert env.code == 0, env.err
    rejected = cli("get", "--context", "stale")
    assert rejected.code == 4 and rejected.err.startswith("error: unauthenticated: ")
    assert "not-a-jwt" not in rejected.err
    fixed = cli(
        "get", "-o", "name", "--context", "stale", env={"FLEETSCOPE_TOKEN": admin_token(issuer)}
    )
    assert fixed.code == 0, "FLEETSCOPE_TOKEN wins over the context's token"
    none = cli("get", "--server", url, "--config", str(tmp_path / "absent.yaml"))
    assert none.code == 2 and "does not exist" in none.err
    not_config = cli("get", "--server", url, env={"FLEETSCOPE_CONFIG": str(tmp_path / "token")})
    assert not_config.code == 2 and "must be a mapping" in not_config.err
