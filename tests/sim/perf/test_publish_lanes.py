import asyncio
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tidings.config import load_settings
from tidings.server import EmbeddedServer
from tidings.sim.perf.targets.publish_lanes import HttpError, PublishLanes


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("http1")})
    with EmbeddedServer(settings) as server:
        yield server.url


async def publish_many(url: str, count: int, lanes: int) -> list[dict[str, object]]:
    pool = PublishLanes(url, lanes)
    body = orjson.dumps({"data": "hello", "topics": ["t"]})
    try:
        answers = await asyncio.gather(*(pool.post("/v1/publications", body) for _ in range(count)))
    finally:
        pool.close()
    return [orjson.loads(a) for a in answers]


def test_concurrent_posts_share_a_few_kept_alive_connections_and_get_their_own_answers(
    url: str,
) -> None:
    answers = asyncio.run(publish_many(url, 50, lanes=4))
    assert len({a["id"] for a in answers}) == 50


def test_a_refused_request_raises_with_the_status_and_the_lane_recovers(url: str) -> None:
    async def refused_then_accepted() -> tuple[int, bytes]:
        pool = PublishLanes(url, 1)
        try:
            with pytest.raises(HttpError) as caught:
                await pool.post("/v1/publications", b'{"topics": "not a list"}')
            return caught.value.status, await pool.post("/v1/publications", b'{"data": 1}')
        finally:
            pool.close()

    status, accepted = asyncio.run(refused_then_accepted())
    assert 400 <= status < 500
    assert "id" in orjson.loads(accepted)


def test_a_broker_that_is_not_there_is_a_connection_error(tmp_path: Path) -> None:
    from tidings.ports import free_port

    async def post() -> None:
        pool = PublishLanes(f"http://127.0.0.1:{free_port()}", 1)
        await pool.post("/v1/publications", b"{}")

    with pytest.raises(OSError):
        asyncio.run(post())
