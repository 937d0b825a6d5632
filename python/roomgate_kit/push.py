"""roomgate's push receiver (docs/push.md): push.path (/_roomgate/push) on the backend's own
address. The proof first (403, before anything of the message is read), then the room and its
epoch (409 without a room, or under an older or released epoch: roomgate then resolves the room
again), then the app's `deliver`, and 204 with X-Roomgate-Sockets: how many sockets got it.

A fan-out (X-Roomgate-Fanout: 1, purpose push-fanout) carries {"rooms": [{"room", "epoch"}, ...],
"message": ...}: each room held here under that epoch gets the message; the others are skipped.

    async deliver(room, message, meta) -> int     meta: {"id": X-Roomgate-Message-Id, "sender": X-Roomgate-Sender}
"""
import json

from .fence import ROOM_KEY, owner_of_headers
from .answers import Answer, error
from .proofs import verify_call


class PushReceiver:
    def __init__(self, rooms, deliver, verify=None):
        self.rooms, self.deliver, self.verify = rooms, deliver, verify or verify_call

    async def call(self, method, headers, body):
        if method != "POST":
            return error(405, "POST only")
        fanout = headers.get("X-Roomgate-Fanout") == "1"
        refused = self.verify(headers, body, "push-fanout" if fanout else "push")
        if refused:
            return error(403, f"push refused: {refused}")
        try:
            message = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return error(400, "not JSON")
        meta = {"id": headers.get("X-Roomgate-Message-Id", "") or "", "sender": headers.get("X-Roomgate-Sender", "") or ""}
        if fanout:
            return await self._fanout(message, meta)
        room, epoch = owner_of_headers(headers)
        if room is None:
            return error(409, "no room")
        if self.rooms.note(room, epoch) is None:
            return error(409, "this room is held under a newer epoch, or was handed off from here")
        return counted(await self.deliver(room, message, meta))

    async def _fanout(self, body, meta):
        listed = body.get("rooms") if isinstance(body, dict) else None
        sent = 0
        for r in listed if isinstance(listed, list) else []:
            if not isinstance(r, dict) or not isinstance(r.get("room"), str) or not ROOM_KEY.fullmatch(r["room"]):
                continue
            if not isinstance(r.get("epoch"), int) or isinstance(r["epoch"], bool) or r["epoch"] < 0:
                continue
            if self.rooms.note(r["room"], r["epoch"]) is not None:
                sent += await self.deliver(r["room"], body.get("message"), meta)
        return counted(sent)


def counted(sockets):
    return Answer(204, sockets=sockets)


def django_view(receiver):
    """The receiver as an async Django view on the event loop that holds the consumers (marked
    csrf_exempt: Django 3.2's decorator would make it sync)."""
    from django.http import HttpResponse

    async def view(request):
        answer = await receiver.call(request.method, request.headers, request.body)
        response = HttpResponse(answer.body, status=answer.status, content_type=answer.content_type)
        if answer.status == 204:
            response["X-Roomgate-Sockets"] = str(answer.sockets)
        return response

    view.csrf_exempt = True
    return view
