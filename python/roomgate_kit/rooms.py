"""The rooms this process holds for roomgate: each room's placement epoch, its sockets, whether a
handoff has it frozen, and the epoch fence (docs/ownership.md, docs/handoff.md).

The app's own state of a room (a game, a document) stays the app's: the table tells it when to
drop it (`on_drop`: a release, or a newer placement of a room with no sockets here). Pages run on
Django's threads, sockets and hooks on the event loop: one re-entrant lock guards the table, and
the app takes the same lock (`table.lock`) where its state changes, checking `table.live(room)`,
so an event is either in an export or refused, never both and never neither.
"""
import threading
from collections import OrderedDict

REMEMBERED = 10_000  # fences kept (the oldest go first): every table a caller can grow is bounded


class Room:
    __slots__ = ("epoch", "sockets", "frozen_by")

    def __init__(self, epoch):
        self.epoch = epoch  # the placement epoch the room is held under
        self.sockets = set()  # the room's sockets here (anything with an async close(code=...))
        self.frozen_by = None  # the handoff id whose export froze the room


def remember(table, key, value, bound=REMEMBERED):
    """Sets `key` as the newest entry of an OrderedDict, dropping the oldest past `bound`."""
    table.pop(key, None)
    table[key] = value
    while len(table) > bound:
        table.popitem(last=False)


class SocketStates:
    """Resume (roomgate_kit.resume): the imported sockets' states, by room and socket id, until each is resumed (once) or the room goes."""

    def __init__(self, remembered=REMEMBERED):
        self.states = OrderedDict()  # (room, socket id) -> (handoff id, epoch, state), oldest first, bounded
        self.remembered = remembered

    def keep(self, room, handoff_id, epoch, sockets):
        for socket_id, state in sockets.items():
            remember(self.states, (room, socket_id), (handoff_id, epoch, state), self.remembered)

    def take(self, room, socket_id, handoff_id, epoch):
        """(True, state) of the socket imported by `handoff_id` under `epoch`, taken out; (False, None)."""
        kept = self.states.get((room, socket_id))
        if kept is None or kept[0] != handoff_id or kept[1] != epoch:
            return False, None
        del self.states[(room, socket_id)]
        return True, kept[2]

    def drop(self, room):
        for key in [k for k in self.states if k[0] == room]:
            del self.states[key]


class RoomTable:
    def __init__(self, on_drop=None, remembered=REMEMBERED):
        self.lock = threading.RLock()
        self.rooms = {}
        self.fences = OrderedDict()  # room -> the highest epoch released from here
        self.remembered = remembered
        self.app_drop = on_drop or (lambda room: None)
        self.resumable = SocketStates(remembered)  # sockets an import brought, until resumed

    def on_drop(self, room):
        """The room's state here is stale: the app drops its own, the table the sockets' states."""
        self.resumable.drop(room)
        self.app_drop(room)

    def fenced(self, room, epoch):
        """Whether `epoch` of `room` was handed off from here: its sockets and pushes belong elsewhere."""
        with self.lock:
            return bool(epoch) and self.fences.get(room, 0) >= epoch

    def note(self, room, epoch):
        """The room under this epoch (held from now on); None when the epoch is older than the one
        it is held under, or released from here (the fence).

        A newer epoch for a room with no sockets here and no freeze is a new placement (it may have
        moved away and back): the copy here is stale, dropped, and the room starts again. With
        sockets here, the placement was written again in place. Epoch 0 (roomgate had no stored
        placement: its store was unreachable) is neither newer nor older.
        """
        with self.lock:
            if self.fenced(room, epoch):
                return None
            held = self.rooms.get(room)
            if held is None:
                held = self.rooms[room] = Room(epoch)
            elif epoch and epoch < held.epoch:
                return None
            elif epoch > held.epoch:
                if not held.sockets and held.frozen_by is None:
                    self.on_drop(room)
                    held = self.rooms[room] = Room(epoch)
                else:
                    held.epoch = epoch
            return held

    def get(self, room):
        with self.lock:
            return self.rooms.get(room)

    def live(self, room):
        """Whether the room's state may change now: held here and not frozen by a handoff."""
        with self.lock:
            held = self.rooms.get(room)
            return held is not None and held.frozen_by is None

    def join(self, room, socket):
        with self.lock:
            self.rooms.setdefault(room, Room(0)).sockets.add(socket)

    def leave(self, room, socket):
        with self.lock:
            held = self.rooms.get(room)
            if held is not None:
                held.sockets.discard(socket)

    def sockets(self, room):
        with self.lock:
            held = self.rooms.get(room)
            return list(held.sockets) if held else []

    def release(self, room, epoch):
        """Fences `epoch` and drops the room; its sockets (to close). The fence first, so a socket
        that arrives while the others close is refused too."""
        with self.lock:
            remember(self.fences, room, max(epoch, self.fences.get(room, 0)), self.remembered)
            held = self.rooms.pop(room, None)
            self.on_drop(room)
            return list(held.sockets) if held else []
