"""The ASGI application daphne runs: one process per roomgate backend, rooms in its memory.

    daphne -b 0.0.0.0 -p 8000 liveapp.asgi:application
"""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "liveapp.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi = get_asgi_application()  # loads the apps before the consumers are imported

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path  # noqa: E402

from rooms.consumers import LiveConsumer  # noqa: E402

# ROOMGATE: roomgate_kit's parts of the application (docs/python-kit.md)
from roomgate_kit.fence import RoomOwnerMiddleware  # noqa: E402
from roomgate_kit.health import with_health  # noqa: E402
from roomgate_kit.pins import ForwardedPrefixMiddleware  # noqa: E402
from roomgate_kit.proofs import default_verifier  # noqa: E402
from rooms.state import ROOMS  # noqa: E402

default_verifier()  # ROOMGATE: ROOMGATE_BACKEND_ID and _KEYS read now: a malformed key stops the process here

# The app's own routes: Django for HTTP, the consumer for the socket.
app = ProtocolTypeRouter(
    {
        "http": django_asgi,
        # The Origin of a handshake must be one of ALLOWED_HOSTS (roomgate passes it unchanged).
        "websocket": AllowedHostsOriginValidator(URLRouter([path("ws/live/", LiveConsumer.as_asgi())])),
    }
)

# ROOMGATE: with_health answers roomgate's health.path (/healthz) before Django; outermost after it,
# the per-tab prefix roomgate stripped (X-Forwarded-Prefix: /r/ROOM) becomes the script prefix, so
# the page's URLs and its socket path keep the tab in its room; then each room's epoch and the
# epoch fence (docs/python-kit.md).
application = with_health(ForwardedPrefixMiddleware(RoomOwnerMiddleware(app, ROOMS)))
