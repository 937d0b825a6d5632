"""roomgate_kit.push held to docs/push.md: the proof first, the room's epoch, the app's callback,
X-Roomgate-Sockets; a fan-out to the rooms held here."""
import json

from conftest import run, signed, verifier
from roomgate_kit.push import PushReceiver
from roomgate_kit.rooms import RoomTable


def receiver():
    delivered, rooms = [], RoomTable()

    async def deliver(room, message, meta):
        delivered.append((room, message, meta))
        return 2

    return PushReceiver(rooms, deliver, verify=verifier().verify), rooms, delivered


def push(r, body, **kw):
    return run(r.call("POST", signed("push", body, **kw), body))


def test_a_push_reaches_the_room_and_is_counted():
    r, rooms, delivered = receiver()
    answer = push(r, b'{"text":"hi"}', room="chess", epoch=3, id="m-1", sender="api")
    assert (answer.status, answer.sockets) == (204, 2)
    assert delivered == [("chess", {"text": "hi"}, {"id": "m-1", "sender": "api"})]
    assert rooms.get("chess").epoch == 3


def test_older_released_or_missing_rooms_get_409_and_nothing_is_delivered():
    r, rooms, delivered = receiver()
    rooms.note("chess", 5)
    assert push(r, b"{}", room="chess", epoch=4).status == 409
    assert push(r, b"{}").status == 409  # no room
    rooms.release("chess", 5)
    assert push(r, b"{}", room="chess", epoch=5).status == 409
    assert delivered == []
    assert push(r, b"{}", room="chess", epoch=6).status == 204


def test_refusals_before_anything_is_read():
    r, _, delivered = receiver()
    assert run(r.call("GET", signed("push"), b"")).status == 405
    refused = run(r.call("POST", signed("push-fanout", b"{}", room="r", epoch=1), b"{}"))
    assert (refused.status, json.loads(refused.body)) == (403, {"error": "push refused: bad-signature"})
    assert push(r, b"not json", room="r", epoch=1).status == 400
    assert push(r, b"\xff", room="r", epoch=1).status == 400
    assert delivered == []


def test_a_fan_out_reaches_the_rooms_held_here_under_their_epochs():
    r, rooms, delivered = receiver()
    rooms.note("old", 9)
    rooms.release("gone", 4)
    rooms_listed = [{"room": "a", "epoch": 1}, {"room": "old", "epoch": 2}, {"room": "gone", "epoch": 4}, {"room": "b/c", "epoch": 1},
                    {"room": "d", "epoch": True}, {"room": 5, "epoch": 1}, "x", {"room": "e", "epoch": 0}]
    body = json.dumps({"rooms": rooms_listed, "message": {"n": 1}}).encode()
    fields = signed("push-fanout", body, extra={"X-Roomgate-Fanout": "1"})
    answer = run(r.call("POST", fields, body))
    assert (answer.status, answer.sockets) == (204, 4)
    assert [d[0] for d in delivered] == ["a", "e"]
    for junk in (b"[]", b'{"rooms":{}}', b"1"):
        assert run(r.call("POST", signed("push-fanout", junk, extra={"X-Roomgate-Fanout": "1"}), junk)).sockets == 0
