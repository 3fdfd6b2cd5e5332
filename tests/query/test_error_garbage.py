"""An error answer lets go of the frames its exception went through (query.errors.forget).

A raised exception sits in a reference cycle with the frames it passed (a frame that caught it
keeps it in a local; its traceback keeps that frame), so each 4xx or 503 left its request's
frames, and whatever their locals held, to the next full collection: thousands of them in a
Redis failover, a step in a query worker's RSS. Counted here with the collector off while the
requests run, so the cycles they leave are still there to find."""

from __future__ import annotations

import gc
import types
from collections.abc import Iterator

import pytest

from common.settings import Settings
from tests.support.http import make_app


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    """The collector paused; what the next collection finds unreachable is kept for counting."""
    gc.collect()
    was_enabled, flags = gc.isenabled(), gc.get_debug()
    gc.disable()
    gc.set_debug(flags | gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
        gc.collect()


def frames_left(garbage: list[object]) -> int:
    gc.collect()
    return sum(type(o) in (types.FrameType, types.TracebackType) for o in garbage)


def test_a_503_leaves_no_frames_behind(saved_garbage) -> None:
    client = make_app(Settings(redis_url="redis://127.0.0.1:1/0", auth_mode="anonymous"))
    client = client.test_client()
    codes = {client.get("/api/v1/objects").status_code for _ in range(20)}
    assert codes == {503}
    assert frames_left(saved_garbage) == 0


def test_a_4xx_leaves_no_frames_behind(client, saved_garbage) -> None:
    admin = {"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
    got = [
        client.get(path, headers=admin).status_code
        for path in ("/api/v1/nosuch", "/api/v1/objects?limit=nope", "/api/v1/objects/x/y/z/w")
        for _ in range(10)
    ]
    assert set(got) <= {400, 404} and 400 in got and 404 in got
    assert frames_left(saved_garbage) == 0
