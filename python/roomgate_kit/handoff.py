"""roomgate's room handoff hooks (docs/handoff.md, "The protocol"), served at handoff.path
(/_roomgate/handoff/<step>) around the app's functions:

    export_room(room) -> bytes | None        the room's state as a blob (None: nothing held here)
    import_room(room, blob, epoch) -> bool   the room restored from a blob (False: not one of its own)
    apply_messages(room, socket_id, messages) (optional, protocol version 2) held messages, in order,
        each a str (text) or bytes (binary), applied as if that socket had sent them
    export_socket(socket) -> JSON-able | None (optional, with apply_messages: the socket resume) a
        socket's own state, put in the export beside the room's; the resumed socket goes on from it
        (FencedConsumerMixin calls the consumer's resume_socket(state): roomgate_kit.resume)

The kit does the rest: the proof of each step's purpose, the call's fields (400), the freeze and
its lease, idempotency by handoff id, the 409 rules, the epoch fence, bounded remembered tables and
JSON errors. export_room, import_room and export_socket run under the room table's lock, the one
the app's state changes take, so nothing changes between the freeze and the blob.

hello answers {"version": 2, "messages": true, "resume": true} with export_socket and
apply_messages, {"version": 2, "messages": true} with apply_messages only, else {"version": 1}.
"""
import asyncio
import base64
import binascii
import inspect
import json
import logging
import re
from collections import OrderedDict

from .answers import NO_CONTENT, Answer, error, json_answer
from .fence import SOCKET_ID, close_moved
from .proofs import verify_call
from .resume import unwrap, wrap
from .rooms import REMEMBERED, Room, remember

log = logging.getLogger("roomgate_kit.handoff")
LEASE_MAX_MS = 600_000
EPOCH = re.compile(r"[1-9][0-9]{0,15}")  # roomgate's Redis store issues 16-digit epochs (ms x 1000)
MAX_EPOCH = 2**53 - 1  # past it an epoch is no longer an exact number in roomgate: refused, never rounded




