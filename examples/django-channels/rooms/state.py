"""The rooms this process holds, in its memory: no channel layer, no database. roomgate sends every
page and socket of a room to one process, so this is all the state a room needs. A room's game
state is its moves (a counter and the last few): what a handoff carries to another process
(rooms/handoff.py, docs/handoff.md).

Pages are served on Django's thread, sockets and pushes on the event loop: the lock guards the
dictionaries; sends happen on the loop only.
"""
import json
import threading


class Room:
    def __init__(self, epoch):
        self.epoch = epoch  # the placement epoch the room is held under (docs/ownership.md)
        self.sockets = set()  # the LiveConsumers of the room
        self.inbox = []  # the messages pushed to the room, for the tests
        self.moves = 0  # the room's game state: how many moves were made...
        self.last = []  # ...and the last LAST_MOVES_KEPT of them ({"n", "from", "data"})
        self.frozen_by = None  # the handoff id that exported the room: its moves wait (rooms/handoff.py)


ROOMS = {}
LOCK = threading.Lock()
INBOX_KEPT = 50  # the latest pushes of a room, kept for the tests (a real app keeps its own state)
LAST_MOVES_KEPT = 20
MOVE_DATA_MAX_BYTES = 1024  # a larger move's data is not kept (nor carried): the blob stays small
FENCES = {}  # room -> the highest epoch handed off from here: anything under it is refused


def note_epoch(room, epoch):
    """The room's state under this epoch; None when the epoch is older than the one it is held under.

    A newer epoch for a room with no sockets here means it may have moved away and back: the copy
    here is stale and starts again. With sockets here, the placement was written again in place.
    Epoch 0 (no stored placement: the store was unreachable) is neither newer nor older. An epoch a
    handoff released here (the epoch fence) is refused like an older one.
    """
    with LOCK:
        held = ROOMS.get(room)
        if fenced(room, epoch):
            return None
        if held is None:
            ROOMS[room] = held = Room(epoch)
        elif epoch and epoch < held.epoch:
            return None
        elif epoch > held.epoch:
            if not held.sockets and held.frozen_by is None:
                ROOMS[room] = held = Room(epoch)
            else:
                held.epoch = epoch
        return held


def join(room, consumer):
    with LOCK:
        ROOMS.setdefault(room, Room(0)).sockets.add(consumer)
        return len(ROOMS[room].sockets)


def leave(room, consumer):
    with LOCK:
        held = ROOMS.get(room)
        if held is not None:
            held.sockets.discard(consumer)


def fenced(room, epoch):
    """Whether `epoch` of `room` was handed off from here: its sockets and pushes belong elsewhere."""
    return bool(epoch) and FENCES.get(room, 0) >= epoch


def record_move(room, session, data):
    """The number of the move an event became; None while a handoff has the room frozen, or after
    it released the room (its sockets are closing)."""
    with LOCK:
        held = ROOMS.get(room)
        if held is None or held.frozen_by is not None:
            return None
        held.moves += 1
        small = len(json.dumps(data)) <= MOVE_DATA_MAX_BYTES
        held.last.append({"n": held.moves, "from": session[:64], "data": data if small else None})
        del held.last[:-LAST_MOVES_KEPT]
        return held.moves


async def push(room, frame):
    """Sends `frame` to every socket of the room (kept in its inbox); how many it went to."""
    with LOCK:
        held = ROOMS.get(room)
        if held is not None:
            held.inbox.append(frame)
            del held.inbox[:-INBOX_KEPT]
    return await send_room(room, frame)


async def send_room(room, frame):
    """Sends `frame` to every socket of the room; how many it went to."""
    with LOCK:
        held = ROOMS.get(room)
        sockets = list(held.sockets) if held else []
    text = json.dumps(frame)
    sent = 0
    for consumer in sockets:
        try:
            await consumer.send(text_data=text)
            sent += 1
        except Exception:  # a socket closing meanwhile: not counted
            pass
    return sent


def snapshot(room):
    with LOCK:
        held = ROOMS.get(room)
        if held is None:
            return {"room": room, "epoch": None, "sockets": 0, "inbox": [], "moves": 0, "last": [], "frozen": False}
        return {
            "room": room, "epoch": held.epoch, "sockets": len(held.sockets), "inbox": list(held.inbox),
            "moves": held.moves, "last": list(held.last), "frozen": held.frozen_by is not None,
        }
