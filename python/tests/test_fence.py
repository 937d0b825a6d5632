"""roomgate_kit.rooms and roomgate_kit.fence: the room table's epoch rules (docs/ownership.md), the
epoch fence (docs/handoff.md), the ASGI middleware and the Channels consumer mixin, with real
ASGI calls and Channels' own communicator."""
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.testing import WebsocketCommunicator

from conftest import FakeSocket, run
from roomgate_kit.fence import CLOSE_WRONG_ROOM, FencedConsumerMixin, RoomOwnerMiddleware, close_moved, owner
from roomgate_kit.rooms import RoomTable


def test_owner_fields_are_checked():
    assert owner("chess-42", "7") == ("chess-42", 7)
    assert owner("chess-42", None) == ("chess-42", 0)
    assert owner("chess-42", "1796400000000000") == ("chess-42", 1796400000000000)
    assert owner("chess-42", "-3") == ("chess-42", 0)
    assert owner("a/b", "1") == (None, 0)
    assert owner("x" * 129, "1") == (None, 0)
    assert owner("", "1") == (None, 0)


def test_newer_epoch_is_a_new_placement_only_without_sockets_older_is_refused():
    dropped = []
    t = RoomTable(on_drop=dropped.append)
    held = t.note("r", 2)
    assert t.note("r", 1) is None  # older
    assert t.note("r", 0) is held  # no stored placement: neither newer nor older
    assert t.note("r", 3) is not held and dropped == ["r"]  # no socket here: the copy is stale
    t.join("r", FakeSocket())
    assert t.note("r", 4) is t.get("r") and t.get("r").epoch == 4 and dropped == ["r"]  # written again in place


def test_released_epochs_are_fenced_and_a_newer_one_is_a_new_placement():
    dropped = []
    t = RoomTable(on_drop=dropped.append)
    a, b = FakeSocket(), FakeSocket()
    t.note("r", 5)
    t.join("r", a)
    t.join("r", b)
    assert set(t.release("r", 5)) == {a, b} and dropped == ["r"]
    assert t.fenced("r", 5) and t.fenced("r", 4) and not t.fenced("r", 6)
    assert t.note("r", 5) is None and t.note("r", 3) is None
    assert t.note("r", 6) is not None and not t.fenced("r", 0)


def test_the_fence_table_is_bounded():
    t = RoomTable(remembered=2)
    for room in ("a", "b", "c"):
        t.release(room, 1)
    assert list(t.fences) == ["b", "c"]


def test_close_moved_falls_back_to_1000_where_1012_cannot_be_sent():
    plain, daphne = FakeSocket(), FakeSocket(refuses_1012=True)
    run(close_moved(plain.close))
    run(close_moved(daphne.close))
    assert (plain.codes, daphne.codes) == ([1012], [1000])


async def _http_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": repr(scope.get("roomgate")).encode()})


async def _ws_app(scope, receive, send):
    await receive()
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.close", "code": 4000})


def _asgi(app, scope):
    """Runs one ASGI call; what the app sent."""
    sent, inbox = [], [{"type": "websocket.connect"} if scope["type"] == "websocket" else {"type": "http.request", "body": b""}]

    async def receive():
        return inbox.pop(0) if inbox else {"type": "websocket.disconnect", "code": 1000}

    async def send(message):
        if message.get("code") == 1012:
            raise ValueError("invalid close code 1012")  # as Daphne
        sent.append(message)

    run(app(scope, receive, send))
    return sent


def _scope(kind, room, epoch, path="/game/r/"):
    return {"type": kind, "path": path, "headers": [(b"x-roomgate-room", room.encode()), (b"x-roomgate-epoch", str(epoch).encode())]}


def test_middleware_notes_page_epochs_and_fences_handshakes():
    t = RoomTable()
    http = RoomOwnerMiddleware(_http_app, t)
    assert b"'held': True" in _asgi(http, _scope("http", "r", 3))[1]["body"] and t.get("r").epoch == 3
    assert b"'held': False" in _asgi(http, _scope("http", "r", 2))[1]["body"]  # an older epoch
    assert _asgi(http, _scope("http", "r", 9, path="/_roomgate/push"))[1]["body"] == b"None"  # roomgate's own calls
    assert t.get("r").epoch == 3
    ws = RoomOwnerMiddleware(_ws_app, t)
    assert _asgi(ws, _scope("websocket", "r", 2)) == [{"type": "websocket.close", "code": 1000}]  # before accept: 403
    assert _asgi(ws, _scope("websocket", "r", 3))[-1]["code"] == 4000  # the app's own
    t.release("r", 3)
    assert _asgi(ws, _scope("websocket", "r", 3)) == [{"type": "websocket.accept"}, {"type": "websocket.close", "code": 1000}]
    assert _asgi(ws, _scope("websocket", "r", 4))[-1]["code"] == 4000  # a new placement


TABLE = RoomTable()


class Consumer(FencedConsumerMixin, AsyncWebsocketConsumer):
    rooms = TABLE

    async def connect(self):
        await self.accept()
        await self.send(text_data=f"{self.room} {self.epoch} {self.socket_id}")

    async def receive(self, text_data=None, bytes_data=None):
        refused = self.mount_refusal(text_data or None)
        if refused:
            await self.send(text_data=refused)
            await self.close(code=CLOSE_WRONG_ROOM)
        else:
            await self.send(text_data="mounted")


def _socket(room, epoch, socket_id="AAAAAAAAAAAAAAAAAAAAAA"):
    headers = [(b"x-roomgate-socket", socket_id.encode())]
    if room is not None:
        headers += [(b"x-roomgate-room", room.encode()), (b"x-roomgate-epoch", str(epoch).encode())]
    return WebsocketCommunicator(Consumer.as_asgi(), "/ws/live/", headers=headers)


def test_the_consumer_mixin_joins_fences_and_refuses_a_mount_of_another_room_once():
    async def scenario():
        c = _socket("m", 2)
        assert (await c.connect())[0] and await c.receive_from() == "m 2 AAAAAAAAAAAAAAAAAAAAAA"
        assert len(TABLE.sockets("m")) == 1
        await c.send_to(text_data="m")
        assert await c.receive_from() == "mounted"
        older = _socket("m", 1)
        assert (await older.connect())[0] is False  # refused before accept
        other = _socket("m", 2)
        await other.connect()
        await other.receive_from()
        await other.send_to(text_data="n")
        assert "routed for room m, not n" in await other.receive_from()
        assert (await other.receive_output())["code"] == CLOSE_WRONG_ROOM
        keyless = _socket(None, 0, socket_id="short")
        await keyless.connect()
        assert await keyless.receive_from() == "None 0 None"  # no room key, no valid socket id
        await keyless.send_to(text_data="m")
        assert "without a room key" in await keyless.receive_from()
        assert (await keyless.receive_output())["code"] == CLOSE_WRONG_ROOM
        assert len(TABLE.sockets("m")) == 2  # c and other (closed, its disconnect not yet in)
        await c.disconnect()
        await other.disconnect()
        assert TABLE.sockets("m") == []  # each left the room as it ended
        TABLE.release("m", 2)
        late = _socket("m", 2)
        assert (await late.connect())[0] is True
        assert (await late.receive_output())["code"] in (1012, 1000)  # accepted, closed at once: moved
        assert TABLE.get("m") is None

    run(scenario())
