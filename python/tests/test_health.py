"""roomgate_kit.health: the health path answered before the app; everything else reaches it."""
from conftest import run
from roomgate_kit.health import with_health


def call(app, scope):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    run(app(scope, receive, send))
    return sent


def test_the_health_path_is_answered_and_the_app_never_sees_it():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["path"])
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b"bad host"})

    wrapped = with_health(app)
    answer = call(wrapped, {"type": "http", "method": "GET", "path": "/healthz", "headers": [(b"host", b"10.0.0.5:8000")]})
    assert answer[0]["status"] == 200 and answer[1]["body"] == b"ok"
    assert call(wrapped, {"type": "http", "method": "HEAD", "path": "/healthz", "headers": []})[1]["body"] == b""
    assert seen == []
    # Any other path, another method, another scope type: the app's.
    assert call(wrapped, {"type": "http", "method": "GET", "path": "/healthz/x", "headers": []})[0]["status"] == 400
    assert call(wrapped, {"type": "http", "method": "POST", "path": "/healthz", "headers": []})[0]["status"] == 400
    assert seen == ["/healthz/x", "/healthz"]


def test_other_paths_can_be_named():
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    wrapped = with_health(app, paths=("/livez", "/healthz"))
    assert call(wrapped, {"type": "http", "method": "GET", "path": "/livez", "headers": []})[0]["status"] == 200
    assert call(wrapped, {"type": "http", "method": "GET", "path": "/other", "headers": []})[0]["status"] == 404
