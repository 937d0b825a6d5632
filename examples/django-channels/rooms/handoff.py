"""roomgate's room handoff (docs/handoff.md): the hooks roomgate calls on this process's own address
to move a room, with its state, to another process, at handoff.path (/_roomgate/handoff):

    POST .../hello    200 {"version": 1}
    POST .../export   the room frozen (a lease of leaseMs), its state answered as an opaque blob
    POST .../import   the blob restored here under the new epoch
    POST .../release  the room's sockets closed with 1012, its state dropped, its epoch fenced
    POST .../resume   the freeze lifted (roomgate rolled back)

Each call carries roomgate's proof for its own purpose (verify_push, the push receiver's check)
and is idempotent by handoff id (X-Roomgate-Message-Id): a retry gets the answer the first call
got. Async views, on the event loop that holds the consumers, like the push receiver.
"""
import asyncio
import json
import re
from collections import OrderedDict

from django.http import HttpResponse, JsonResponse

from . import state
from .roomgate import ROOM_KEY, verify_push

VERSION = 1
STEPS = ("hello", "export", "import", "release", "resume")
CLOSE_SERVICE_RESTART = 1012  # djust's client reconnects after it, and lands on the new owner
LEASE_MAX_MS = 600_000
REMEMBERED = 10_000  # handoffs remembered for retries, and fences; the oldest go first
_outcomes = OrderedDict()  # (room, handoff id) -> "exported" | "resumed" | "released" | "imported"
_freezes = {}  # room -> (handoff id, blob, the lease's timer)


async def close_moved(consumer):
    """Closes a socket of a room that moved, with 1012 (service restart) as the protocol asks.

    Daphne's WebSocket library (Autobahn) sends no close code from a server but 1000 and
    3000-4999: under Daphne it is 1000. djust's client reconnects after either, to the new owner.
    """
    try:
        await consumer.close(code=CLOSE_SERVICE_RESTART)
    except Exception:  # Autobahn: "invalid close code 1012"; nothing was sent
        await consumer.close(code=1000)


def _remember(table, key, value):
    table.pop(key, None)
    table[key] = value
    while len(table) > REMEMBERED:
        table.pop(next(iter(table)))


def _answer(status, text=""):
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


async def hook(request, step):
    """One hook: the proof for this step's purpose first, then the call's fields, then the step."""
    if step not in STEPS:
        return _answer(404, "not found\n")
    if request.method != "POST":
        return _answer(405, "POST only\n")
    refused = verify_push(request.headers, request.body, f"handoff-{step}")
    if refused:
        return _answer(403, f"handoff refused: {refused}\n")
    if step == "hello":
        return JsonResponse({"version": VERSION})
    handoff_id = request.headers.get("X-Roomgate-Message-Id", "")
    room = request.headers.get("X-Roomgate-Room", "")
    epoch = request.headers.get("X-Roomgate-Epoch", "")
    if not handoff_id or len(handoff_id) > 200:
        return _answer(400, "no handoff id\n")
    if not ROOM_KEY.match(room):
        return _answer(400, "no room\n")
    # Up to 16 digits: roomgate's Redis store issues epochs from the clock (ms x 1000, 1.8e15 today).
    if not re.fullmatch(r"[1-9][0-9]{0,15}", epoch) or int(epoch) > 2**53 - 1:
        return _answer(400, "no epoch\n")
    return await STEP_VIEWS[step](handoff_id, room, int(epoch), request.body)


hook.csrf_exempt = True  # as push_receiver: Django 3.2's decorator would make the view sync


def _refused(handoff_id, room, epoch):
    """Why a call about `room` at `epoch` cannot be about the copy held here, or None."""
    held = state.ROOMS.get(room)
    if held is not None and epoch < held.epoch:
        return "this room is held under a newer epoch\n"
    if state.FENCES.get(room, 0) >= epoch and _outcomes.get((room, handoff_id)) != "released":
        return "this room was released\n"
    return None


def _blob(room, held):
    return json.dumps({"v": 1, "room": room, "moves": held.moves, "last": held.last}).encode()


def _expire(room, handoff_id):
    """The lease ran out: neither release nor resume came, so the room goes on here."""
    with state.LOCK:
        if _freezes.get(room, (None,))[0] != handoff_id:
            return
        del _freezes[room]
        held = state.ROOMS.get(room)
        if held is not None:
            held.frozen_by = None
        _remember(_outcomes, (room, handoff_id), "resumed")


