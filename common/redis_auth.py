"""The bundled Redis's password on Kubernetes (k8s/base/redis.yaml), run as the Redis pod's
init container:

    python -m common.redis_auth --secret fleetscope-redis --host fleetscope-redis:6379 \\
        --config /etc/redis-auth/redis.conf

It reads the Secret in the pod's namespace, creating it with a random password the first time
(keys `password` and `url`, the URL the other pods read through FLEETSCOPE_REDIS_URL_FILE), and
writes Redis' config (`requirepass`) for the Redis container. Concurrent first starts agree:
the loser of the create reads the winner's Secret. Nothing is printed but the Secret's name.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
from pathlib import Path
from typing import Any

from common.errors import ConfigError
from common.settings import Settings

NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def new_secret(name: str, host: str) -> dict[str, Any]:
    """A Secret holding a fresh random password and the Redis URL that carries it."""
    password = secrets.token_hex(32)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "fleetscope"}},
        "type": "Opaque",
        "data": {
            "password": _b64(password),
            "url": _b64(f"redis://:{password}@{host}/0"),
        },
    }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def ensure(api: Any, namespace: str, name: str, host: str) -> str:
    """The password in Secret `name`, created first when missing (`api`: a CoreV1Api)."""
    from kubernetes.client.exceptions import ApiException

    for _ in range(2):
        try:
            found = api.read_namespaced_secret(name, namespace)
            return base64.b64decode(found.data["password"]).decode()
        except ApiException as e:
            if e.status != 404:
                raise ConfigError(f"cannot read Secret {namespace}/{name}: {e.status}") from None
        try:
            api.create_namespaced_secret(namespace, new_secret(name, host))
        except ApiException as e:
            if e.status != 409:  # 409: another pod created it first; read that one
                raise ConfigError(f"cannot create Secret {namespace}/{name}: {e.status}") from None
    raise ConfigError(f"Secret {namespace}/{name} could not be read after creating it")


def write_config(path: Path, password: str) -> None:
    """Redis' config file with the password, readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"requirepass {password}\n")


def core_api(settings: Settings) -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    if settings.management_kubeconfig:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            settings.management_kubeconfig, client_configuration=configuration
        )
    else:
        config.load_incluster_config(configuration)  # type: ignore[no-untyped-call]
    return client.CoreV1Api(client.ApiClient(configuration))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m common.redis_auth", description=__doc__)
    parser.add_argument("--secret", required=True, help="the Secret's name")
    parser.add_argument("--host", required=True, help="HOST:PORT of Redis for the URL")
    parser.add_argument("--config", required=True, type=Path, help="Redis config to write")
    parser.add_argument("--namespace", help="default: the pod's own namespace")
    args = parser.parse_args(argv)
    namespace = args.namespace or Path(NAMESPACE_FILE).read_text().strip()
    api = core_api(Settings.from_env())
    write_config(args.config, ensure(api, namespace, args.secret, args.host))
    print(f"Redis password: Secret {namespace}/{args.secret}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
