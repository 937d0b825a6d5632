"""The socket resume of protocol version 2 (docs/handoff.md, "Deliver", item 1; roomgate_kit.resume):
a room moves from one app to another with its sockets' own states in the export, and a resumed
handshake, through Channels' own communicator, is attached to the imported room with no greeting
and goes on from that state; every handshake that does not hold is refused before accept."""
import json
import time
from pathlib import Path

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.testing import WebsocketCommunicator

from conftest import ME, run, signed, verifier
from roomgate_kit.fence import FencedConsumerMixin, Headers
from roomgate_kit.handoff import HandoffHooks
from roomgate_kit.proofs import Verifier
from roomgate_kit.resume import resume_refusal, unwrap, wrap
from roomgate_kit.rooms import RoomTable

SOCKET = "AAAAAAAAAAAAAAAAAAAAAA"
OTHER = "BBBBBBBBBBBBBBBBBBBBBB"
VECTORS = json.loads((Path(__file__).parent / "fixtures" / "call-proofs.json").read_text("utf-8"))
ENVELOPES = json.loads((Path(__file__).parent / "fixtures" / "socket-envelopes.json").read_text("utf-8"))


class Side:
    """One app process: a room's state is a counter; each socket's own state is its sequence number."""

    def __init__(self, resume=True, with_messages=True):
        self.state, self.seen = {}, []
        self.rooms = RoomTable(on_drop=lambda room: self.state.pop(room, None))
        self.verify = verifier().verify
        extra = {"export_socket": lambda s: {"seq": s.seq}} if resume else {}
        self.hooks = HandoffHooks(self.rooms, self.export_room, self.import_room, apply_messages=self.apply if with_messages else None, verify=self.verify, **extra)
        side = self

        class Consumer(FencedConsumerMixin, AsyncWebsocketConsumer):
            rooms = self.rooms
            call_verify = self.verify
            seq = 0

            async def connect(self):
                await self.accept()
                await self.send(text_data="hello")  # the greeting a resumed socket must not get

            async def resume_socket(self, state):
                self.seq = state["seq"]
                side.seen.append(("resumed", self.room, self.socket_id, self.seq))

            async def receive(self, text_data=None, bytes_data=None):
                self.seq += 1
                side.state[self.room] = side.state.get(self.room, 0) + 1
                await self.send(text_data=f"{text_data} {self.seq}")

        self.Consumer = Consumer

    def export_room(self, room):
        return json.dumps({"room": room, "n": self.state.get(room, 0)}).encode()

    def import_room(self, room, blob, epoch):
        parsed = json.loads(blob)
        if parsed.get("room") != room:
            return False
        self.state[room] = parsed["n"]
        return True

    def apply(self, room, socket_id, messages):
        self.seen.append(("applied", room, socket_id, messages))

    async def hook(self, step, id="h-1", room="r", epoch=1, body=None):
        body = (b'{"leaseMs":10000}' if step == "export" else b"") if body is None else body
        answer = await self.hooks.call(step, "POST", signed(f"handoff-{step}", body, id=id, room=room, epoch=epoch), body)
        return answer.status, answer.body

    def socket(self, room="r", epoch=1, socket_id=SOCKET):
        return WebsocketCommunicator(self.Consumer.as_asgi(), "/ws/live/", headers=[(b"x-roomgate-room", room.encode()), (b"x-roomgate-epoch", str(epoch).encode()), (b"x-roomgate-socket", socket_id.encode())])

    def resumed(self, room="r", epoch=2, id="h-1", socket_id=SOCKET, purpose="handoff-resume-socket", extra=None, **kw):
        extra = {"X-Roomgate-Socket": socket_id, "X-Roomgate-Resume": id, **(extra or {})}
        fields = signed(purpose, socket_id.encode(), id=id, room=room, epoch=epoch, extra=extra, **kw)
        headers = [(k.encode(), v.encode()) for k, v in fields.items()]
        return WebsocketCommunicator(self.Consumer.as_asgi(), "/ws/live/", headers=headers)


async def opened(c):
    connected, _ = await c.connect()
    return connected


def test_hello_offers_resume_only_with_a_sockets_state_and_the_messages_hook():
    assert json.loads(run(Side().hook("hello", room="", epoch=""))[1]) == {"version": 2, "messages": True, "resume": True}
    assert json.loads(run(Side(resume=False).hook("hello", room="", epoch=""))[1]) == {"version": 2, "messages": True}
    assert json.loads(run(Side(with_messages=False).hook("hello", room="", epoch=""))[1]) == {"version": 1}


