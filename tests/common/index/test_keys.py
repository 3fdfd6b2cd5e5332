"""Redis key layout: exact strings (other processes and versions rely on them) and hash tags."""

from __future__ import annotations

import pytest

from common.errors import InvalidInput
from common.index import keys


def test_exact_key_strings() -> None:
    assert keys.rows("east-1") == "fs:{c:east-1}:rows"
    assert keys.by_status("east-1", "unhealthy") == "fs:{c:east-1}:st:unhealthy"
    assert keys.counts("east-1") == "fs:{c:east-1}:counts"
    assert keys.names("east-1") == "fs:{c:east-1}:names"
    assert keys.generation("east-1") == "fs:{c:east-1}:gen"
    assert keys.status_generation("east-1") == "fs:{c:east-1}:sgen"
    assert keys.sync("east-1") == "fs:{c:east-1}:sync"
    assert keys.rbac("east-1") == "fs:{c:east-1}:rbac"
    assert keys.lock("east-1") == "fs:{c:east-1}:lock:objects"
    assert keys.lock("east-1", "rbac") == "fs:{c:east-1}:lock:rbac"
    assert keys.lease("east-1") == "fs:{c:east-1}:lease"
    assert keys.CLUSTERS == "fs:clusters"
    assert keys.REGISTRY_PROBLEMS == "fs:registry-problems"
    assert keys.VERSION == "fs:version"
    assert keys.subject("g", "team-a") == "g:team-a"
    assert keys.history("east-1", "ns\x00Kustomization\x00app\x00") == (
        "fs:{c:east-1}:h:ns\x00Kustomization\x00app\x00"
    )
    assert keys.history_pattern("east-1") == "fs:{c:east-1}:h:*"
    assert keys.history_kinds("east-1") == "fs:{c:east-1}:hk"
    assert keys.flapping("east-1") == "fs:{c:east-1}:st:flapping"
    assert keys.counts_field("Kustomization", "healthy") == "Kustomization\x00healthy"


def test_all_cluster_keys_share_one_hash_tag() -> None:
    tags = {k.split("{", 1)[1].split("}", 1)[0] for k in keys.cluster_keys("prod-eu")}
    assert tags == {"c:prod-eu"}


@pytest.mark.parametrize("bad", ["", "UPPER", "a}b", "a{b", "-lead", "x" * 64, "a/b", "a b"])
def test_cluster_names_that_could_break_keys_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInput):
        keys.rows(bad)


def test_healthy_has_no_status_index() -> None:
    with pytest.raises(ValueError):
        keys.by_status("c1", "healthy")
