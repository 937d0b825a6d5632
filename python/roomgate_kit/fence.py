"""The room and placement epoch roomgate routed a request or a socket by (X-Roomgate-Room,
X-Roomgate-Epoch: docs/ownership.md), and the fence that holds sockets to them:

- a socket under an epoch a handoff released here is accepted and closed at once with 1012
  (1000 under Daphne), so its client reconnects to the room's new owner;
- a socket under an older epoch than the room is held under is refused before accept (403);
- a mount of another room than the socket was routed for, or on a socket routed without a room
  key, is refused once with close code 4400 (CLOSE_WRONG_ROOM): the app's page must not reconnect
  after it (it would land in the same place again), so there is no reconnect storm.

RoomOwnerMiddleware (ASGI) notes the epoch of every page request and fences handshakes;
FencedConsumerMixin does the same for a Channels consumer and keeps the room's sockets in the table;
it also takes the resume handshake of protocol version 2 (roomgate_kit.resume): checked, then the
socket attached to the imported room with no greeting, its session going on from its own state.
"""
import re

ROOM_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,128}")  # roomgate's default room.pattern, checked again here
CLOSE_SERVICE_RESTART = 1012
CLOSE_WRONG_ROOM = 4400
SOCKET_ID = re.compile(r"[A-Za-z0-9_-]{22}")  # X-Roomgate-Socket (protocol version 2)


class Headers(dict):
    """Header fields by case-insensitive name (the last of a repeated one), from ASGI's list."""

    def __init__(self, pairs=()):
        super().__init__((k.decode("latin-1").lower() if isinstance(k, bytes) else k.lower(), v.decode("latin-1") if isinstance(v, bytes) else v) for k, v in pairs)

    def get(self, name, default=None):
        return super().get(name.lower(), default)


def owner(room, epoch):
    """(room, epoch) from the two fields' text; (None, 0) without a valid room key."""
    if not room or not ROOM_KEY.fullmatch(room):
        return None, 0
    return room, int(epoch) if epoch and re.fullmatch(r"[0-9]{1,16}", epoch) else 0


def owner_of_headers(headers):
    return owner(headers.get("X-Roomgate-Room"), headers.get("X-Roomgate-Epoch"))


def owner_of_scope(scope):
    return owner_of_headers(Headers(scope.get("headers", [])))


async def close_moved(close):
    """Closes a socket of a room that moved with 1012 (service restart), as the protocol asks.

    Daphne's WebSocket library (Autobahn) sends no close code from a server but 1000 and
    3000-4999: under Daphne it is 1000. djust's client reconnects after either, to the new owner.
    `close`: the socket's close(code=...) coroutine function.
    """
    try:
        await close(code=CLOSE_SERVICE_RESTART)
    except Exception:  # Autobahn: "invalid close code 1012"; nothing was sent
        await close(code=1000)


def verdict(table, room, epoch):
    """'moved' (fenced), 'older' (refused) or 'ok' for a socket of `room` under `epoch`."""
    if room is None:
        return "ok"
    if table.fenced(room, epoch):
        return "moved"
    return "ok" if table.note(room, epoch) is not None else "older"


class RoomOwnerMiddleware:
    """ASGI middleware: scope["roomgate"] = {"room", "epoch", "held"} on every request and handshake
    (held: the table holds the room under that epoch); fenced and older handshakes never reach the
    app. roomgate's own calls (under `own_prefix`) name a room without being one of its requests."""

    def __init__(self, app, table, own_prefix="/_roomgate/"):
        self.app, self.table, self.own_prefix = app, table, own_prefix

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket") or scope.get("path", "").startswith(self.own_prefix):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket" and Headers(scope.get("headers", [])).get("X-Roomgate-Resume") is not None:
            # A resume handshake: its proof is checked by the consumer mixin before anything is noted.
            return await self.app(dict(scope, roomgate={"room": None, "epoch": 0, "held": False}), receive, send)
        room, epoch = owner_of_scope(scope)
        seen = verdict(self.table, room, epoch)
        if scope["type"] == "websocket" and seen != "ok":
            return await self._refuse(seen, receive, send)
        scope = dict(scope, roomgate={"room": room, "epoch": epoch, "held": room is not None and seen == "ok"})
        return await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(seen, receive, send):
        if (await receive())["type"] != "websocket.connect":
            return
        if seen == "older":
            await send({"type": "websocket.close", "code": 1000})  # before accept: the handshake gets 403
            return
        await send({"type": "websocket.accept"})

        async def close(code):
            await send({"type": "websocket.close", "code": code})

        await close_moved(close)


