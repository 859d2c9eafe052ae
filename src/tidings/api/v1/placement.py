"""The placement under /v1/admin: the last state the MultiPub controller published on
`placement/state` that this broker routed (`tidings.broker.placement_state`), with region
names; 404 `placement_unknown` until one has come."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api.answers import answer
from tidings.api.operations import Operation, described
from tidings.api.v1.admin import admin
from tidings.errors import ErrorCode, TidingsError
from tidings.wire.placement import PlacementSeen


@described(Operation(answer=PlacementSeen, token=True))
async def placement(request: Request) -> Response:
    """The placement controller's last state, with region names (docs/placement.md).

    Every topic it places: its regions by name, the mode, its clients per region and why
    it was chosen; 404 `placement_unknown` when no state has come since the broker started
    (it is kept in memory)."""
    seen = admin(request).telemetry.placement.answer()
    if seen is None:
        raise TidingsError(ErrorCode.PLACEMENT_UNKNOWN)
    return answer(seen)


routes = [Route("/v1/admin/placement", placement, methods=["GET"])]
