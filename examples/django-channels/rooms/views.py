"""The room's page, roomgate's push receiver, and what this process holds of a room."""
import re

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render

from roomgate_kit import push

from . import state

# X-Forwarded-Prefix: roomgate's per-tab prefix (/r/ROOM), stripped from the path it forwards.
PREFIX = re.compile(r"^/r/[A-Za-z0-9_.:-]{1,128}$")


def index(request):
    return HttpResponse("<!doctype html><title>rooms</title><p>Open /game/ROOM/ or /r/ROOM/game/ROOM/.</p>", content_type="text/html")


def game(request, room):
    """The room's page; its socket goes to /ws/live/, under the per-tab prefix when the page came under one."""
    prefix = request.headers.get("X-Forwarded-Prefix", "").rstrip("/")
    # roomgate_kit's RoomOwnerMiddleware (asgi.py) noted the room's epoch: None under an older one.
    owner = getattr(request, "scope", {}).get("roomgate") or {}
    held = state.ROOMS.get(owner["room"]) if owner.get("held") else None
    response = render(request, "rooms/game.html", {
        "room": room,
        "backend": settings.BACKEND_ID,
        "epoch": held.epoch if held else 0,
        "ws_path": (prefix if PREFIX.match(prefix) else "") + "/ws/live/",
    })
    if settings.ROOMGATE_ROOM_COOKIE == "django":
        # roomgate verifies this cookie (cookie.format: django-cookie) and routes the socket by it.
        response.set_signed_cookie("roomgate_room", room, salt=settings.ROOMGATE_COOKIE_SALT, httponly=True, samesite="Lax", secure=request.is_secure())
    return response


# roomgate's push.path: roomgate_kit checks the proof and the epoch (403, 409), state.deliver hands the
# message to the room's sockets, and the answer counts them (X-Roomgate-Sockets, docs/push.md).
push_receiver = push.django_view(push.PushReceiver(state.ROOMS, state.deliver))


def room_state(request, room):
    return JsonResponse(state.snapshot(room))
