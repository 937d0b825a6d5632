"""The socket resume of protocol version 2 (docs/handoff.md, "Deliver", item 1): per-socket state in
the export, and the signed resume handshake that attaches a socket to the imported room.

- When the app gives a socket's own state (HandoffHooks(export_socket=...)), an export carries
  each of the room's sockets' states (by X-Roomgate-Socket) beside the room's blob, in the Node
  kit's envelope, so a blob of either kit reads the same: {"roomgateKit": 1, "room": <the app's
  blob, base64>, "sockets": {<socket id>: <the app's value>}}. Without it the blob is the app's own.
- The import keeps the sockets' states (rooms.SocketStates, the table's `resumable`) until each socket is
  resumed, once, or the room goes.
- A resume handshake (X-Roomgate-Resume: <handoff id>) is checked before anything is accepted:
  the room, epoch, socket and handoff named; the proof for purpose handoff-resume-socket over the
  socket id, made for this backend (so a proof made for another backend or another call never
  passes), fresh and not replayed; the room held here under that epoch and not frozen; a state of
  that socket from that handoff. Anything else is refused before accept (403 from the server).
"""
import base64
import binascii
import json

from .fence import ROOM_KEY, SOCKET_ID, Headers, owner_of_headers

ENVELOPE = 1
PURPOSE = "handoff-resume-socket"


def wrap(room_blob, sockets):
    # Compact and not ASCII-escaped, as JSON.stringify writes it: the Node kit's bytes exactly.
    text = json.dumps({"roomgateKit": ENVELOPE, "room": base64.b64encode(bytes(room_blob)).decode(), "sockets": sockets}, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def unwrap(blob):
    """(the app's blob, {socket id: state}) of an envelope, or None when the blob is not one."""
    try:
        parsed = json.loads(blob)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(parsed, dict) or parsed.get("roomgateKit") != ENVELOPE or not isinstance(parsed.get("room"), str):
        return None
    sockets = parsed.get("sockets")
    if not isinstance(sockets, dict) or not all(isinstance(k, str) and SOCKET_ID.fullmatch(k) for k in sockets):
        return None
    try:
        return base64.b64decode(parsed["room"], validate=True), sockets
    except (binascii.Error, ValueError):
        return None


def resume_refusal(table, headers, verify):
    """For a handshake carrying X-Roomgate-Resume: (None, (room, epoch, socket id, handoff id,
    state)) when it may be attached, else (why, None). `headers`: roomgate_kit.fence.Headers."""
    handoff_id = headers.get("X-Roomgate-Resume") or ""
    room, epoch = owner_of_headers(headers)
    socket_id = headers.get("X-Roomgate-Socket") or ""
    named = headers.get("X-Roomgate-Message-Id")
    if not handoff_id or len(handoff_id) > 200 or room is None or not ROOM_KEY.fullmatch(room) or not epoch:
        return "a resume names its room, epoch, socket and handoff", None
    if not SOCKET_ID.fullmatch(socket_id) or (named is not None and named != handoff_id):
        return "a resume names its room, epoch, socket and handoff", None
    # The message id the proof covers is the handoff id (X-Roomgate-Resume), whatever else came.
    claims = Headers(dict(headers, **{"x-roomgate-message-id": handoff_id}).items())
    refused = verify(claims, socket_id.encode("utf-8"), PURPOSE)
    if refused:
        return f"resume refused: {refused}", None
    with table.lock:
        held = table.get(room)
        if held is None or held.epoch != epoch or held.frozen_by is not None or table.fenced(room, epoch):
            return "this room is not held here under that epoch", None
        found, state = table.resumable.take(room, socket_id, handoff_id, epoch)
    if not found:
        return "no state of this socket from that handoff", None
    return None, (room, epoch, socket_id, handoff_id, state)