def _unfreeze(room):
    frozen = _freezes.pop(room, None)
    if frozen is not None:
        frozen[2].cancel()
    held = state.ROOMS.get(room)
    if held is not None:
        held.frozen_by = None


async def export(handoff_id, room, epoch, body):
    try:
        lease_ms = json.loads(body).get("leaseMs")
    except (ValueError, AttributeError):
        lease_ms = None
    if not isinstance(lease_ms, int) or isinstance(lease_ms, bool) or not 1 <= lease_ms <= LEASE_MAX_MS:
        return _answer(400, f"leaseMs must be an integer 1..{LEASE_MAX_MS}\n")
    with state.LOCK:
        frozen = _freezes.get(room)
        if frozen is not None:
            if frozen[0] != handoff_id:
                return _answer(409, "another handoff holds this room\n")
            return HttpResponse(frozen[1], content_type="application/octet-stream")
        if (room, handoff_id) in _outcomes:
            return _answer(409, "this handoff is over\n")
        refused = _refused(handoff_id, room, epoch)
        if refused:
            return _answer(409, refused)
        held = state.ROOMS.get(room)
        if held is None:
            return _answer(404, "room not here\n")
        # Frozen from here on: record_move refuses the room's events, so every move acknowledged
        # before this line is in the blob and none is taken after it.
        held.frozen_by, held.epoch = handoff_id, max(held.epoch, epoch)
        blob = _blob(room, held)
        timer = asyncio.get_running_loop().call_later(lease_ms / 1000, _expire, room, handoff_id)
        _freezes[room] = (handoff_id, blob, timer)
        _remember(_outcomes, (room, handoff_id), "exported")
    return HttpResponse(blob, content_type="application/octet-stream")


def _restored(room, body):
    """The moves a blob carries, or None when it is not a blob of this room."""
    try:
        blob = json.loads(body)
        moves, last = blob["moves"], blob["last"]
    except (ValueError, TypeError, KeyError):
        return None
    if blob.get("v") != 1 or blob.get("room") != room or not isinstance(moves, int) or moves < 0:
        return None
    if not isinstance(last, list) or len(last) > state.LAST_MOVES_KEPT:
        return None
    for move in last:
        if not isinstance(move, dict) or not isinstance(move.get("n"), int) or not isinstance(move.get("from"), str):
            return None
    return moves, [{"n": m["n"], "from": m["from"][:64], "data": m.get("data")} for m in last]


async def import_(handoff_id, room, epoch, body):
    with state.LOCK:
        if _outcomes.get((room, handoff_id)) == "imported":
            return HttpResponse(status=204)
        refused = _refused(handoff_id, room, epoch)
        if refused:
            return _answer(409, refused)
        if room in _freezes:
            return _answer(409, "this room is frozen here by another handoff\n")
        restored = _restored(room, body)
        if restored is None:
            return _answer(400, "not a state blob of this room\n")
        held = state.ROOMS.get(room)
        if held is None:
            state.ROOMS[room] = held = state.Room(epoch)
        held.epoch = epoch
        held.moves, held.last = restored
        _remember(_outcomes, (room, handoff_id), "imported")
    return HttpResponse(status=204)


async def release(handoff_id, room, epoch, body):
    with state.LOCK:
        if _outcomes.get((room, handoff_id)) == "released":
            return HttpResponse(status=204)
        frozen = _freezes.get(room)
        if frozen is not None and frozen[0] != handoff_id:
            return _answer(409, "another handoff holds this room\n")
        refused = _refused(handoff_id, room, epoch)
        if refused:
            return _answer(409, refused)
        _unfreeze(room)
        # The fence first, so a socket that arrives while the others close is refused too.
        _remember(state.FENCES, room, max(epoch, state.FENCES.get(room, 0)))
        held = state.ROOMS.pop(room, None)
        _remember(_outcomes, (room, handoff_id), "released")
    for consumer in list(held.sockets) if held else []:
        await close_moved(consumer)
    return HttpResponse(status=204)


async def resume(handoff_id, room, epoch, body):
    with state.LOCK:
        frozen = _freezes.get(room)
        if frozen is not None and frozen[0] != handoff_id:
            return _answer(409, "another handoff holds this room\n")
        if _outcomes.get((room, handoff_id)) == "released":
            return _answer(409, "this room was released\n")
        _unfreeze(room)
        # Nothing frozen (resumed already, the lease ran out, never exported): the same end state.
        if (room, handoff_id) in _outcomes:
            _remember(_outcomes, (room, handoff_id), "resumed")
    return HttpResponse(status=204)


STEP_VIEWS = {"export": export, "import": import_, "release": release, "resume": resume}
