"""roomgate_kit.handoff held to docs/handoff.md, "The protocol" and "Protocol version 2": signed
calls straight to the hooks, a room table with fake sockets, the app's state in a dict."""
import asyncio
import base64
import json
import time

import pytest

from conftest import FakeSocket, eventually, run, signed, verifier
from roomgate_kit.handoff import HandoffHooks
from roomgate_kit.rooms import RoomTable

SOCKET = "AAAAAAAAAAAAAAAAAAAAAA"


def later():
    """A second from now: a retry signs anew, so its proof is not the first call's (no replay)."""
    return int(time.time()) + 1


class App:
    """A room's state is a counter; the blob is JSON naming the room."""

    def __init__(self, with_messages=False):
        self.state, self.applied = {}, []
        self.rooms = RoomTable(on_drop=lambda room: self.state.pop(room, None))
        extra = {"apply_messages": self.apply_messages} if with_messages else {}
        self.hooks = HandoffHooks(self.rooms, self.export_room, self.import_room, verify=verifier().verify, **extra)

    def export_room(self, room):
        return json.dumps({"room": room, "n": self.state.get(room, 0)}).encode()

    def import_room(self, room, blob, epoch):
        try:
            parsed = json.loads(blob)
        except ValueError:
            return False
        if not isinstance(parsed, dict) or parsed.get("room") != room:
            return False
        self.state[room] = parsed["n"]
        return True

    async def apply_messages(self, room, socket_id, messages):
        await asyncio.sleep(0)
        self.applied.append((room, socket_id, messages))

    def change(self, room):
        """The app's one place of change: refused while frozen (False)."""
        with self.rooms.lock:
            if not self.rooms.live(room):
                return False
            self.state[room] = self.state.get(room, 0) + 1
            return True

    async def call(self, step, id="h-1", room="r", epoch=1, body=None, now=None, method="POST", headers=None):
        if body is None:
            body = b'{"leaseMs":10000}' if step == "export" else b""
        fields = headers or signed(f"handoff-{step}", body, id=id, room=room, epoch=epoch, now=now)
        answer = await self.hooks.call(step, method, fields, body)
        return answer.status, answer.body


def held_room(app, room="r", epoch=1, moves=2):
    app.rooms.note(room, epoch)
    for _ in range(moves):
        assert app.change(room)


def test_hello_says_version_1_or_2_with_messages():
    assert json.loads(run(App().call("hello", room="", epoch=""))[1]) == {"version": 1}
    assert json.loads(run(App(with_messages=True).call("hello", room="", epoch=""))[1]) == {"version": 2, "messages": True}


def test_export_freezes_and_answers_the_same_blob_to_a_retry_and_404_for_a_room_not_held():
    app = App()
    held_room(app)

    async def scenario():
        status, blob = await app.call("export")
        assert (status, json.loads(blob)) == (200, {"room": "r", "n": 2})
        assert not app.change("r")  # frozen
        app.state["r"] = 99  # whatever the app holds now, a retry gets the first blob
        assert await app.call("export", now=later()) == (200, blob)
        assert (await app.call("export", id="h-2", room="nowhere"))[0] == 404
        assert (await app.call("resume"))[0] == 204
        assert app.change("r")

    run(scenario())


def test_the_lease_lifts_the_freeze_and_ends_the_handoff():
    app = App()
    held_room(app)

    async def scenario():
        assert (await app.call("export", body=b'{"leaseMs":20}'))[0] == 200
        assert not app.change("r")
        await eventually(lambda: app.rooms.live("r"))
        assert app.change("r")
        assert (await app.call("export", now=later(), body=b'{"leaseMs":20}'))[0] == 409  # over

    run(scenario())


def test_a_second_handoff_of_a_frozen_room_gets_409_and_the_first_goes_on():
    app = App()
    held_room(app)

    async def scenario():
        assert (await app.call("export"))[0] == 200
        for step in ("export", "release", "resume"):
            assert (await app.call(step, id="h-2"))[0] == 409, step
        assert (await app.call("import", id="h-2", body=b'{"room":"r","n":1}'))[0] == 409  # frozen here
        assert not app.change("r")
        assert (await app.call("resume"))[0] == 204
        assert (await app.call("resume", now=later()))[0] == 204  # again: 2xx
        assert app.change("r")

    run(scenario())


