"""roomgate's HTTP health check of an app process (health.path), answered by the ASGI application
itself, before Django: no ALLOWED_HOSTS check (the check's Host is the backend's address), no
middleware, no database, and an answer from the event loop, which is what must be alive
(docs/django.md). roomgate answers /healthz and /readyz to the platform itself; this is the app's.
"""


def with_health(app, paths=("/healthz",)):
    """ASGI: a GET or HEAD of one of `paths` answers 200 "ok" on the event loop; everything else goes to `app`."""
    paths = frozenset(paths)

    async def application(scope, receive, send):
        if scope["type"] == "http" and scope.get("path") in paths and scope.get("method", "GET") in ("GET", "HEAD"):
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"ok" if scope.get("method") != "HEAD" else b""})
            return
        await app(scope, receive, send)

    return application
