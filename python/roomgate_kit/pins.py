"""Per-tab rooms (docs/per-tab-rooms.md): the signed room pin a page carries, the browser script
that puts it into every WebSocket the page opens, and the ASGI middleware that gives a page the
per-tab path prefix roomgate stripped.

A cookie belongs to the browser, not to the tab: with several tabs of different rooms, a socket
routed by the room cookie reconnects into the room of the tab opened last. A pin is the page's own
room, signed: roomgate reads it (room.pinParam, default ``roomgate_pin``) before the cookie, so
each tab keeps its room through every reconnect. The value is ``room.ts.sig``: ts in seconds,
base 36; sig the base64url HMAC-SHA256 of ``roomgate.pin.v1|room.ts`` keyed with roomgate's first
``cookie.secrets`` entry (whatever the cookie's format: with a Django format that is the app's
SECRET_KEY). roomgate refuses a forged pin with 403, one older than room.pinMaxAgeS with 403 (the
page is reloaded to get a new one), a malformed one with 400.
"""
import base64
import hashlib
import hmac
import ipaddress
import os
import re
import time

from .fence import ROOM_KEY, Headers

PIN_PURPOSE = "roomgate.pin.v1|"
PIN_PARAM = "roomgate_pin"
# The script roomgate serves, by a name whose content never changes (test/python checks both
# values against roomgate's src/pages/room-pin-script.ts).
ROOM_PIN_SCRIPT_PATH = "/_roomgate/room-pin.v1.js"
ROOM_PIN_SCRIPT_SRI = "sha384-ET3mbPb5f3vf0h2XaZlWeISZeLunu+iUDCNuRNXAtSOsDBMeE8t2bH2FZOCku8/F"

_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
# What X-Forwarded-Prefix may say before it becomes a script prefix: roomgate's own per-tab
# prefix shapes (/r/<room>), segments of URL-safe characters, no dot segments.
_PREFIX = re.compile(r"(?:/[A-Za-z0-9_.:~-]+)+")


def _base36(n):
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = _BASE36[d] + out
        if n == 0:
            return out


def sign_pin(room, secret, now=None):
    """The pin of `room` (a valid room key), signed with `secret` (roomgate's first cookie secret)."""
    if not isinstance(room, str) or not ROOM_KEY.fullmatch(room):
        raise ValueError("a room pin needs a valid room key (A-Z a-z 0-9 _ . : -, 1 to 128 characters)")
    if not secret:
        raise ValueError("a room pin needs a secret: roomgate's first cookie.secrets entry")
    payload = f"{room}.{_base36(int(time.time() if now is None else now))}"
    mac = hmac.new(secret.encode("utf-8"), (PIN_PURPOSE + payload).encode("utf-8"), hashlib.sha256).digest()
    return f"{payload}.{base64.urlsafe_b64encode(mac).decode('ascii').rstrip('=')}"


def pin_secret(settings=None):
    """The key pins are signed with: the ROOMGATE_PIN_SECRET setting, else the first of
    ROOMGATE_COOKIE_SECRETS in the environment (as roomgate reads it), else SECRET_KEY (a Django
    cookie format, where cookie.secrets is the app's SECRET_KEY)."""
    if settings is None:
        from django.conf import settings
    configured = getattr(settings, "ROOMGATE_PIN_SECRET", None)
    if configured:
        return configured
    env = os.environ.get("ROOMGATE_COOKIE_SECRETS", "").split(",")[0].strip()
    return env or getattr(settings, "SECRET_KEY", "")


def routed_room(scope):
    """The room roomgate routed this request by (RoomOwnerMiddleware's scope["roomgate"], else X-Roomgate-Room)."""
    noted = scope.get("roomgate") if isinstance(scope, dict) else None
    if isinstance(noted, dict) and noted.get("room"):
        return noted["room"]
    room = Headers(scope.get("headers", [])).get("X-Roomgate-Room") if isinstance(scope, dict) else None
    return room if room and ROOM_KEY.fullmatch(room) else None


def _trusted(client, networks):
    if not client:
        return False
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return False
    return any(address in n for n in networks)


class ForwardedPrefixMiddleware:
    """ASGI: the per-tab path prefix roomgate stripped (X-Forwarded-Prefix, e.g. /r/42) becomes the
    request's root_path, from trusted proxies only (default: this host). Django then builds every
    URL of the page under it (reverse, {% url %}, redirects), so links keep the tab in its room,
    and djust's {% djust_client_config %} (releases with the meta-tag socket path) emits the prefixed socket path
    (/r/42/ws/live/), which roomgate routes by the prefix. Put it outermost, around
    RoomOwnerMiddleware. Never set FORCE_SCRIPT_NAME (it wins over root_path) nor DJUST_WS_PATH
    (a fixed path would lose the prefix); the pin covers djust's fallback to /ws/live/."""

    def __init__(self, app, trusted_proxies=("127.0.0.1/32", "::1/128")):
        self.app = app
        self.networks = [ipaddress.ip_network(n, strict=False) for n in trusted_proxies]

    async def __call__(self, scope, receive, send):
        if scope.get("type") in ("http", "websocket") and _trusted(scope.get("client"), self.networks):
            prefix = Headers(scope.get("headers", [])).get("X-Forwarded-Prefix")
            if prefix:
                prefix = prefix.rstrip("/")
                if _PREFIX.fullmatch(prefix) and "/../" not in f"{prefix}/" and "/./" not in f"{prefix}/":
                    scope = dict(scope, root_path=prefix + scope.get("root_path", ""))
        return await self.app(scope, receive, send)
