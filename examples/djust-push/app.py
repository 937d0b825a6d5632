"""A djust-shaped Django Channels app behind roomgate, on roomgate_kit (docs/python-kit.md), in one file.

    cd examples/djust-push && daphne -b 127.0.0.1 -p 8101 app:application
        (ROOMGATE_BACKEND_ID and ROOMGATE_BACKEND_KEYS as `roomgate backend-key ID` prints them)
    python3 app.py send http://gateway:8080 ROOM '{"type": "announce"}' --token T [--sender job:x]

The app speaks djust's protocol (docs/python-kit.md, "The djust-shaped example"): its socket at
/ws/live/ greets with {"type": "connect"}, the page mounts its view ({"type": "mount", "url": ...},
answered with the view's version 1), and every click ({"type": "event", "ref": n}) sends each
socket of the room a patch whose `version` follows that socket's last one. While the socket is closed, djust POSTs
the click to the page's URL with X-Djust-Event and checks that the answer's version follows the
socket's: the view (its version) is kept per page session (the djust_session cookie) in the room.

What roomgate_kit gives it: the room and epoch every request and socket was routed by, the epoch
fence, the push receiver (a push lands in the room's inbox), and the handoff hooks with resume: the
room's state (its clicks, each session's view version, the inbox) and each socket's own state (its
session) travel in the export, a resumed socket goes on with no greeting, and the versions continue
on the new process, through the socket or the HTTP fallback. roomgate-specific code: the 59
lines marked `# rg`.
"""
import asyncio
import json
import os
import re
import secrets
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))  # rg: or pip install ./python

import django  # noqa: E402
from django.conf import settings  # noqa: E402

settings.configure(DEBUG=False, SECRET_KEY="example-only-not-secret", ROOT_URLCONF=__name__, ALLOWED_HOSTS=["*"], INSTALLED_APPS=[], MIDDLEWARE=[])
django.setup()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.http import HttpResponse, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402

from roomgate_kit import handoff, push  # noqa: E402  # rg
from roomgate_kit.fence import CLOSE_WRONG_ROOM, FencedConsumerMixin, RoomOwnerMiddleware  # noqa: E402  # rg
from roomgate_kit.proofs import default_verifier  # noqa: E402  # rg
from roomgate_kit.rooms import RoomTable  # noqa: E402  # rg

GAME_URL = re.compile(r"/game/([A-Za-z0-9_.:-]{1,128})/")
SESSION = re.compile(r"[A-Za-z0-9_-]{16,64}")
MOVING = {"type": "error", "error": "room-moving", "message": "the room is moving to another server"}


class Game:
    """A room's state, shared by its views: clicks, each page session's view version, pushes received."""

    def __init__(self, clicks=0, views=None, inbox=None):
        self.clicks, self.views, self.inbox = clicks, views or {}, inbox or []


GAMES = {}
ROOMS = RoomTable(on_drop=lambda room: GAMES.pop(room, None))  # rg: the rooms held here, their epochs
ORDER = asyncio.Lock()  # one click's patches all go out before the next's: each socket's versions in order


def session_of(scope):
    for part in dict(scope.get("headers", [])).get(b"cookie", b"").decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "djust_session" and SESSION.fullmatch(value):
            return value
    return None


