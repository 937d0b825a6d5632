"""The rooms this process holds, in its memory: no database, and no channel layer unless settings.py
configures one (then a room's messages go through its group on the layer). roomgate sends every
page and socket of a room to one process, so this is all the state a room needs. A room's game
state is its moves (a counter and the last few): what a handoff carries to another process
(rooms/handoff.py, docs/handoff.md).

ROOMS, roomgate_kit's table, holds each room's epoch, sockets and freeze, and drops a room's game
when it moves away (docs/python-kit.md). Pages are served on Django's thread, sockets and pushes
on the event loop: the table's lock guards GAMES too; sends happen on the loop only.
"""
import json

from channels.layers import get_channel_layer

from roomgate_kit.groups import send_to_room  # ROOMGATE
from roomgate_kit.rooms import RoomTable  # ROOMGATE


class Game:
    def __init__(self):
        self.inbox = []  # the messages pushed to the room, for the tests
        self.moves = 0  # the room's game state: how many moves were made...
        self.last = []  # ...and the last LAST_MOVES_KEPT of them ({"n", "from", "data"})


GAMES = {}
# ROOMGATE: the rooms held here (epoch, sockets, freeze); a room that moves away drops its game.
ROOMS = RoomTable(on_drop=lambda room: GAMES.pop(room, None))
LOCK = ROOMS.lock

INBOX_KEPT = 50  # the latest pushes of a room, kept for the tests (a real app keeps its own state)
LAST_MOVES_KEPT = 20
MOVE_DATA_MAX_BYTES = 1024  # a larger move's data is not kept (nor carried): the blob stays small


# ROOMGATE (all of it, the app's part too): checked live under the table's lock (docs/handoff.md).
def record_move(room, session, data):
    """The number of the move an event became; None while a handoff has the room frozen, or after
    it released the room (its sockets are closing)."""
    with LOCK:
        if not ROOMS.live(room):
            return None
        held = GAMES.setdefault(room, Game())
        held.moves += 1
        small = len(json.dumps(data)) <= MOVE_DATA_MAX_BYTES
        held.last.append({"n": held.moves, "from": session[:64], "data": data if small else None})
        del held.last[:-LAST_MOVES_KEPT]
        return held.moves


# ROOMGATE: where roomgate_kit's push receiver hands a push (views.py).
async def deliver(room, message, meta):
    """roomgate_kit's push receiver hands a push here: to every socket of the room (kept in its inbox)."""
    frame = {"type": "push", "room": room, **meta, "message": message}
    with LOCK:
        held = GAMES.setdefault(room, Game())
        held.inbox.append(frame)
        del held.inbox[:-INBOX_KEPT]
    return await send_room(room, frame)


async def send_room(room, frame):
    """Sends `frame` to every socket of the room; how many it went to. With a channel layer
    (settings.py: DJANGO_CHANNEL_LAYER), through the room's group on it."""
    text = json.dumps(frame)
    layer = get_channel_layer()
    if layer is not None:
        return await send_to_room(layer, ROOMS, room, text)  # ROOMGATE: roomgate_kit.groups
    sent = 0
    for consumer in ROOMS.sockets(room):
        try:
            await consumer.send(text_data=text)
            sent += 1
        except Exception:  # a socket closing meanwhile: not counted
            pass
    return sent


def snapshot(room):
    with LOCK:
        placed, held = ROOMS.get(room), GAMES.get(room) or Game()
        return {
            "room": room, "epoch": placed.epoch if placed else None, "sockets": len(placed.sockets) if placed else 0,
            "inbox": list(held.inbox), "moves": held.moves, "last": list(held.last), "frozen": bool(placed and placed.frozen_by),
        }
