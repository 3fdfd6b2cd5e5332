"""The kubernetes loader's temp files for a kubeconfig's certificate data: it remembers a file
by content before writing it, so a second thread loading the same data could read an empty
file (a watcher's TLS context failed with NO_CERTIFICATE_OR_CRL_FOUND in CI). common.leaf.client
makes them one at a time."""

from __future__ import annotations

import os
import tempfile
import threading
import uuid
from typing import Any

import pytest
from kubernetes.config import kube_config

from common.leaf import client  # noqa: F401  (what is tested: importing it serializes the files)


def test_a_second_loader_of_the_same_data_never_reads_a_file_not_written_yet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    content = f"-----BEGIN CERTIFICATE-----\n{uuid.uuid4().hex}\n-----END CERTIFICATE-----\n"
    created, read = threading.Event(), threading.Event()
    mkstemp = tempfile.mkstemp

    def slow_disk(*args: Any, **kwargs: Any) -> tuple[int, str]:
        # the first file is made, then the disk stalls until the second loader has read (or
        # 2 s, when the second loader waits for this one, as it must)
        got = mkstemp(*args, **kwargs)
        created.set()
        read.wait(2)
        return got

    monkeypatch.setattr(kube_config.tempfile, "mkstemp", slow_disk)
    names: list[str] = []
    first = threading.Thread(
        target=lambda: names.append(kube_config._create_temp_file_with_content(content))
    )
    first.start()
    try:
        assert created.wait(10)
        second = kube_config._create_temp_file_with_content(content)
        with open(second) as f:
            seen = f.read()
        read.set()
    finally:
        read.set()
        first.join(10)
    assert names == [second]
    assert seen == content
    os.unlink(second)
    kube_config._temp_files.pop(content, None)


def test_the_serialization_is_installed_once() -> None:
    from common.leaf.client import _temp_files_one_at_a_time

    installed = kube_config._create_temp_file_with_content
    _temp_files_one_at_a_time()
    assert kube_config._create_temp_file_with_content is installed
    assert getattr(installed, "one_at_a_time", False) is True
