"""`describe` reaches the leaf through the detail proxy as the caller (kubesim's request log
shows the impersonated GET) and prints the live object; `status` and `access` show the API's
answers for each kind of user."""

from __future__ import annotations

import yaml

from tests.support.cli import LISTER, Stack


def who(stack: Stack, name: str) -> list[str]:
    return ["--server", stack.base, *stack.users[name].flags()]


def test_describe_reads_the_live_object_as_the_caller(stack: Stack, cli) -> None:
    row = next(
        r for r in stack.api_rows(stack.users["dev-team-00"]) if r["kind"] == "Kustomization"
    )
    cluster, ns, name = row["cluster"], row["namespace"], row["name"]
    stack.sim.clear_request_log(cluster)
    res = cli("describe", f"{cluster}/{ns}/ks/{name}", *who(stack, "dev-team-00"))
    assert res.code == 0, res.err
    obj = yaml.safe_load(res.out)
    live = stack.sim.get(cluster, "Kustomization", ns, name)
    assert live is not None
    live["metadata"].pop("managedFields", None)
    assert obj == live
    gets = [
        r
        for r in stack.sim.request_log(cluster)
        if r.verb == "get" and r.path.endswith(f"/namespaces/{ns}/kustomizations/{name}")
    ]
    assert [(g.impersonate_user, g.status) for g in gets] == [("dev-team-00", 200)]
    assert "team-00" in gets[0].impersonate_groups


def test_describe_json(stack: Stack, cli) -> None:
    row = stack.api_rows(stack.users["admin-0"], kind="VirtualService")[0]
    ref = f"{row['cluster']}/{row['namespace']}/VirtualServices/{row['name']}"
    res = cli("describe", ref, "-o", "json", *who(stack, "admin-0"))
    assert res.code == 0, res.err
    assert res.json()["metadata"]["name"] == row["name"]
    assert res.json()["kind"] == "VirtualService"


def test_describe_refusals_are_exit_5(stack: Stack, cli) -> None:
    row = stack.api_rows(stack.users[LISTER])[0]
    ref = f"{row['cluster']}/{row['namespace']}/Kustomization/{row['name']}"
    forbidden = cli("describe", ref, *who(stack, LISTER))  # may list, may not get
    assert forbidden.code == 5, forbidden.err
    assert forbidden.err.startswith("error: forbidden: ") and forbidden.err.count("\n") == 1
    missing = cli("describe", ref + "-gone", *who(stack, "admin-0"))
    assert missing.code == 5 and missing.err.startswith("error: not found: ")
    invisible = cli("describe", ref, *who(stack, "nobody"))
    assert invisible.code == 5
    assert invisible.err == f"error: not found: no cluster named {row['cluster']!r} is registered\n"


def test_status_shows_every_cluster(stack: Stack, cli) -> None:
    res = cli("status", *who(stack, "admin-0"))
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].split() == ["State:", "ready"]
    table = lines[lines.index("") + 1 :]
    assert table[0].split() == ["CLUSTER", "STATE", "OBJECTS", "LAST-SYNC", "RBAC", "LAST-ERROR"]
    assert [line.split()[:2] for line in table[1:]] == [[c, "ok"] for c in stack.sim.clusters]
    as_yaml = yaml.safe_load(cli("status", "-o", "yaml", *who(stack, "admin-0")).out)
    assert [c["cluster"] for c in as_yaml["clusters"]] == stack.sim.clusters


def test_access_says_what_and_why(stack: Stack, cli) -> None:
    team = cli("access", *who(stack, "dev-team-00"))
    assert team.code == 0, team.err
    assert "User:    dev-team-00" in team.out and "Groups:  team-00" in team.out
    header, *lines = team.out.splitlines()[3:]
    assert header.split() == ["CLUSTER", "NAMESPACE", "KINDS", "BINDING", "SUBJECT"]
    seen = {(r["cluster"], r["namespace"]) for r in stack.api_rows(stack.users["dev-team-00"])}
    assert seen <= {tuple(line.split()[:2]) for line in lines}
    for line in lines:  # BINDING and SUBJECT hold spaces: "RoleBinding ns/x -> ClusterRole view"
        assert line.split()[2] == "<all>" and line.endswith("   Group team-00"), line
    admin = cli("access", *who(stack, "admin-0"))
    assert [line.split()[:3] for line in admin.out.splitlines()[4:]] == [
        [c, "<all>", "<all>"] for c in stack.sim.clusters
    ]
    nobody = cli("access", *who(stack, "nobody"))
    assert nobody.code == 0 and "No access" in nobody.out
