"""roomgate_kit.groups: a room's sockets as a Channels group, here on Channels' in-memory layer
(test/integration/django-uvicorn-redis.test.ts runs it on channels_redis with a real Redis)."""
from channels.layers import InMemoryChannelLayer

from conftest import run
from roomgate_kit.groups import RoomGroupMixin, room_group, send_to_room
from roomgate_kit.rooms import RoomTable


class Socket(RoomGroupMixin):
    def __init__(self, layer, room):
        self.channel_layer, self.room, self.sent = layer, room, []

    async def send(self, text_data=None):
        self.sent.append(text_data)


def test_group_names_are_valid_for_channels_whatever_the_room_key():
    layer = InMemoryChannelLayer()
    names = {room_group(r) for r in ("42", "game:a.b_c-d", "x" * 128, "é")}
    assert len(names) == 4
    for name in names:
        assert layer.valid_group_name(name) and len(name) < 100


def test_a_socket_joins_its_rooms_group_only_with_a_layer_and_a_room():
    layer = InMemoryChannelLayer()
    assert Socket(layer, "chess").groups == [room_group("chess")]
    assert Socket(layer, None).groups == []
    assert Socket(None, "chess").groups == []


def test_a_room_message_reaches_the_groups_sockets_and_counts_the_rooms_sockets_here():
    async def scenario():
        layer, rooms = InMemoryChannelLayer(), RoomTable()
        here, other = Socket(layer, "chess"), Socket(layer, "go")
        rooms.note("chess", 1)
        rooms.join("chess", here)
        for s, name in ((here, "a"), (other, "b")):
            s.channel_name = await layer.new_channel(name)
            await layer.group_add(s.groups[0], s.channel_name)
        sent = await send_to_room(layer, rooms, "chess", '{"n":1}')
        event = await layer.receive(here.channel_name)
        await here.roomgate_send(event)
        assert layer.channels.get(other.channel_name) is None or layer.channels[other.channel_name].empty()
        return sent, here.sent

    assert run(scenario()) == (1, ['{"n":1}'])
