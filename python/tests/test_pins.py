"""Per-tab rooms (roomgate_kit.pins): the pin as roomgate verifies it (fixtures/room-pins.json is
written by roomgate's own signer: test/python/kit.test.ts), the template tag, and the forwarded
prefix middleware."""
import json
from pathlib import Path

import pytest
from django.template import Context, Template
from django.test import override_settings

from conftest import run
from roomgate_kit import pins

VECTORS = json.loads((Path(__file__).parent / "fixtures" / "room-pins.json").read_text())


def test_pins_are_what_roomgate_signs():
    for v in VECTORS["pins"]:
        assert pins.sign_pin(v["room"], v["secret"], now=v["nowS"]) == v["pin"]


def test_a_pin_needs_a_room_key_and_a_secret():
    with pytest.raises(ValueError):
        pins.sign_pin("a b", "s" * 32)
    with pytest.raises(ValueError):
        pins.sign_pin("", "s" * 32)
    with pytest.raises(ValueError):
        pins.sign_pin("42", "")


def test_the_script_constants_are_roomgates():
    assert pins.ROOM_PIN_SCRIPT_PATH == VECTORS["scriptPath"]
    assert pins.ROOM_PIN_SCRIPT_SRI == VECTORS["scriptSri"]


def test_the_secret_comes_from_the_setting_then_the_environment_then_secret_key(monkeypatch):
    class S:
        SECRET_KEY = "django-secret-key-0123456789"

    monkeypatch.delenv("ROOMGATE_COOKIE_SECRETS", raising=False)
    assert pins.pin_secret(S()) == S.SECRET_KEY
    monkeypatch.setenv("ROOMGATE_COOKIE_SECRETS", "first-secret-0123456789, second")
    assert pins.pin_secret(S()) == "first-secret-0123456789"
    S.ROOMGATE_PIN_SECRET = "setting-secret-0123456789"
    assert pins.pin_secret(S()) == "setting-secret-0123456789"


class _Request:
    def __init__(self, scope):
        self.scope = scope


def _render(text, **context):
    return Template("{% load roomgate %}" + text).render(Context(context))


@override_settings(ROOMGATE_PIN_SECRET="tag-secret-0123456789abcdef")
def test_the_tag_renders_the_pin_of_the_routed_room_and_the_script_with_its_sri(monkeypatch):
    monkeypatch.setattr(pins.time, "time", lambda: 1_800_000_000)
    html = _render("{% roomgate_pin %}", request=_Request({"headers": [(b"x-roomgate-room", b"42")]}))
    pin = pins.sign_pin("42", "tag-secret-0123456789abcdef", now=1_800_000_000)
    assert f'<meta name="roomgate-pin" content="{pin}" data-param="roomgate_pin">' in html
    assert f'<script src="/_roomgate/room-pin.v1.js" integrity="{pins.ROOM_PIN_SCRIPT_SRI}" crossorigin="anonymous"></script>' in html
    # The room the middleware noted wins over the header; an explicit room over both; a nonce for a CSP.
    noted = _render("{% roomgate_pin %}", request=_Request({"roomgate": {"room": "7"}, "headers": [(b"x-roomgate-room", b"42")]}))
    assert pins.sign_pin("7", "tag-secret-0123456789abcdef", now=1_800_000_000) in noted
    explicit = _render('{% roomgate_pin "9" nonce="n0nce" %}', request=_Request({}))
    assert pins.sign_pin("9", "tag-secret-0123456789abcdef", now=1_800_000_000) in explicit and 'nonce="n0nce"' in explicit


@override_settings(ROOMGATE_PIN_SECRET="tag-secret-0123456789abcdef")
def test_no_room_renders_nothing_and_a_forged_room_header_is_not_signed():
    assert _render("{% roomgate_pin %}", request=_Request({})) == ""
    assert _render("{% roomgate_pin %}") == ""
    assert _render("{% roomgate_pin %}", request=_Request({"headers": [(b"x-roomgate-room", b"a b")]})) == ""


def _scope_seen(middleware, scope):
    seen = {}

    async def app(s, receive, send):
        seen.update(s)

    run(middleware(app)(scope, None, None))
    return seen


def test_the_forwarded_prefix_becomes_the_root_path_from_a_trusted_proxy_only():
    mw = pins.ForwardedPrefixMiddleware
    scope = {"type": "http", "path": "/game/", "client": ("127.0.0.1", 5000), "headers": [(b"x-forwarded-prefix", b"/r/42")]}
    assert _scope_seen(mw, scope)["root_path"] == "/r/42"
    assert _scope_seen(mw, dict(scope, type="websocket", root_path="/app"))["root_path"] == "/r/42/app"
    assert "root_path" not in _scope_seen(mw, dict(scope, client=("203.0.113.9", 5000)))
    assert _scope_seen(lambda app: mw(app, trusted_proxies=["203.0.113.0/24"]), dict(scope, client=("203.0.113.9", 5000)))["root_path"] == "/r/42"
    for bad in (b"/r/../admin", b"r/42", b"/r/4 2", b"//evil.example", b"/r/%2e%2e"):
        assert "root_path" not in _scope_seen(mw, dict(scope, headers=[(b"x-forwarded-prefix", bad)])), bad
    assert "root_path" not in _scope_seen(mw, dict(scope, type="lifespan"))


def test_with_the_prefix_django_builds_the_pages_urls_under_it():
    from django.core.handlers.asgi import ASGIRequest
    from django.urls import set_script_prefix, get_script_prefix

    seen = _scope_seen(pins.ForwardedPrefixMiddleware, {"type": "http", "method": "GET", "path": "/game/", "query_string": b"", "client": ("127.0.0.1", 1), "headers": [(b"x-forwarded-prefix", b"/r/42/")]})
    request = ASGIRequest(seen, None)
    assert (request.path, request.path_info) == ("/r/42/game/", "/game/")
    set_script_prefix(seen["root_path"])
    try:
        assert get_script_prefix() == "/r/42/"
    finally:
        set_script_prefix("/")
