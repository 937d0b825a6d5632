"""The room's page, roomgate's push receiver, and what this process holds of a room."""
from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import get_script_prefix

from roomgate_kit import push  # ROOMGATE

from . import state


def index(request):
    return HttpResponse("<!doctype html><title>rooms</title><p>Open /game/ROOM/ or /r/ROOM/game/ROOM/.</p>", content_type="text/html")


def game(request, room):
    """The room's page. Its socket path is djust's {% djust_client_config %}'s: /ws/live/ under the
    script prefix, which roomgate_kit's ForwardedPrefixMiddleware sets to roomgate's per-tab prefix
    (/r/ROOM/ws/live/ for a page under /r/ROOM/)."""
    owner = request.scope.get("roomgate") or {}  # ROOMGATE: RoomOwnerMiddleware's (asgi.py): the room's epoch
    response = render(request, "rooms/game.html", {
        "room": room,
        "backend": settings.BACKEND_ID,
        "epoch": owner.get("epoch") if owner.get("held") else 0,  # ROOMGATE
        "ws_path": get_script_prefix() + "ws/live/",
    })
    # ROOMGATE: only with ROOMGATE_ROOM_COOKIE=django (settings.py): Django signs the room cookie.
    if settings.ROOMGATE_ROOM_COOKIE == "django":
        # roomgate verifies this cookie (cookie.format: django-cookie) and routes the socket by it.
        response.set_signed_cookie("roomgate_room", room, salt=settings.ROOMGATE_COOKIE_SALT, httponly=True, samesite="Lax", secure=request.is_secure())

    return response


# ROOMGATE: roomgate's push.path: roomgate_kit checks the proof and the epoch (403, 409), state.deliver
# hands the message to the room's sockets, and the answer counts them (X-Roomgate-Sockets, docs/push.md).
push_receiver = push.django_view(push.PushReceiver(state.ROOMS, state.deliver))


def room_state(request, room):
    return JsonResponse(state.snapshot(room))
