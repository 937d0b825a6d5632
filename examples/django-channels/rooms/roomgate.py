"""What this app does for roomgate beyond roomgate_kit (docs/django.md, docs/python-kit.md):

- with_health: GET /healthz answered by the ASGI application itself, before Django (no
  ALLOWED_HOSTS check, no middleware, no database), for roomgate's health.path;
- client_address: the client's address as djust reads it (DJUST_TRUSTED_PROXY_COUNT).

The proofs, the ownership fence, the push receiver and the handoff hooks are roomgate_kit's.
"""
from django.conf import settings

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


def client_address(forwarded_for, peer):
    """djust's rule: the Nth address from the end of X-Forwarded-For, N = DJUST_TRUSTED_PROXY_COUNT."""
    count = getattr(settings, "DJUST_TRUSTED_PROXY_COUNT", 0)
    chain = [a.strip() for a in (forwarded_for or "").split(",") if a.strip()]
    if count > 0 and len(chain) >= count:
        return chain[-count]
    return peer