async def click(room, by_session, reply_to=None, ref=None, fresh=False):
    """Applies a click: each mounted socket of the room gets a patch with its view's next version,
    the clicking socket's (`reply_to`) carrying the event's ref; None while a handoff has the room
    frozen, else (clicks, the clicking session's new version). `fresh`: a session the room has no
    view of gets a fresh one (version 1; without a session, 1 and nothing kept)."""
    async with ORDER:
        with ROOMS.lock:  # rg: the lock the export takes
            if not ROOMS.live(room):  # rg: frozen by a handoff: never applied, never half applied
                return None  # rg
            game = GAMES.setdefault(room, Game())
            game.clicks += 1
            sockets = [s for s in ROOMS.sockets(room) if s.session in game.views and s.session != by_session]  # rg: ROOMS.sockets
            patches = [(s, {"type": "patch", "version": bump(game, s.session), "clicks": game.clicks}) for s in sockets]
            if fresh and by_session is not None and by_session not in game.views:
                game.views[by_session] = 0  # a fresh view: this click's answer is its version 1
            mine = bump(game, by_session) if by_session in game.views else (1 if fresh else None)
        if reply_to is not None:
            patches.insert(0, (reply_to, {"type": "patch", "ref": ref, "version": mine, "clicks": game.clicks}))
        for s, patch in patches:
            await s.send_json(patch)
        return game.clicks, mine


def frame(text):
    """A client's frame: a JSON object, or None for anything else (never an error)."""
    try:
        msg = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


def bump(game, session):
    game.views[session] += 1
    return game.views[session]


class LiveConsumer(FencedConsumerMixin, AsyncWebsocketConsumer):  # rg: the mixin: room, epoch, fence, resume
    rooms = ROOMS  # rg
    session = None

    async def connect(self):
        await self.accept()
        await self.send_json({"type": "connect", "session_id": secrets.token_hex(8)})

    async def resume_socket(self, state):  # rg: a socket roomgate moved here goes on: no greeting
        self.session = state["session"]  # rg: its view (and version) came in the room's state

    async def receive(self, text_data=None, bytes_data=None):
        msg = frame(text_data)
        kind = msg.get("type") if msg else None
        if kind == "ping":
            await self.send_json({"type": "pong"})
        elif kind == "mount":
            await self.mount(msg)
        elif kind == "event" and self.session is not None:
            await self.event(msg)
        else:
            await self.send_json({"type": "error", "message": "mount, then send events"})

    async def mount(self, msg):
        found = GAME_URL.search(msg.get("url") if isinstance(msg.get("url"), str) else "")
        refused = self.mount_refusal(found.group(1) if found else None)  # rg: not the routed room
        if refused:  # rg
            await self.send_json({"type": "error", "message": refused})  # rg
            return await self.close(code=CLOSE_WRONG_ROOM)  # rg: 4400 once, no reconnect storm
        session = session_of(self.scope) or secrets.token_urlsafe(16)
        async with ORDER:  # no patch of this view before its mount answer
            with ROOMS.lock:
                game = GAMES.setdefault(self.room, Game())
                game.views[session] = 1  # a mount starts the view's version sequence again
            self.session = session
            await self.send_json({"type": "mount", "version": 1, "has_ids": True, "clicks": game.clicks, "html": f"<p>{game.clicks} clicks</p>"})

    async def event(self, msg):
        if await click(self.room, self.session, self, msg.get("ref")) is None:
            await self.send_json(dict(MOVING, ref=msg.get("ref")))

    async def send_json(self, value):
        await self.send(text_data=json.dumps(value))


async def game_page(request, room):
    routed = request.scope.get("roomgate") or {}  # rg: the room and epoch roomgate routed by
    if request.method == "POST" and request.headers.get("X-Djust-Event"):
        return await http_event(request, room)
    with ROOMS.lock:
        clicks = GAMES[room].clicks if room in GAMES else 0
    page = HttpResponse(f"<h1>room {room}</h1><p>epoch {routed.get('epoch', 0)}</p><p>{clicks} clicks</p>", content_type="text/html")
    if session_of(request.scope) is None:
        page.set_cookie("djust_session", secrets.token_urlsafe(16), httponly=True, samesite="Lax")
    return page


async def http_event(request, room):
    """djust's HTTP fallback: the click, answered with the version that follows the session's view.
    A page the room has no view of (no cookie, or one this room never saw) is not refused, which
    would lose the click (djust sends it once): it is applied and the page gets a fresh view."""
    session = session_of(request.scope)
    done = await click(room, session, fresh=True)
    if done is None:
        return JsonResponse(MOVING, status=503, headers={"Retry-After": "1"})
    return JsonResponse({"version": done[1], "clicks": done[0]})


