"""The Django adapters of roomgate_kit (handoff.django_view, push.django_view): async, marked
csrf_exempt, the kit's answer as Django's response, X-Roomgate-Sockets, 413 past Django's limit."""
import json

from django.test import RequestFactory, override_settings

from conftest import run, signed, verifier
from roomgate_kit import handoff, push
from roomgate_kit.rooms import RoomTable


def _post(path, headers, body):
    return RequestFactory().post(path, data=body, content_type="application/json", **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()})


def test_the_handoff_view_answers_json_and_413_past_the_upload_limit():
    view = handoff.django_view(handoff.HandoffHooks(RoomTable(), lambda r: b"", lambda r, b, e: True, verify=verifier().verify))
    assert view.csrf_exempt is True
    hello = run(view(_post("/_roomgate/handoff/hello", signed("handoff-hello"), b""), "hello"))
    assert (hello.status_code, hello["Content-Type"], json.loads(hello.content)) == (200, "application/json", {"version": 1})
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10):
        big = b"x" * 11
        answer = run(view(_post("/_roomgate/handoff/import", signed("handoff-import", big, room="r", epoch=1), big), "import"))
    assert answer.status_code == 413


def test_the_push_view_counts_the_sockets_reached():
    async def deliver(room, message, meta):
        return 3

    view = push.django_view(push.PushReceiver(RoomTable(), deliver, verify=verifier().verify))
    assert view.csrf_exempt is True
    answer = run(view(_post("/_roomgate/push", signed("push", b"{}", room="r", epoch=1), b"{}")))
    assert (answer.status_code, answer["X-Roomgate-Sockets"]) == (204, "3")
    refused = run(view(_post("/_roomgate/push", {}, b"{}")))
    assert (refused.status_code, json.loads(refused.content)) == (403, {"error": "push refused: unsigned"})