class HandoffHooks:
    def __init__(self, rooms, export_room, import_room, apply_messages=None, verify=None, remembered=REMEMBERED, export_socket=None):
        self.rooms, self.export_room, self.import_room, self.apply_messages = rooms, export_room, import_room, apply_messages
        # Resume implies messages: a resume that fails falls back to delivering the held messages.
        self.export_socket = export_socket if apply_messages is not None else None
        self.verify = verify or verify_call
        self.remembered = remembered
        self.outcomes = OrderedDict()  # (room, handoff id) -> "exported" | "resumed" | "released" | "imported"
        self.applied = OrderedDict()  # (room, handoff id, socket id) -> "applying" | "applied"
        self.freezes = {}  # room -> (handoff id, blob, the lease's timer)
        self.steps = {"export": self._export, "import": self._import, "release": self._release, "resume": self._resume}
        if apply_messages is not None:
            self.steps["messages"] = self._messages

    def hello(self):
        if self.apply_messages is None:
            return {"version": 1}
        return {"version": 2, "messages": True, "resume": True} if self.export_socket is not None else {"version": 2, "messages": True}

    async def call(self, step, method, headers, body):
        """One hook: the proof for this step's purpose first, then the call's fields, then the step."""
        if step != "hello" and step not in self.steps:
            return error(404, "no such handoff step")
        if method != "POST":
            return error(405, "POST only")
        refused = self.verify(headers, body, f"handoff-{step}")
        if refused:
            return error(403, f"handoff refused: {refused}")
        if step == "hello":
            return json_answer(200, self.hello())
        handoff_id, room, epoch = (headers.get(f"X-Roomgate-{f}", "") or "" for f in ("Message-Id", "Room", "Epoch"))
        if not handoff_id or len(handoff_id) > 200:
            return error(400, "no handoff id")
        if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", room):
            return error(400, "no room")
        if not EPOCH.fullmatch(epoch) or int(epoch) > MAX_EPOCH:
            return error(400, "no epoch")
        return await self.steps[step](handoff_id, room, int(epoch), headers, body)

    def _remember(self, table, key, value):
        remember(table, key, value, self.remembered)

    def _refused(self, handoff_id, room, epoch):
        """Why a call about `room` at `epoch` cannot be about the copy held here, or None."""
        held = self.rooms.rooms.get(room)
        if held is not None and epoch < held.epoch:
            return "this room is held under a newer epoch"
        if self.rooms.fenced(room, epoch) and self.outcomes.get((room, handoff_id)) != "released":
            return "this room was released"
        return None

    def _socket_states(self, room):
        """{socket id: state} of the room's sockets that have an id and a state to resume with."""
        out = {}
        for socket in self.rooms.sockets(room):
            socket_id = getattr(socket, "socket_id", None)
            state = self.export_socket(socket) if socket_id else None
            if state is not None:
                out[socket_id] = state
        return out

    def _other_handoff(self, room, handoff_id):
        frozen = self.freezes.get(room)
        return frozen is not None and frozen[0] != handoff_id

    def _unfreeze(self, room):
        frozen = self.freezes.pop(room, None)
        if frozen is not None:
            frozen[2].cancel()
        held = self.rooms.rooms.get(room)
        if held is not None:
            held.frozen_by = None

    def _expire(self, room, handoff_id):
        """The lease ran out: neither release nor resume came, so the room goes on here."""
        with self.rooms.lock:
            if self.freezes.get(room, (None,))[0] == handoff_id:
                self._unfreeze(room)
                self._remember(self.outcomes, (room, handoff_id), "resumed")

    async def _export(self, handoff_id, room, epoch, headers, body):
        try:
            lease_ms = json.loads(body).get("leaseMs")
        except (ValueError, AttributeError, UnicodeDecodeError):
            lease_ms = None
        if not isinstance(lease_ms, int) or isinstance(lease_ms, bool) or not 1 <= lease_ms <= LEASE_MAX_MS:
            return error(400, f"leaseMs must be an integer 1..{LEASE_MAX_MS}")
        with self.rooms.lock:
            frozen = self.freezes.get(room)
            if frozen is not None:
                # The same handoff again: the very blob the first call got, under the same lease.
                return error(409, "another handoff holds this room") if frozen[0] != handoff_id else Answer(200, frozen[1], "application/octet-stream")
            if (room, handoff_id) in self.outcomes:
                return error(409, "this handoff is over")
            refused = self._refused(handoff_id, room, epoch)
            if refused:
                return error(409, refused)
            held = self.rooms.rooms.get(room)
            blob = self.export_room(room) if held is not None else None
            if blob is None:
                return error(404, "room not here")
            if self.export_socket is not None:
                blob = wrap(blob, self._socket_states(room))
            # Frozen from here on, under the lock the app's changes take: every change made before
            # this line is in the blob, and none is taken after it (table.live is False).
            held.frozen_by, held.epoch = handoff_id, max(held.epoch, epoch)
            timer = asyncio.get_running_loop().call_later(lease_ms / 1000, self._expire, room, handoff_id)
            self.freezes[room] = (handoff_id, bytes(blob), timer)
            self._remember(self.outcomes, (room, handoff_id), "exported")
        return Answer(200, bytes(blob), "application/octet-stream")

    async def _import(self, handoff_id, room, epoch, headers, body):
        with self.rooms.lock:
            if self.outcomes.get((room, handoff_id)) == "imported":
                return NO_CONTENT
            refused = self._refused(handoff_id, room, epoch)
            if refused:
                return error(409, refused)
            if room in self.freezes:
                return error(409, "this room is frozen here by another handoff")
            # An envelope's sockets wait for their resume; a blob that is not one is the app's own.
            envelope = unwrap(body) if self.export_socket is not None else None
            if not self.import_room(room, envelope[0] if envelope else body, epoch):
                return error(400, "not a state blob of this room")
            # Held under the new epoch before the 2xx: the room's sockets may arrive right after.
            held = self.rooms.rooms.setdefault(room, Room(epoch))
            held.epoch = epoch
            if envelope:
                self.rooms.resumable.keep(room, handoff_id, epoch, envelope[1])
            self._remember(self.outcomes, (room, handoff_id), "imported")
        return NO_CONTENT

    async def _release(self, handoff_id, room, epoch, headers, body):
        with self.rooms.lock:
            if self.outcomes.get((room, handoff_id)) == "released":
                return NO_CONTENT
            if self._other_handoff(room, handoff_id):
                return error(409, "another handoff holds this room")
            refused = self._refused(handoff_id, room, epoch)
            if refused:
                return error(409, refused)
            self._unfreeze(room)
            sockets = self.rooms.release(room, epoch)
            self._remember(self.outcomes, (room, handoff_id), "released")
        for socket in sockets:
            await close_moved(socket.close)
        return NO_CONTENT

    async def _resume(self, handoff_id, room, epoch, headers, body):
        with self.rooms.lock:
            if self._other_handoff(room, handoff_id):
                return error(409, "another handoff holds this room")
            if self.outcomes.get((room, handoff_id)) == "released":
                return error(409, "this room was released")
            self._unfreeze(room)
            # Nothing frozen (resumed already, the lease ran out, never exported): the same end state.
            # Remembered even for a handoff never exported here: roomgate resumes after an export it
            # gave up on, and that export may still arrive; it then gets 409 instead of freezing the
            # room for a whole lease.
            self._remember(self.outcomes, (room, handoff_id), "resumed")
        return NO_CONTENT

    async def _messages(self, handoff_id, room, epoch, headers, body):
        socket_id = headers.get("X-Roomgate-Socket", "") or ""
        messages = _held_messages(body, socket_id)
        if messages is None:
            return error(400, 'the body is {"socket": X-Roomgate-Socket, "messages": [{"text": ...} | {"binary": base64}, ...]}')
        key = (room, handoff_id, socket_id)
        with self.rooms.lock:
            done = self.applied.get(key)
            if done is not None:
                return NO_CONTENT if done == "applied" else error(409, "these messages are being applied")
            refused = self._refused(handoff_id, room, epoch)
            if refused or room in self.freezes or self.rooms.note(room, epoch) is None:
                return error(409, refused or "this room is frozen here, or held under a newer epoch")
            self._remember(self.applied, key, "applying")
        try:
            applied = self.apply_messages(room, socket_id, messages)
            if inspect.isawaitable(applied):
                await applied
        except Exception:
            self.applied.pop(key, None)  # not applied: a retry may try again
            log.exception("handoff %s: apply_messages failed for room %s, socket %s", handoff_id, room, socket_id)
            return error(500, "the messages could not be applied")
        self._remember(self.applied, key, "applied")
        return NO_CONTENT