def test_release_fences_closes_the_sockets_and_drops_the_state_and_stays_over():
    app = App()
    held_room(app, epoch=4)
    mounted, daphne = FakeSocket(), FakeSocket(refuses_1012=True)
    app.rooms.join("r", mounted)
    app.rooms.join("r", daphne)

    async def scenario():
        assert (await app.call("export", epoch=4))[0] == 200
        assert (await app.call("release", epoch=4))[0] == 204
        assert (mounted.codes, daphne.codes) == ([1012], [1000])
        assert "r" not in app.state and app.rooms.get("r") is None
        assert app.rooms.note("r", 4) is None and app.rooms.note("r", 3) is None  # the fence
        assert (await app.call("release", epoch=4, now=later()))[0] == 204  # again
        assert (await app.call("resume", epoch=4, now=later()))[0] == 409  # resume after release
        assert (await app.call("export", epoch=4, now=later() + 1))[0] == 409  # export after release
        assert (await app.call("export", id="h-3", epoch=4))[0] == 409  # another handoff under the released epoch
        assert app.rooms.note("r", 5) is not None  # a newer placement starts again

    run(scenario())


def test_import_restores_under_the_new_epoch_once_and_refuses_what_it_must():
    app = App()

    async def scenario():
        blob = b'{"room":"r","n":7}'
        assert (await app.call("import", epoch=8, body=blob))[0] == 204
        assert app.state["r"] == 7 and app.rooms.get("r").epoch == 8
        app.change("r")
        assert (await app.call("import", epoch=8, body=blob, now=later()))[0] == 204
        assert app.state["r"] == 8  # the retry applied nothing
        assert (await app.call("import", id="h-other", room="q", epoch=8, body=blob))[0] == 400  # another room's blob
        assert (await app.call("import", id="h-junk", room="q", epoch=8, body=b'{"room"'))[0] == 400
        assert app.rooms.get("q") is None
        assert (await app.call("import", id="h-old", epoch=3, body=blob))[0] == 409  # held under a newer epoch

    run(scenario())


@pytest.mark.parametrize("fields,status", [
    ({"id": ""}, 400), ({"id": "x" * 201}, 400), ({"room": ""}, 400), ({"room": "a/b"}, 400), ({"epoch": ""}, 400),
    ({"epoch": "0"}, 400), ({"epoch": "-3"}, 400), ({"epoch": "9007199254740993"}, 400), ({"epoch": "01"}, 400),
    ({"body": b'{"leaseMs":-1}'}, 400), ({"body": b'{"leaseMs":"10"}'}, 400), ({"body": b"[1]"}, 400),
    ({"body": b'{"leaseMs":true}'}, 400), ({"body": b"\xff\xfe"}, 400), ({"body": b'{"leaseMs":600001}'}, 400),
    ({"method": "GET"}, 405),
])
def test_hostile_calls_get_a_4xx_and_leave_the_room_live(fields, status):
    app = App()
    held_room(app)
    assert run(app.call("export", **fields))[0] == status
    assert app.change("r")


def test_the_largest_epoch_is_taken():
    app = App()
    held_room(app, epoch=9007199254740991)
    assert run(app.call("export", epoch="9007199254740991"))[0] == 200


