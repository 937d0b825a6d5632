"""{% load roomgate %}{% roomgate_pin %}: the page's signed room pin and roomgate's script that
pins it into every WebSocket of the page (docs/per-tab-rooms.md). Needs "roomgate_kit" in
INSTALLED_APPS and the request in the context (django.template.context_processors.request).

{% roomgate_pin %}            the room roomgate routed this page by (X-Roomgate-Room)
{% roomgate_pin room %}       that room
{% roomgate_pin room nonce=request.csp_nonce %}   a nonce on the script tag (CSP with nonces)

Nothing is rendered when there is no room: the page's sockets then go by the cookie as before.
"""
from django import template
from django.conf import settings
from django.utils.html import format_html

from ..pins import PIN_PARAM, ROOM_PIN_SCRIPT_PATH, ROOM_PIN_SCRIPT_SRI, pin_secret, routed_room, sign_pin

register = template.Library()


@register.simple_tag(takes_context=True)
def roomgate_pin(context, room=None, nonce=None):
    if room is None:
        request = context.get("request")
        room = routed_room(getattr(request, "scope", None) or {}) if request is not None else None
    if not room:
        return ""
    pin = sign_pin(room, pin_secret(settings))
    param = getattr(settings, "ROOMGATE_PIN_PARAM", PIN_PARAM)
    meta = format_html('<meta name="roomgate-pin" content="{}" data-param="{}">', pin, param)
    if nonce:
        script = format_html('<script src="{}" integrity="{}" crossorigin="anonymous" nonce="{}"></script>', ROOM_PIN_SCRIPT_PATH, ROOM_PIN_SCRIPT_SRI, nonce)
    else:
        script = format_html('<script src="{}" integrity="{}" crossorigin="anonymous"></script>', ROOM_PIN_SCRIPT_PATH, ROOM_PIN_SCRIPT_SRI)
    return meta + script
