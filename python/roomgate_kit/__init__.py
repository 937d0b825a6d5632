"""roomgate's receiving half for Python apps (docs/python-kit.md).

- proofs: verify_call, the proof on every call roomgate makes to a backend (docs/push.md);
- rooms: RoomTable, the rooms this process holds: epoch, sockets, freeze, the epoch fence;
- fence: the room and epoch roomgate routed by, as ASGI middleware and a Channels consumer mixin;
- handoff: the room handoff's hooks (docs/handoff.md) around the app's export_room/import_room;
- push: the push receiver, delivering through the app's callback.
"""
