"""Shared by roomgate_kit's tests: the package from this checkout, Django settings for the Channels
tests, and a signer made to docs/push.md (test_proofs.py checks it against roomgate's own vectors)."""
import asyncio
import base64
import hashlib
import hmac
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402
from django.conf import settings  # noqa: E402

if not settings.configured:
    settings.configure(DEBUG=False, ALLOWED_HOSTS=["*"], INSTALLED_APPS=["roomgate_kit"], DATABASES={}, TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}])
    django.setup()

from roomgate_kit.fence import Headers  # noqa: E402
from roomgate_kit.proofs import Verifier  # noqa: E402

SECRET = "kit-test-secret-0123456789abcdef0123"
ME = "b1"


def backend_key(secret, backend_id):
    kid = hmac.new(secret.encode(), b"roomgate-key-id-v1", hashlib.sha256).hexdigest()[:8]
    mac = hmac.new(secret.encode(), f"roomgate-backend-key-v1\n{backend_id}".encode(), hashlib.sha256).digest()
    return f"rgk1.{kid}.{base64.urlsafe_b64encode(mac).decode().rstrip('=')}"


def signed(purpose, body=b"", *, to=ME, room="", epoch="", id="m-1", sender="gw", now=None, secret=SECRET, extra=None):
    """The fields of a call signed as roomgate signs it (Headers: case-insensitive)."""
    timestamp = str(int(time.time() if now is None else now))
    fields = {"X-Roomgate-Message-Id": id, "X-Roomgate-Sender": sender}
    if room:
        fields["X-Roomgate-Room"] = room
    if epoch != "":
        fields["X-Roomgate-Epoch"] = str(epoch)
    text = "\n".join(["roomgate-call-v2", purpose, to, id, room, str(epoch), sender, timestamp, hashlib.sha256(body).hexdigest()])
    key = backend_key(secret, to)
    fields.update({"X-Roomgate-Destination": to, "X-Roomgate-Timestamp": timestamp, "X-Roomgate-Signature": f"v2={key[5:13]}:{hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()}"})
    fields.update(extra or {})
    return Headers(fields.items())


def verifier(**kw):
    return Verifier(ME, [backend_key(SECRET, ME)], **kw)


def run(coro):
    return asyncio.run(coro)


async def eventually(check, timeout_s=5.0):
    """Polls `check` until it is true (never a timing assertion: the bound only ends a hung test)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.01)


class FakeSocket:
    """A room's socket as the kit sees it: close(code=...), recorded. Daphne-like refuses 1012."""

    def __init__(self, refuses_1012=False):
        self.codes, self.refuses_1012 = [], refuses_1012

    async def close(self, code=1000):
        if code == 1012 and self.refuses_1012:
            raise ValueError("invalid close code 1012")
        self.codes.append(code)
