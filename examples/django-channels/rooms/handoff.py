"""roomgate's room handoff (docs/handoff.md): roomgate_kit serves the hooks (proofs, lease,
idempotency, 409s, the fence; docs/python-kit.md); the app gives the room's state as a blob and
takes it back. Both run under the room table's lock, the one record_move takes.
"""
# ROOMGATE: this file is roomgate's, all of it.
import json

from roomgate_kit.handoff import HandoffHooks, django_view

from . import state


def export_room(room):
    held = state.GAMES.get(room) or state.Game()
    return json.dumps({"v": 1, "room": room, "moves": held.moves, "last": held.last}).encode()


def import_room(room, blob, epoch):
    """Restores the room from a blob of its own (version 1, this room); False for anything else."""
    try:
        parsed = json.loads(blob)
        moves, last = parsed["moves"], parsed["last"]
    except (ValueError, TypeError, KeyError):
        return False
    if parsed.get("v") != 1 or parsed.get("room") != room or not isinstance(moves, int) or moves < 0:
        return False
    if not isinstance(last, list) or len(last) > state.LAST_MOVES_KEPT:
        return False
    if not all(isinstance(m, dict) and isinstance(m.get("n"), int) and isinstance(m.get("from"), str) for m in last):
        return False
    held = state.GAMES[room] = state.Game()
    held.moves, held.last = moves, [{"n": m["n"], "from": m["from"][:64], "data": m.get("data")} for m in last]
    return True


hook = django_view(HandoffHooks(state.ROOMS, export_room, import_room))
