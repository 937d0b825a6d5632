"""A room's sockets as a Channels group, for an app that runs a channel layer (channels_redis on
a Redis, or Channels' in-memory layer): the push receiver's `deliver` and the app's own room
messages go through the layer instead of the RoomTable's set of this process's sockets.

roomgate keeps every socket of a room on one process, so the table's own set is enough for a
room app (and needs no layer); a layer is for an app that already has one, or that sends to a
room from elsewhere (a worker, a management command, another process on the same layer).

    class LiveConsumer(RoomGroupMixin, FencedConsumerMixin, AsyncWebsocketConsumer): ...
    sent = await send_to_room(get_channel_layer(), ROOMS, room, text)
"""
import hashlib

# Channels allows group names of ASCII letters, digits, '-', '_' and '.', under 100 characters;
# a room key may hold ':' and be 128 long: the group is named by a digest of the key.
GROUP_PREFIX = "roomgate.room."
SEND_EVENT = "roomgate.send"  # a group message's type: the consumer's roomgate_send handles it


def room_group(room):
    return GROUP_PREFIX + hashlib.sha256(room.encode("utf-8")).hexdigest()[:40]


class RoomGroupMixin:
    """Joins the socket to its room's group (on connect and on a resume: FencedConsumerMixin adds
    `groups` once self.room is known; Channels discards them on disconnect) when a layer is
    configured; sends what the group gets to the socket."""

    @property
    def groups(self):
        if getattr(self, "channel_layer", None) is None or getattr(self, "room", None) is None:
            return []
        return [room_group(self.room)]

    @groups.setter
    def groups(self, _value):
        pass  # Channels' __init__ sets [] when the class has None; the room decides here

    async def roomgate_send(self, event):
        await self.send(text_data=event["text"])


async def send_to_room(layer, rooms, room, text):
    """Sends `text` to the room's group on `layer`; how many of the room's sockets are here (a
    layer does not count its deliveries, and roomgate keeps a room's sockets on one process)."""
    await layer.group_send(room_group(room), {"type": SEND_EVENT, "text": text})
    return len(rooms.sockets(room))