def _held_messages(body, socket_id):
    """The messages of a messages call, in order (str or bytes), or None when it is not one."""
    if not SOCKET_ID.fullmatch(socket_id):
        return None
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(parsed, dict) or parsed.get("socket") != socket_id or not isinstance(parsed.get("messages"), list):
        return None
    out = []
    for m in parsed["messages"]:
        if isinstance(m, dict) and set(m) == {"text"} and isinstance(m["text"], str):
            out.append(m["text"])
        elif isinstance(m, dict) and set(m) == {"binary"} and isinstance(m["binary"], str):
            try:
                out.append(base64.b64decode(m["binary"], validate=True))
            except (binascii.Error, ValueError):
                return None
        else:
            return None
    return out


def django_view(hooks):
    """The hooks as one async Django view, routed as path("_roomgate/handoff/<str:step>", view).

    Async, so it runs on the event loop that holds the consumers; marked csrf_exempt (Django 3.2's
    decorator would make it sync). A body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413: set it to at
    least roomgate's handoff.maxStateBytes.
    """
    from django.core.exceptions import RequestDataTooBig
    from django.http import HttpResponse

    async def view(request, step):
        try:
            body = request.body
        except RequestDataTooBig:
            answer = error(413, "the blob is over DATA_UPLOAD_MAX_MEMORY_SIZE")
        else:
            answer = await hooks.call(step, request.method, request.headers, body)
        return HttpResponse(answer.body, status=answer.status, content_type=answer.content_type)

    view.csrf_exempt = True
    return view
