"""A djust-style Django backend for roomgate's cross-room push, in one file (docs/push.md).

    python3 app.py serve --port 8101            # a backend: pages, the push receiver, /_state/ROOM/
    python3 app.py send http://gateway:8080 ROOM '{"type": "announce"}' --token T [--sender job:x]

What it shows:
- RoomOwnerMiddleware keeps each room's placement epoch (X-Roomgate-Epoch, docs/ownership.md):
  a larger epoch for a room with no live sockets here means the room may have moved away and
  back, so the in-memory copy is dropped; with live sockets it was placed again in place (kept).
- push_receiver is push.path: it first checks roomgate's proof (verify_push: an HMAC under the
  backend's own key, ROOMGATE_BACKEND_KEYS as `roomgate backend-key ID` prints it; an unsigned,
  stale, badly signed, replayed or another backend's push gets 403), then hands the message to the room's
  in-memory state (here an inbox), refused with 409 under an epoch older than the one the room is
  held under; a fan-out (X-Roomgate-Fanout: 1) carries several rooms at once.
- send() is a sender: a background job or another room reaching a room through the gateway.
Standard library and Django only (Django 3.2+); the server is wsgiref's, for the example.
"""
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="example-only-not-secret",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    MIDDLEWARE=[__name__ + ".RoomOwnerMiddleware"],
    INSTALLED_APPS=[],
)
django.setup()

from django.http import HttpResponse, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402


class Room:
    """A room's in-memory state, as a djust LiveView process would hold it."""

    def __init__(self, epoch):
        self.epoch = epoch
        self.inbox = []
        self.live_sockets = 0  # a real app counts its WebSocket consumers of the room


ROOMS = {}
LOCK = threading.Lock()


def note_epoch(room, epoch):
    """The room's state under this request's epoch; None when the epoch is older than the one held."""
    with LOCK:
        held = ROOMS.get(room)
        if held is None:
            ROOMS[room] = held = Room(epoch)
        elif epoch and epoch < held.epoch:
            return None
        elif epoch > held.epoch:
            if held.live_sockets == 0:
                # Placed again while nobody was here: the room may have run elsewhere meanwhile.
                ROOMS[room] = held = Room(epoch)
            else:
                held.epoch = epoch  # written again in place (the store lost its data): keep
        return held


class RoomOwnerMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        room = request.headers.get("X-Roomgate-Room")
        if room and not request.headers.get("X-Roomgate-Fanout"):
            request.room_state = note_epoch(room, int(request.headers.get("X-Roomgate-Epoch", "0") or 0))
        return self.get_response(request)


def game(request, room):
    state = getattr(request, "room_state", None)
    return HttpResponse(f"<h1>room {room}</h1><p>epoch {state.epoch if state else 0}</p>", content_type="text/html")


# This backend's own keys (`roomgate backend-key ID`; never roomgate's call secrets): any of them
# verifies a push made for this backend, whose id in roomgate's backends list is ROOMGATE_BACKEND_ID.
BACKEND_KEYS = [s.strip() for s in os.environ.get("ROOMGATE_BACKEND_KEYS", "").split(",") if s.strip()]
BACKEND_ID = os.environ.get("ROOMGATE_BACKEND_ID", "")
REPLAY_WINDOW_S = 60
SEEN_PROOFS = {}  # signature -> time it may be forgotten (past the replay window)


