"""Kind registry: built-ins, extra kinds from a YAML file, and clear errors for bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.errors import ConfigError
from common.kinds.registry import builtin_registry, load_registry


def test_builtin_flux_and_istio_kinds() -> None:
    reg = builtin_registry()
    flux = [k for k in reg if k.group.endswith("toolkit.fluxcd.io")]
    istio = [k for k in reg if k.group.endswith("istio.io")]
    assert (len(flux), len(istio)) == (13, 10)
    policy = reg.get("ImagePolicy")
    assert policy is not None and policy.plural == "imagepolicies"
    assert reg.by_resource("networking.istio.io", "serviceentries") is reg.get("ServiceEntry")


def test_extra_kinds_from_file(tmp_path: Path) -> None:
    f = tmp_path / "kinds.yaml"
    f.write_text(
        "- {group: gateway.networking.k8s.io, versions: [v1], kind: HTTPRoute,"
        "   plural: httproutes, status_rule: conditions}\n"
        "- {group: gateway.networking.k8s.io, versions: v1, kind: Gateway, plural: gateways,"
        "   key: K8sGateway, ui_url_template: 'https://ui/{cluster}/{name}'}\n"
    )
    reg = load_registry(str(f))
    assert len(reg) == 25
    gw = reg.get("K8sGateway")
    assert gw is not None and gw.kind == "Gateway" and gw.versions == ("v1",)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{a: 1}", "must hold a YAML list"),
        ("- {group: x.io, kind: A}", "missing field"),
        ("- {group: x.io, versions: [v1], kind: Gateway, plural: gateways}", "used twice"),
        ("- {group: x.io, versions: [v1], kind: A, plural: as, status_rule: magic}", "status_rule"),
        ("- {group: x.io, versions: [v1], kind: A, plural: As}", "plural"),
        ("- {group: x.io, versions: [v1], kind: A, plural: as, colour: red}", "unknown field"),
        ("- [", "cannot be read"),
    ],
)
def test_bad_kinds_file_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "kinds.yaml"
    f.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_registry(str(f))