class FencedConsumerMixin:
    """For a Channels AsyncWebsocketConsumer: set `rooms` (the RoomTable). Before connect() runs,
    self.room and self.epoch are what roomgate routed by (room None: no room key) and the fence has
    refused what it refuses; the socket is one of the room's (closed by a release) until it ends.
    self.socket_id is X-Roomgate-Socket (None before protocol version 2).

    Resume (the app gave HandoffHooks an export_socket): a handshake with X-Roomgate-Resume is
    verified (roomgate_kit.resume), refused before accept (403) when it does not hold, else accepted
    with no connect() and no greeting, joined to the room, and handed to the consumer's
    resume_socket(state): the state export_socket gave on the old owner. `call_verify` (tests):
    the proof check, default roomgate_kit.proofs.verify_call."""

    rooms = None
    room, epoch, socket_id = None, 0, None
    call_verify = None

    async def websocket_connect(self, message):
        headers = Headers(self.scope.get("headers", []))
        if headers.get("X-Roomgate-Resume") is not None:
            return await self._resume(headers)
        room, epoch = owner_of_scope(self.scope)
        sid = headers.get("X-Roomgate-Socket")
        self.socket_id = sid if sid and SOCKET_ID.fullmatch(sid) else None
        seen = verdict(self.rooms, room, epoch)
        if seen == "older":
            await self.close()  # before accept: the handshake is refused (403)
            return
        if seen == "moved":
            await self.accept()
            await close_moved(self.close)
            return
        self.room, self.epoch = room, epoch
        if room is not None:
            self.rooms.join(room, self)
        await super().websocket_connect(message)

    async def _resume(self, headers):
        from .proofs import verify_call
        from .resume import resume_refusal

        refused, resumed = resume_refusal(self.rooms, headers, type(self).call_verify or verify_call)
        if refused:
            await self.close()  # before accept: the handshake gets 403; roomgate delivers its messages the other way
            return
        self.room, self.epoch, self.socket_id, _, state = resumed
        for group in getattr(self, "groups", None) or []:
            await self.channel_layer.group_add(group, self.channel_name)
        self.rooms.join(self.room, self)  # one of the room's sockets from here: a release closes it
        offered = self.scope.get("subprotocols") or []
        # roomgate offers exactly the subprotocol the client's socket negotiated; its 101 must agree.
        await self.accept(offered[0] if offered else None)
        await self.resume_socket(state)

    async def resume_socket(self, state):
        """The app's: this socket goes on from `state` (its export_socket value); send no greeting."""
        raise NotImplementedError("give HandoffHooks an export_socket only with a consumer that has resume_socket")

    async def websocket_disconnect(self, message):
        if self.room is not None:
            self.rooms.leave(self.room, self)
        await super().websocket_disconnect(message)

    def mount_refusal(self, wanted):
        """Why a mount of room `wanted` (None: the page named none) is refused here, or None. The
        app sends its own error frame with the text, then closes with CLOSE_WRONG_ROOM."""
        if self.room is None:
            return "this socket came without a room key (no room cookie, /r/ROOM/ prefix or ?room=): reload the page"
        if wanted is not None and wanted != self.room:
            return f"this socket was routed for room {self.room}, not {wanted}"
        return None