def test_a_room_moves_with_its_sockets_states_and_the_resumed_socket_goes_on_with_no_greeting():
    a, b = Side(), Side()

    async def scenario():
        c = a.socket()
        assert await opened(c) and await c.receive_from() == "hello"
        for n in (1, 2, 3):
            await c.send_to(text_data=f"e{n}")
            assert await c.receive_from() == f"e{n} {n}"
        status, blob = await a.hook("export")
        assert status == 200
        room_blob, sockets = unwrap(blob)
        assert json.loads(room_blob) == {"room": "r", "n": 3} and sockets == {SOCKET: {"seq": 3}}
        assert (await b.hook("import", epoch=2, body=blob))[0] == 204
        assert b.state == {"r": 3}
        # Refused before accept, each: a proof for another purpose, for another backend, stale; another
        # handoff id; a socket no export carried; an epoch the room is not held under.
        assert not await opened(b.resumed(purpose="handoff-resume"))
        assert not await opened(b.resumed(to="b2", extra={"X-Roomgate-Destination": ME}))
        assert not await opened(b.resumed(now=1))
        assert not await opened(b.resumed(id="h-9"))
        assert not await opened(b.resumed(socket_id=OTHER))
        assert not await opened(b.resumed(epoch=3))
        assert b.seen == []
        assert (await a.hook("release"))[0] == 204
        resumed = b.resumed()
        assert await opened(resumed)
        assert b.seen == [("resumed", "r", SOCKET, 3)]
        await resumed.send_to(text_data="e4")
        assert await resumed.receive_from() == "e4 4"  # the socket's sequence goes on; no greeting came first
        assert b.state == {"r": 4} and b.rooms.sockets("r")[0].socket_id == SOCKET
        # Once: the same socket again (a new proof, the state already taken) is refused.
        assert not await opened(b.resumed(now=int(time.time()) + 1))
        await resumed.disconnect()
        await c.disconnect()

    run(scenario())


def test_a_frozen_or_released_room_takes_no_resume_and_the_release_drops_the_kept_states():
    b = Side()

    async def scenario():
        blob = wrap(json.dumps({"room": "r", "n": 0}).encode(), {SOCKET: {"seq": 7}, OTHER: {"seq": 1}})
        assert (await b.hook("import", epoch=2, body=blob))[0] == 204
        assert (await b.hook("export", id="h-2", epoch=2))[0] == 200  # frozen here by another handoff
        assert not await opened(b.resumed())
        assert (await b.hook("release", id="h-2", epoch=2))[0] == 204
        assert b.rooms.resumable.states == {}
        assert not await opened(b.resumed(now=int(time.time()) + 1))

    run(scenario())


def test_without_resume_the_blob_is_the_apps_own_and_an_app_blob_imports_as_is_with_resume():
    a, b = Side(resume=False), Side()

    async def scenario():
        a.rooms.note("r", 1)
        status, blob = await a.hook("export")
        assert (status, json.loads(blob)) == (200, {"room": "r", "n": 0})
        assert (await b.hook("import", epoch=2, body=blob))[0] == 204  # no envelope: the app's own
        assert b.state == {"r": 0} and b.rooms.resumable.states == {}
        assert not await opened(b.resumed())

    run(scenario())


def test_the_shared_resume_vector_passes_the_handshake_check():
    v = next(v for v in VECTORS if v["purpose"] == "handoff-resume-socket")
    headers = Headers(v["headers"].items())
    room, epoch, socket_id, handoff_id = headers.get("X-Roomgate-Room"), int(headers.get("X-Roomgate-Epoch")), v["body"], headers.get("X-Roomgate-Resume")
    table = RoomTable()
    table.note(room, epoch)
    table.resumable.keep(room, handoff_id, epoch, {socket_id: {"seq": 1}})
    check = Verifier(v["backendId"], v["keys"], clock=lambda: v["nowS"]).verify
    # A message id other than the handoff's is refused (before the proof is taken).
    assert resume_refusal(table, Headers(dict(headers, **{"x-roomgate-message-id": "h-0"}).items()), check)[1] is None
    assert resume_refusal(table, headers, check) == (None, (room, epoch, socket_id, handoff_id, {"seq": 1}))
    # The same proof again is a replay, even with the socket's state there again.
    table.resumable.keep(room, handoff_id, epoch, {socket_id: {"seq": 1}})
    assert resume_refusal(table, headers, check)[0] == "resume refused: replayed"


def test_unwrap_refuses_what_is_not_an_envelope():
    assert unwrap(b"not json") is None
    assert unwrap(json.dumps({"roomgateKit": 1, "room": "e30=", "sockets": {"short": {}}}).encode()) is None
    assert unwrap(json.dumps({"roomgateKit": 1, "room": "!!", "sockets": {}}).encode()) is None
    assert unwrap(json.dumps({"roomgateKit": 2, "room": "e30=", "sockets": {}}).encode()) is None
    assert unwrap(wrap(b"{}", {SOCKET: None})) == (b"{}", {SOCKET: None})


def test_the_envelope_is_the_node_kits_byte_for_byte():
    for v in ENVELOPES:
        room = v["room"].encode("utf-8")
        assert wrap(room, v["sockets"]) == v["blob"].encode("utf-8")
        assert unwrap(v["blob"].encode("utf-8")) == (room, v["sockets"])
