"""What this app does for roomgate, in one place (docs/django.md):

- with_health: GET /healthz answered by the ASGI application itself, before Django (no
  ALLOWED_HOSTS check, no middleware, no database), for roomgate's health.path;
- owner_of_*: the room and placement epoch roomgate routed a request or a handshake by
  (X-Roomgate-Room, X-Roomgate-Epoch; docs/ownership.md), and room_owner_middleware, which notes
  the epoch of every page request;
- client_address: the client's address as djust reads it (DJUST_TRUSTED_PROXY_COUNT);
- verify_push: roomgate's proof on a push or a handoff call (docs/push.md, "Verifying a call").
"""
import asyncio
import hashlib
import hmac
import re
import threading
import time

from django.conf import settings
from django.utils.decorators import sync_and_async_middleware

from . import state

HEALTH_PATHS = {"/healthz"}


def with_health(app):
    """Answers the health path on the event loop; everything else goes to `app`."""

    async def application(scope, receive, send):
        if scope["type"] == "http" and scope.get("path") in HEALTH_PATHS:
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        await app(scope, receive, send)

    return application


# roomgate validates the key against room.pattern before sending it; the app checks it again
# (any peer could reach the backend directly) with the same default pattern.
ROOM_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def _owner(room, epoch):
    if not room or not ROOM_KEY.match(room):
        return None, 0
    return room, int(epoch) if epoch and epoch.isdigit() else 0


def owner_of_request(request):
    """(room, epoch) roomgate routed this request by; (None, 0) without a room key."""
    return _owner(request.headers.get("X-Roomgate-Room"), request.headers.get("X-Roomgate-Epoch"))


def scope_headers(scope):
    """A handshake's headers by lower-case name (the last of a repeated one)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def owner_of_scope(scope):
    """(room, epoch) of a WebSocket handshake (scope["headers"] carries the same fields)."""
    h = scope_headers(scope)
    return _owner(h.get("x-roomgate-room"), h.get("x-roomgate-epoch"))


def client_address(forwarded_for, peer):
    """djust's rule: the Nth address from the end of X-Forwarded-For, N = DJUST_TRUSTED_PROXY_COUNT."""
    count = getattr(settings, "DJUST_TRUSTED_PROXY_COUNT", 0)
    chain = [a.strip() for a in (forwarded_for or "").split(",") if a.strip()]
    if count > 0 and len(chain) >= count:
        return chain[-count]
    return peer


def _note(request):
    if request.path.startswith("/_roomgate/"):
        return  # roomgate's own calls (push, handoff) name a room without being one of its requests
    room, epoch = owner_of_request(request)
    request.room_state = state.note_epoch(room, epoch) if room else None


@sync_and_async_middleware
def room_owner_middleware(get_response):
    """Notes each page request's room epoch; request.room_state is the room (None: no room, or an older epoch)."""
    if asyncio.iscoroutinefunction(get_response):

        async def middleware(request):
            _note(request)
            return await get_response(request)

    else:

        def middleware(request):
            _note(request)
            return get_response(request)

    return middleware


REPLAY_WINDOW_S = 60
_seen = {}  # matched signature -> when it may be forgotten (past the replay window)
_seen_lock = threading.Lock()


def verify_push(headers, body, purpose):
    """None when the call carries roomgate's proof made for this backend with one of its keys, else why not."""
    keys, me = settings.ROOMGATE_BACKEND_KEYS, settings.ROOMGATE_BACKEND_ID
    timestamp, signature = headers.get("X-Roomgate-Timestamp"), headers.get("X-Roomgate-Signature")
    if not keys or not timestamp or not signature:
        return "unsigned"
    if headers.get("X-Roomgate-Destination") != me:
        return "wrong-destination"  # made for another backend: never taken here
    if not re.fullmatch(r"[0-9]{1,12}", timestamp) or abs(time.time() - int(timestamp)) > REPLAY_WINDOW_S:
        return "stale"
    text = "\n".join([
        "roomgate-call-v2", purpose, me, headers.get("X-Roomgate-Message-Id", ""), headers.get("X-Roomgate-Room", ""),
        headers.get("X-Roomgate-Epoch", ""), headers.get("X-Roomgate-Sender", ""), timestamp, hashlib.sha256(body).hexdigest(),
    ])
    # Bytes on both sides: compare_digest refuses str with non-ASCII characters.
    offered = [s.strip().partition(":")[2].encode("utf-8", "replace") for s in signature.split(",") if s.strip().startswith("v2=")]
    wanted = [hmac.new(k.encode(), text.encode(), hashlib.sha256).hexdigest().encode() for k in keys]
    matched = next((w for w in wanted for o in offered if hmac.compare_digest(o, w)), None)
    if matched is None:
        return "bad-signature"
    now = time.time()
    with _seen_lock:
        for proof in [p for p, until in _seen.items() if until < now]:
            del _seen[proof]
        # Keyed on the signature that matched, not the header's text (which a replay can vary).
        if matched in _seen:
            return "replayed"
        _seen[matched] = now + 2 * REPLAY_WINDOW_S
    return None
