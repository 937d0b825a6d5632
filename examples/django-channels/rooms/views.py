"""The room's page, roomgate's push receiver, and what this process holds of a room."""
import json
import re

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render

from . import state
from .roomgate import owner_of_request, verify_push

# X-Forwarded-Prefix: roomgate's per-tab prefix (/r/ROOM), stripped from the path it forwards.
PREFIX = re.compile(r"^/r/[A-Za-z0-9_.:-]{1,128}$")


def index(request):
    return HttpResponse("<!doctype html><title>rooms</title><p>Open /game/ROOM/ or /r/ROOM/game/ROOM/.</p>", content_type="text/html")


def game(request, room):
    """The room's page; its socket goes to /ws/live/, under the per-tab prefix when the page came under one."""
    prefix = request.headers.get("X-Forwarded-Prefix", "").rstrip("/")
    held = getattr(request, "room_state", None)
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


async def push_receiver(request):
    """roomgate's push.path: verify the proof, then hand the message to the room's sockets.

    Async, so it runs on the event loop that holds the consumers. 403 without a valid proof; 409
    under an epoch older than the one the room is held under (roomgate then re-resolves once);
    204 with X-Roomgate-Sockets: how many sockets got it (docs/push.md).
    """
    if request.method != "POST":
        return HttpResponse(status=405)
    fanout = request.headers.get("X-Roomgate-Fanout") == "1"
    refused = verify_push(request.headers, request.body, "push-fanout" if fanout else "push")
    if refused:
        return HttpResponse(f"push refused: {refused}\n", status=403)
    try:
        body = json.loads(request.body)
    except ValueError:
        return HttpResponse("not JSON\n", status=400)
    meta = {"id": request.headers.get("X-Roomgate-Message-Id", ""), "sender": request.headers.get("X-Roomgate-Sender", "")}
    if fanout:
        sent = 0
        for r in body.get("rooms", []) if isinstance(body, dict) and isinstance(body.get("rooms"), list) else []:
            if not isinstance(r, dict) or not isinstance(r.get("room"), str) or not isinstance(r.get("epoch"), int):
                continue
            if state.note_epoch(r["room"], r["epoch"]) is not None:
                sent += await state.push(r["room"], {"type": "push", "room": r["room"], **meta, "message": body.get("message")})
        return counted(sent)
    room, epoch = owner_of_request(request)
    if room is None:
        return HttpResponse("no room\n", status=409)
    if state.note_epoch(room, epoch) is None:
        return HttpResponse("this room is held under a newer epoch\n", status=409)
    return counted(await state.push(room, {"type": "push", "room": room, **meta, "message": body}))


# Django 3.2's csrf_exempt wraps a view in a sync function, which would run this coroutine off the
# loop: mark it instead (no CsrfViewMiddleware here anyway, but an app that has one needs this).
push_receiver.csrf_exempt = True


def counted(sockets):
    response = HttpResponse(status=204)
    response["X-Roomgate-Sockets"] = str(sockets)
    return response


def room_state(request, room):
    return JsonResponse(state.snapshot(room))
