"""roomgate's proof on a call to this backend (docs/push.md, "Verifying a call"): a push or a
handoff hook, version 2 proofs under this backend's own keys, naming it as the destination.

Keys come from the environment as `roomgate backend-key ID` prints them: ROOMGATE_BACKEND_ID and
ROOMGATE_BACKEND_KEYS (comma-separated), or ROOMGATE_BACKEND_KEYS_FILE (a file of keys, one a line
or comma-separated, for secrets mounted as files). A key's whole text is the HMAC key.
"""
import hashlib
import hmac
import os
import re
import threading
import time
from collections import OrderedDict

KEY_FORM = re.compile(r"rgk1\.[0-9a-f]{8}\.[A-Za-z0-9_-]{43}")
WINDOW_S = 60  # a timestamp further than this from the clock is stale
REPLAY_CACHE_MAX = 100_000  # proofs remembered at most; only roomgate's genuine calls get in


class KeyFormatError(ValueError):
    """A configured key is not one `roomgate backend-key ID` prints."""


def parse_keys(text, origin="ROOMGATE_BACKEND_KEYS"):
    """The keys in `text` (commas or lines between them); KeyFormatError naming the bad one's place."""
    keys = [k.strip() for k in re.split(r"[,\n]", text or "") if k.strip()]
    for n, key in enumerate(keys, 1):
        if not KEY_FORM.fullmatch(key):
            # Never the key's text in the error: it is a secret, and the log is not.
            raise KeyFormatError(f'{origin}: key {n} of {len(keys)} is not a backend key: a key is "rgk1.<8 hex digits>.<43 base64url characters>", as `roomgate backend-key ID` prints it')
    return keys


class ReplayCache:
    """The proofs taken within twice the window, bounded and thread-safe (pages run on threads)."""

    def __init__(self, ttl_s=2 * WINDOW_S, max_entries=REPLAY_CACHE_MAX):
        self.ttl_s, self.max_entries = ttl_s, max_entries
        self._until = OrderedDict()  # proof -> when it may be forgotten, oldest first
        self._lock = threading.Lock()

    def take(self, proof, now):
        """True the first time `proof` is offered within the ttl; False for a replay."""
        with self._lock:
            while self._until and next(iter(self._until.values())) < now:
                self._until.popitem(last=False)
            if proof in self._until:
                return False
            self._until[proof] = now + self.ttl_s
            while len(self._until) > self.max_entries:
                self._until.popitem(last=False)  # the oldest: past the bound, the least likely replayed
            return True

    def __len__(self):
        return len(self._until)


def _text(purpose, me, headers, timestamp, body):
    return "\n".join([
        "roomgate-call-v2", purpose, me, headers.get("X-Roomgate-Message-Id", ""), headers.get("X-Roomgate-Room", ""),
        headers.get("X-Roomgate-Epoch", ""), headers.get("X-Roomgate-Sender", ""), timestamp, hashlib.sha256(body).hexdigest(),
    ])


class Verifier:
    """Checks calls made for backend `backend_id` with any of `keys`, in docs/push.md's order."""

    def __init__(self, backend_id, keys, window_s=WINDOW_S, clock=time.time, cache=None):
        self.backend_id, self.keys = backend_id or "", parse_keys(",".join(keys))
        if self.keys and not self.backend_id:
            raise KeyFormatError("ROOMGATE_BACKEND_ID is not set: the keys verify calls made for one backend id")
        self.window_s, self.clock = window_s, clock
        self.cache = cache or ReplayCache(2 * window_s)

    @classmethod
    def from_env(cls, environ=None):
        env = os.environ if environ is None else environ
        text, origin = env.get("ROOMGATE_BACKEND_KEYS", ""), "ROOMGATE_BACKEND_KEYS"
        if env.get("ROOMGATE_BACKEND_KEYS_FILE"):
            origin = env["ROOMGATE_BACKEND_KEYS_FILE"]
            with open(origin, encoding="utf-8") as f:
                text = f.read()
        return cls(env.get("ROOMGATE_BACKEND_ID", ""), parse_keys(text, origin))

    def verify(self, headers, body, purpose):
        """None when the call carries a proof for `purpose` made for this backend, else why not.

        `headers`: any mapping whose get() finds the fields by their usual spelling (Django's
        request.headers, or roomgate_kit.fence.Headers); `body`: the bytes as received.
        """
        timestamp, signature = headers.get("X-Roomgate-Timestamp"), headers.get("X-Roomgate-Signature")
        if not self.keys or not timestamp or not signature:
            return "unsigned"
        if headers.get("X-Roomgate-Destination") != self.backend_id:
            return "wrong-destination"  # made for another backend: never taken here
        now = self.clock()
        if not re.fullmatch(r"[0-9]{1,12}", timestamp) or abs(now - int(timestamp)) > self.window_s:
            return "stale"
        # The purpose and destination lines are this receiver's own, never read from the call.
        text = _text(purpose, self.backend_id, headers, timestamp, body).encode("utf-8", "replace")
        # Bytes on both sides: compare_digest refuses str with non-ASCII characters (a 500, not a 403).
        offered = [s.strip().partition(":")[2].encode("utf-8", "replace") for s in signature.split(",") if s.strip().startswith("v2=")]
        wanted = [hmac.new(k.encode(), text, hashlib.sha256).hexdigest().encode() for k in self.keys]
        matched = next((w for w in wanted for o in offered if hmac.compare_digest(o, w)), None)
        if matched is None:
            return "bad-signature"
        # Keyed on the signature that matched, not the header's text (which a replay can vary).
        return None if self.cache.take(matched, now) else "replayed"


_default = None
_default_lock = threading.Lock()


def default_verifier():
    """The verifier of this process's environment, made on first use (KeyFormatError if a key is bad)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Verifier.from_env()
        return _default


def verify_call(headers, body, purpose):
    """None when the call carries roomgate's proof for `purpose`, else 'unsigned',
    'wrong-destination', 'stale', 'bad-signature' or 'replayed' (docs/push.md)."""
    return default_verifier().verify(headers, body, purpose)