def test_every_refused_proof_is_a_403_that_changes_nothing():
    app = App()
    held_room(app)

    async def scenario():
        body = b'{"leaseMs":10000}'
        proofs = [
            signed("handoff-import", body, id="h-1", room="r", epoch=1),  # another purpose
            signed("push", body, id="h-1", room="r", epoch=1),
            signed("handoff-export", body, id="h-1", room="other", epoch=1, extra={"X-Roomgate-Room": "r"}),
            signed("handoff-export", body, id="h-1", room="r", epoch=1, to="b2"),
            signed("handoff-export", body, id="h-1", room="r", epoch=1, now=1),
        ]
        for p in proofs:
            status, answer = await app.call("export", headers=p, body=body)
            assert status == 403 and json.loads(answer)["error"].startswith("handoff refused")
        assert app.change("r")
        genuine = signed("handoff-export", body, id="h-1", room="r", epoch=1)
        assert (await app.call("export", headers=genuine, body=body))[0] == 200
        assert (await app.call("export", headers=genuine, body=body))[0] == 403  # the very call again: a replay
        assert (await app.call("explode"))[0] == 404
        assert (await app.call("messages"))[0] == 404  # no apply_messages: no such hook

    run(scenario())


def _messages(socket_id, *messages):
    return json.dumps({"socket": socket_id, "messages": list(messages)}).encode()


def test_the_messages_hook_applies_each_sockets_messages_once_in_order():
    app = App(with_messages=True)

    async def call(body, socket=SOCKET, id="h-1", epoch=2, now=None):
        fields = signed("handoff-messages", body, id=id, room="r", epoch=epoch, now=now, extra={"X-Roomgate-Socket": socket})
        return (await app.hooks.call("messages", "POST", fields, body)).status

    async def scenario():
        assert (await app.call("import", epoch=2, body=b'{"room":"r","n":1}'))[0] == 204
        body = _messages(SOCKET, {"text": "a"}, {"binary": base64.b64encode(b"\x00\x01").decode()}, {"text": "b"})
        assert await call(body) == 204
        assert app.applied == [("r", SOCKET, ["a", b"\x00\x01", "b"])]
        assert await call(body, now=later()) == 204  # a retry: nothing applied twice
        assert len(app.applied) == 1
        other = "B" * 22
        assert await call(_messages(other, {"text": "c"}), socket=other) == 204
        assert [a[1] for a in app.applied] == [SOCKET, other]
        for bad in (_messages(other, {"text": 1}), _messages(other, {"binary": "!!"}), _messages(other, {"text": "a", "x": 1}), b"[]", b"\xff"):
            assert await call(bad, socket=other, id="h-bad") == 400
        assert await call(_messages("C" * 22, {"text": "c"}), socket="D" * 22, id="h-bad") == 400  # body and header disagree
        assert await call(_messages("short"), socket="short", id="h-bad") == 400
        assert await call(_messages(SOCKET, {"text": "old"}), id="h-old", epoch=1) == 409  # held under a newer epoch
        app.rooms.release("r", 2)
        assert await call(_messages(SOCKET, {"text": "late"}), id="h-late", epoch=2) == 409  # released: fenced
        assert len(app.applied) == 2

    run(scenario())


def test_messages_the_app_fails_to_apply_get_a_json_500_and_a_retry_applies_them():
    app, calls = App(with_messages=True), []

    async def flaky(room, socket_id, messages):
        calls.append(messages)
        if len(calls) == 1:
            raise RuntimeError("database down")

    app.hooks.apply_messages = flaky
    body = _messages(SOCKET, {"text": "a"})

    async def scenario():
        first = await app.hooks.call("messages", "POST", signed("handoff-messages", body, id="h-1", room="r", epoch=1, extra={"X-Roomgate-Socket": SOCKET}), body)
        assert (first.status, json.loads(first.body)) == (500, {"error": "the messages could not be applied"})
        again = signed("handoff-messages", body, id="h-1", room="r", epoch=1, now=later(), extra={"X-Roomgate-Socket": SOCKET})
        assert (await app.hooks.call("messages", "POST", again, body)).status == 204
        assert calls == [["a"], ["a"]]

    run(scenario())


def test_remembered_tables_are_bounded():
    app = App()
    app.hooks.remembered = 3

    async def scenario():
        for n in range(6):
            assert (await app.call("import", id=f"h-{n}", room=f"r{n}", epoch=1, body=json.dumps({"room": f"r{n}", "n": 0}).encode()))[0] == 204
        assert len(app.hooks.outcomes) == 3

    run(scenario())
