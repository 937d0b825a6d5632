"""roomgate_kit.proofs against docs/push.md, "Verifying a call", and roomgate's own signer."""
import json
import threading
from pathlib import Path

import pytest

from conftest import ME, SECRET, backend_key, signed, verifier
from roomgate_kit.fence import Headers
from roomgate_kit.proofs import KeyFormatError, ReplayCache, Verifier, parse_keys

VECTORS = json.loads((Path(__file__).parent / "fixtures" / "call-proofs.json").read_text("utf-8"))


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_every_proof_roomgate_makes_is_taken(v):
    check = Verifier(v["backendId"], v["keys"], clock=lambda: v["nowS"])
    headers, body = Headers(v["headers"].items()), v["body"].encode("utf-8")
    assert check.verify(headers, body, v["purpose"]) is None
    # The same proof for any other purpose, or with one byte of the body changed, is not.
    assert Verifier(v["backendId"], v["keys"], clock=lambda: v["nowS"]).verify(headers, body, "push-other") == "bad-signature"
    assert Verifier(v["backendId"], v["keys"], clock=lambda: v["nowS"]).verify(headers, body + b" ", v["purpose"]) == "bad-signature"


def test_the_tests_signer_derives_roomgates_keys():
    # conftest's signer is held to the same derivation, so the tests below sign as roomgate does.
    assert backend_key("vector-secret-one-0123456789abcdef012", "b1") == VECTORS[0]["keys"][0]


def test_the_order_of_refusals():
    body = b'{"x":1}'
    ok = signed("push", body, room="r", epoch=3)
    assert verifier().verify(ok, body, "push") is None
    assert verifier().verify(Headers({"X-Roomgate-Room": "r"}.items()), body, "push") == "unsigned"
    assert Verifier("", []).verify(ok, body, "push") == "unsigned"  # no key configured
    assert verifier().verify(signed("push", body, to="b2"), body, "push") == "wrong-destination"
    # Signed for b2 with b2's key, but naming b1: what a compromised pod could forge.
    forged = signed("push", body, to="b2", extra={"X-Roomgate-Destination": ME})
    assert verifier().verify(forged, body, "push") == "bad-signature"
    assert verifier().verify(signed("push", body, now=1), body, "push") == "stale"
    assert verifier(clock=lambda: 1000).verify(signed("push", body, now=1061), body, "push") == "stale"
    assert verifier(clock=lambda: 1000).verify(signed("push", body, now=1060), body, "push") is None
    assert verifier().verify(signed("push", body, secret="another-secret-0123456789abcdef0123"), body, "push") == "bad-signature"
    assert verifier().verify(signed("push", body, extra={"X-Roomgate-Timestamp": "12x"}), body, "push") == "stale"


def test_a_replay_is_refused_in_any_spelling_of_the_header():
    check, body = verifier(), b"{}"
    first = signed("push", body, room="r", epoch=1)
    assert check.verify(first, body, "push") is None
    sig = first.get("X-Roomgate-Signature")
    for spelling in (sig, f" {sig}", f"{sig},x", f"v2=00000000:00,{sig}"):
        again = Headers({**first, "x-roomgate-signature": spelling}.items())
        assert check.verify(again, body, "push") == "replayed"
    # A retry signs anew (a later second): a new proof, taken.
    later = int(first.get("X-Roomgate-Timestamp")) + 1
    assert check.verify(signed("push", body, room="r", epoch=1, now=later), body, "push") is None


def test_non_ascii_signatures_are_refused_never_raised():
    body = b"{}"
    for bad in ("v2=00000000:é", "v2=é", "v2=\udcff", "é"):
        headers = signed("push", body, extra={"X-Roomgate-Signature": bad})
        assert verifier().verify(headers, body, "push") == "bad-signature"
    headers = signed("push", body, room="r", extra={"X-Roomgate-Room": "ré"})
    assert verifier().verify(headers, body, "push") == "bad-signature"


def test_key_format_is_checked_with_an_error_that_names_no_key():
    good = backend_key(SECRET, ME)
    assert parse_keys(f" {good} ,\n{good}\n") == [good, good]
    with pytest.raises(KeyFormatError) as refused:
        parse_keys(f"{good},{good[:-1]}!")
    assert "key 2 of 2" in str(refused.value) and good[14:] not in str(refused.value)
    with pytest.raises(KeyFormatError):
        Verifier("", [good])  # keys without the backend id they are for


def test_keys_from_the_environment_or_a_file(tmp_path):
    good = backend_key(SECRET, ME)
    assert Verifier.from_env({"ROOMGATE_BACKEND_ID": ME, "ROOMGATE_BACKEND_KEYS": good}).keys == [good]
    path = tmp_path / "keys"
    path.write_text(f"{good}\n{backend_key('other-secret-0123456789abcdef0123456', ME)}\n")
    assert len(Verifier.from_env({"ROOMGATE_BACKEND_ID": ME, "ROOMGATE_BACKEND_KEYS_FILE": str(path)}).keys) == 2
    with pytest.raises(KeyFormatError):
        Verifier.from_env({"ROOMGATE_BACKEND_ID": ME, "ROOMGATE_BACKEND_KEYS": "secret-by-mistake"})
    assert Verifier.from_env({}).verify(signed("push"), b"", "push") == "unsigned"


def test_the_replay_cache_is_bounded_forgets_after_its_ttl_and_takes_a_proof_once_across_threads():
    cache = ReplayCache(ttl_s=10, max_entries=3)
    assert [cache.take(p, 0) for p in (b"a", b"b", b"c", b"d")] == [True] * 4
    assert len(cache) == 3 and cache.take(b"d", 1) is False
    assert cache.take(b"d", 11) is True  # past its ttl: forgotten
    shared, wins = ReplayCache(), []
    threads = [threading.Thread(target=lambda: wins.append(shared.take(b"p", 0))) for _ in range(16)]
    [t.start() for t in threads]
    [t.join(5) for t in threads]
    assert sorted(wins) == [False] * 15 + [True]