def export_room(room):  # rg: the room's state for a handoff
    game = GAMES.get(room) or Game()  # rg
    return json.dumps({"v": 1, "room": room, "clicks": game.clicks, "views": game.views, "inbox": game.inbox[-100:]}).encode()  # rg


def import_room(room, blob, epoch):  # rg: a blob of its own for this room, else False (a 400)
    try:  # rg
        p = json.loads(blob)  # rg
        ok = p["v"] == 1 and p["room"] == room and isinstance(p["clicks"], int) and isinstance(p["inbox"], list)  # rg
        ok = ok and all(SESSION.fullmatch(s) and isinstance(v, int) for s, v in p["views"].items())  # rg
    except (ValueError, TypeError, KeyError, AttributeError):  # rg
        return False  # rg
    if ok:  # rg
        GAMES[room] = Game(p["clicks"], p["views"], p["inbox"])  # rg
    return ok  # rg


async def apply_messages(room, socket_id, messages):  # rg: a held socket's clicks, when its resume failed
    for msg in map(frame, messages):  # rg
        if msg and msg.get("type") == "event":  # rg: what the socket would have done with it
            await click(room, None)  # rg: applied; the socket re-mounts after its close


async def deliver(room, message, meta):  # rg: a push to the room: into its inbox
    with ROOMS.lock:  # rg
        GAMES.setdefault(room, Game()).inbox.append({"id": meta["id"], "sender": meta["sender"], "message": message})  # rg
    return len(ROOMS.sockets(room))  # rg


def state(request, room):
    with ROOMS.lock:
        g = GAMES.get(room)
        held = ROOMS.get(room)
        return JsonResponse({"room": room, "epoch": held.epoch if held else None, "clicks": g.clicks if g else 0, "views": dict(g.views) if g else {}, "inbox": list(g.inbox) if g else []})


hooks = handoff.HandoffHooks(ROOMS, export_room, import_room, apply_messages, export_socket=lambda s: {"session": s.session} if s.session else None)  # rg
urlpatterns = [
    path("game/<str:room>/", game_page),
    path("_roomgate/push", push.django_view(push.PushReceiver(ROOMS, deliver))),  # rg: push.path
    path("_roomgate/handoff/<str:step>", handoff.django_view(hooks)),  # rg: handoff.path
    path("_state/<str:room>/", state),
]
default_verifier()  # rg: the backend's keys read now: a malformed one stops the process here
application = RoomOwnerMiddleware(ProtocolTypeRouter({"http": get_asgi_application(), "websocket": URLRouter([path("ws/live/", LiveConsumer.as_asgi())])}), ROOMS)  # rg


def send(gateway, room, message, token, sender="api"):  # rg: a sender: a push through the gateway
    """Pushes `message` (JSON text) to `room` through the gateway; returns (status, answer)."""  # rg
    req = urllib.request.Request(  # rg
        f"{gateway.rstrip('/')}/_roomgate/api/rooms/{urllib.request.quote(room, safe='')}/messages",  # rg
        data=message.encode(),  # rg
        method="POST",  # rg
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "X-Roomgate-Sender": sender},  # rg
    )  # rg
    try:  # rg
        with urllib.request.urlopen(req, timeout=10) as res:  # rg
            return res.status, json.loads(res.read() or b"{}")  # rg
    except urllib.error.HTTPError as err:  # rg
        return err.code, json.loads(err.read() or b"{}")  # rg


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["send"] and len(args) >= 4 and "--token" in args:
        opts = dict(zip(args[4::2], args[5::2]))
        status, answer = send(args[1], args[2], args[3], opts["--token"], opts.get("--sender", "api"))
        print(json.dumps({"status": status, "answer": answer}))
        sys.exit(0 if status == 202 else 1)
    print(__doc__, file=sys.stderr)
    sys.exit(2)
