"""The rooms this process holds, in its memory: no channel layer, no database. roomgate sends every
page and socket of a room to one process, so this is all the state a room needs.

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


ROOMS = {}
LOCK = threading.Lock()
INBOX_KEPT = 50  # the latest pushes of a room, kept for the tests (a real app keeps its own state)


def note_epoch(room, epoch):
    """The room's state under this epoch; None when the epoch is older than the one it is held under.

    A newer epoch for a room with no sockets here means it may have moved away and back: the copy
    here is stale and starts again. With sockets here, the placement was written again in place.
    Epoch 0 (no stored placement: the store was unreachable) is neither newer nor older.
    """
    with LOCK:
        held = ROOMS.get(room)
        if held is None:
            ROOMS[room] = held = Room(epoch)
        elif epoch and epoch < held.epoch:
            return None
        elif epoch > held.epoch:
            if not held.sockets:
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


async def push(room, frame):
    """Sends `frame` to every socket of the room; how many it went to."""
    with LOCK:
        held = ROOMS.get(room)
        sockets = list(held.sockets) if held else []
        if held is not None:
            held.inbox.append(frame)
            del held.inbox[:-INBOX_KEPT]
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
            return {"room": room, "epoch": None, "sockets": 0, "inbox": []}
        return {"room": room, "epoch": held.epoch, "sockets": len(held.sockets), "inbox": list(held.inbox)}
