"""The room's WebSocket at /ws/live/, shaped like djust's: the server speaks first with
{"type": "connect", ...}; the client then sends {"type": "mount", "url": location.pathname}.

/ws/live/ carries no room in its path: roomgate routes the handshake by the page's room cookie,
the per-tab prefix (/r/ROOM/ws/live/) or ?room=, and says which room in X-Roomgate-Room.
roomgate_kit's FencedConsumerMixin reads it (self.room), refuses what the epoch fence refuses, and
keeps the socket in the room from its handshake on: pushes to the room reach it (state.deliver).

A socket without a room key (no cookie, no prefix, no ?room=) went to roomgate's least-loaded
backend (room.noRoom), which need not be the room's: mounting a room on it could run the room in
two processes. It is refused (close 4400) and the page says to reload.

An event is a move of the room's game (state.record_move): acknowledged to the room by a `patch`
carrying its number, or refused with an error the client sees while a handoff has the room frozen
(rooms/handoff.py): the client sends it again once it has reconnected to the room's new process.
"""
import json
import re
import secrets

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from roomgate_kit.fence import CLOSE_WRONG_ROOM, FencedConsumerMixin, Headers  # ROOMGATE
from roomgate_kit.groups import RoomGroupMixin  # ROOMGATE: the room's group, with a channel layer

from . import state

GAME_URL = re.compile(r"/game/([^/?#]+)/")
ROOM_MOVING = {"type": "error", "error": "room-moving", "retry": True, "message": "the room is moving to another server: send it again after the reconnect"}  # ROOMGATE


def client_address(forwarded_for, peer):
    """djust's rule (djust applies it itself): the Nth address from the end of X-Forwarded-For,
    N = DJUST_TRUSTED_PROXY_COUNT (settings.py says why 1 behind roomgate)."""
    count = getattr(settings, "DJUST_TRUSTED_PROXY_COUNT", 0)
    chain = [a.strip() for a in (forwarded_for or "").split(",") if a.strip()]
    if count > 0 and len(chain) >= count:
        return chain[-count]
    return peer


class LiveConsumer(RoomGroupMixin, FencedConsumerMixin, AsyncWebsocketConsumer):  # ROOMGATE: the fence, self.room, its group
    rooms = state.ROOMS  # ROOMGATE: roomgate_kit's table: the mixin joins this socket to self.room
    mounted = False

    async def connect(self):
        await self.accept()
        self.session_id = secrets.token_hex(12)
        h = Headers(self.scope.get("headers", []))
        peer = (self.scope.get("client") or [None])[0]
        await self.send_json({
            "type": "connect",
            "session_id": self.session_id,
            "backend": settings.BACKEND_ID,
            "room": self.room,
            "client": client_address(h.get("x-forwarded-for"), peer),
        })

    async def receive(self, text_data=None, bytes_data=None):
        try:
            msg = json.loads(text_data or "")
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            await self.send_json({"type": "error", "message": "expected a JSON object"})
            return
        kind = msg.get("type")
        if kind == "ping":
            await self.send_json({"type": "pong"})
        elif kind == "mount":
            await self.mount(msg)
        elif kind == "event":
            await self.event(msg.get("data"))
        else:
            await self.send_json({"type": "error", "message": "unknown message type"})

    async def mount(self, msg):
        url = msg.get("url") if isinstance(msg.get("url"), str) else ""
        found = GAME_URL.search(url)
        wanted = msg.get("room") if isinstance(msg.get("room"), str) else (found.group(1) if found else None)
        # ROOMGATE: a mount of another room than the socket was routed by would split the room.
        refused = self.mount_refusal(wanted)  # no room key, or another room than the handshake's
        if refused:
            await self.send_json({"type": "error", "message": refused})
            await self.close(code=CLOSE_WRONG_ROOM)  # 4400 once: the page does not reconnect after it
            return

        self.mounted = True
        held = state.snapshot(self.room)
        # The backend and epoch the room is held under now: the page's "Served by" follows them after a move.
        await self.send_json({"type": "mounted", "room": self.room, "backend": settings.BACKEND_ID, "epoch": held["epoch"], "members": held["sockets"], "moves": held["moves"]})

    # ROOMGATE (all of it, the app's part too): a frozen room refuses the event (docs/handoff.md).
    async def event(self, data):
        if not self.mounted:
            await self.send_json({"type": "error", "message": "mount before sending events"})
            return
        move = state.record_move(self.room, self.session_id, data)
        if move is None:
            await self.send_json(ROOM_MOVING)  # never dropped silently
            return
        await state.send_room(self.room, {"type": "patch", "room": self.room, "from": self.session_id, "data": data, "move": move})

    async def send_json(self, value):
        await self.send(text_data=json.dumps(value))