def verify_push(request, purpose):
    """None when the push carries roomgate's proof, else why not (docs/push.md, "Verifying a call")."""
    h = request.headers
    timestamp, signature = h.get("X-Roomgate-Timestamp"), h.get("X-Roomgate-Signature")
    if not BACKEND_KEYS or not timestamp or not signature:
        return "unsigned"
    if h.get("X-Roomgate-Destination") != BACKEND_ID:
        return "wrong-destination"  # made for another backend: never taken here
    if not re.fullmatch(r"[0-9]{1,12}", timestamp) or abs(time.time() - int(timestamp)) > REPLAY_WINDOW_S:
        return "stale"
    text = "\n".join([
        "roomgate-call-v2", purpose, BACKEND_ID, h.get("X-Roomgate-Message-Id", ""), h.get("X-Roomgate-Room", ""),
        h.get("X-Roomgate-Epoch", ""), h.get("X-Roomgate-Sender", ""), timestamp, hashlib.sha256(request.body).hexdigest(),
    ])
    # Bytes on both sides: compare_digest refuses str with non-ASCII characters (a 500, not a 403).
    offered = [s.strip().partition(":")[2].encode("utf-8", "replace") for s in signature.split(",") if s.strip().startswith("v2=")]
    wanted = [hmac.new(k.encode(), text.encode(), hashlib.sha256).hexdigest().encode() for k in BACKEND_KEYS]
    matched = next((w for w in wanted for o in offered if hmac.compare_digest(o, w)), None)
    if matched is None:
        return "bad-signature"
    now = time.time()
    with LOCK:
        for proof in [p for p, until in SEEN_PROOFS.items() if until < now]:
            del SEEN_PROOFS[proof]
        # Keyed on the signature that matched, not the header's text (which a replay can vary).
        if matched in SEEN_PROOFS:
            return "replayed"
        SEEN_PROOFS[matched] = now + 2 * REPLAY_WINDOW_S
    return None


def deliver(room, epoch, message, sender, message_id):
    state = note_epoch(room, epoch)
    if state is None:
        return False
    with LOCK:
        state.inbox.append({"id": message_id, "sender": sender, "message": message})
    return True


@csrf_exempt
def push_receiver(request):
    if request.method != "POST":
        return HttpResponse(status=405)
    refused = verify_push(request, "push-fanout" if request.headers.get("X-Roomgate-Fanout") == "1" else "push")
    if refused:
        return HttpResponse(f"push refused: {refused}\n", status=403)
    try:
        body = json.loads(request.body)
    except ValueError:
        return HttpResponse("not JSON\n", status=400)
    sender = request.headers.get("X-Roomgate-Sender", "")
    message_id = request.headers.get("X-Roomgate-Message-Id", "")
    if request.headers.get("X-Roomgate-Fanout") == "1":
        for r in body.get("rooms", []):
            deliver(r["room"], int(r["epoch"]), body.get("message"), sender, message_id)
        return HttpResponse(status=204)
    room = request.headers.get("X-Roomgate-Room")
    if not room:
        return HttpResponse("no room\n", status=409)
    if not deliver(room, int(request.headers.get("X-Roomgate-Epoch", "0") or 0), body, sender, message_id):
        return HttpResponse("this room is held under a newer epoch\n", status=409)
    return HttpResponse(status=204)


def state(request, room):
    with LOCK:
        s = ROOMS.get(room)
        return JsonResponse({"room": room, "epoch": s.epoch if s else None, "inbox": list(s.inbox) if s else []})


urlpatterns = [
    path("game/<str:room>/", game),
    path("_roomgate/push", push_receiver),
    path("_state/<str:room>/", state),
]


def send(gateway, room, message, token, sender="api"):
    """Pushes `message` (JSON text) to `room` through the gateway; returns (status, answer)."""
    req = urllib.request.Request(
        f"{gateway.rstrip('/')}/_roomgate/api/rooms/{urllib.request.quote(room, safe='')}/messages",
        data=message.encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "X-Roomgate-Sender": sender},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, json.loads(res.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def serve(port):
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from django.core.wsgi import get_wsgi_application

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    server = make_server("127.0.0.1", port, get_wsgi_application(), handler_class=Quiet)
    print(json.dumps({"event": "listening", "port": server.server_port}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["serve"]:
        serve(int(args[args.index("--port") + 1]) if "--port" in args else 8101)
    elif args[:1] == ["send"] and len(args) >= 4 and "--token" in args:
        opts = dict(zip(args[4::2], args[5::2]))
        status, answer = send(args[1], args[2], args[3], opts["--token"], opts.get("--sender", "api"))
        print(json.dumps({"status": status, "answer": answer}))
        sys.exit(0 if status == 202 else 1)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
