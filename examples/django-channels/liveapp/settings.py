"""Settings of the example app behind roomgate (docs/django.md walks through them).

Lines marked ROOMGATE are what roomgate needs; the rest is an ordinary small Django project.
Tested with Debian 12's Django 3.2, Channels 4.0, daphne 4.0 (test/integration/django-channels.test.ts),
uvicorn 0.17 and channels_redis 4.0 (test/integration/django-uvicorn-redis.test.ts);
the 4.2+ branches are written from Django's documentation and not run by the tests.
"""
import os
from pathlib import Path

import django

BASE_DIR = Path(__file__).resolve().parent.parent


def env_list(name, default):
    return [v.strip() for v in os.environ.get(name, default).split(",") if v.strip()]


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret-0123456789")
DEBUG = False
# roomgate passes Host and Origin unchanged, so the public names go here as they would without it.
# The WebSocket route checks Origin against them too (asgi.py).
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1")
# Django 4.0+ wants the scheme in CSRF_TRUSTED_ORIGINS; 3.2 wants bare host names.
_public = env_list("DJANGO_PUBLIC_ORIGINS", "http://localhost:8080")
CSRF_TRUSTED_ORIGINS = _public if django.VERSION >= (4, 0) else [o.split("://", 1)[-1] for o in _public]

# roomgate_kit: pip install ./python (docs/django.md); the tests put the checkout's python/ on PYTHONPATH.
INSTALLED_APPS = ["django.contrib.staticfiles", "rooms", "roomgate_kit"]  # ROOMGATE: {% load roomgate %}
# Every middleware here can run async (Django's own can): the push receiver is an async view that
# awaits the room's consumers on their event loop, and a sync-only middleware would make Django
# hop between threads around it on every request. (Each room's epoch is noted by roomgate_kit's
# ASGI middleware, in asgi.py.)
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]
ROOT_URLCONF = "liveapp.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},  # ROOMGATE: {% roomgate_pin %}
    }
]
ASGI_APPLICATION = "liveapp.asgi.application"
DATABASES = {}
USE_TZ = True

# ROOMGATE: roomgate appends the client's address to X-Forwarded-For (and drops a client's own
# unless the peer is in proxy.trustedProxies): the last entry is the client. 1 with roomgate
# alone; add one per trusted balancer in front of it. djust reads this name; so does this app.
DJUST_TRUSTED_PROXY_COUNT = int(os.environ.get("DJUST_TRUSTED_PROXY_COUNT", "1"))
# ROOMGATE: safe behind roomgate, which replaces X-Forwarded-Proto unless the peer is trusted.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Static files as any Django deployment has them (collectstatic into STATIC_ROOT, content-hashed
# names); roomgate serves STATIC_ROOT (roomgate.yaml's static.mounts) as immutable for a year.
STATIC_URL = "/static/"
STATIC_ROOT = os.environ.get("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles"))
if django.VERSION >= (4, 2):
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
    }
else:  # Django 3.2 to 4.1 (STORAGES came in 4.2; STATICFILES_STORAGE is gone in 5.1)
    STATICFILES_STORAGE = "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"

# ROOMGATE: this backend's own keys, as `roomgate backend-key ID` prints them (never roomgate's call
# secrets), are read by roomgate_kit from the environment, not from here: ROOMGATE_BACKEND_ID (its
# id in roomgate's backends list, the destination every call names) and ROOMGATE_BACKEND_KEYS (or
# ROOMGATE_BACKEND_KEYS_FILE); any of the keys verifies a push or a handoff call made for this
# backend (docs/push.md, "Verifying a call").
# ROOMGATE: who signs the room cookie. "roomgate" (roomgate's cookie.format: roomgate, the
# default): this app sets nothing. "django": this app sets it with set_signed_cookie(salt=...),
# and roomgate (cookie.format: django-cookie, cookie.setOnPages: false, this SECRET_KEY in
# ROOMGATE_COOKIE_SECRETS, cookie.salt the same) only verifies it.
ROOMGATE_ROOM_COOKIE = os.environ.get("ROOMGATE_ROOM_COOKIE", "roomgate")
ROOMGATE_COOKIE_SALT = "roomgate.room"

# The channel layer: none by default (a room's sockets are all on this process, roomgate keeps them
# there, and rooms/state.py reaches them through roomgate_kit's table). DJANGO_CHANNEL_LAYER=redis://...
# runs channels_redis (Debian's python3-channels-redis) on that Redis: a room's messages and pushes
# then go through the room's group on it (roomgate_kit.groups), which every process on it shares.
_layer = os.environ.get("DJANGO_CHANNEL_LAYER", "")
if _layer.startswith(("redis://", "rediss://")):
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [_layer]}}}
elif _layer:
    raise ValueError("DJANGO_CHANNEL_LAYER: redis://HOST:PORT/DB, rediss://..., or unset")

# ROOMGATE: which process this is, shown on its pages: its id in roomgate's backends (one daphne
# process each), which roomgate_kit reads too.
BACKEND_ID = os.environ.get("ROOMGATE_BACKEND_ID", "django-1")
