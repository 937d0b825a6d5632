#!/usr/bin/python3
"""Generate test/fixtures/django-cookies.json from the real Django.

Run with Debian's python3-django (the pyenv python on PATH has no Django):

    /usr/bin/python3 scripts/make-django-fixtures.py

The output is deterministic (the clock is pinned), so regenerating it gives the same file unless
Django itself changes its signing. test/room/signing.test.ts checks roomgate against it:
 - `signer`: Signer(salt=S).sign(room)
 - `cookie`: the value HttpResponse.set_signed_cookie(name, room, salt=S) puts on the response,
   signed at `timestamp`; `checks` records what Django's own get_signed_cookie-equivalent
   (get_cookie_signer(salt=name + S).unsign(value, max_age=M)) says at a given clock, so the test
   proves roomgate agrees on expiry, including at the boundary.
"""
import json
import os
import sys
from unittest import mock

try:
    import django
    from django.conf import settings
except ImportError:
    sys.exit('Django not importable: apt-get install -y python3-django (and run with /usr/bin/python3)')

SECRET_KEY = 'roomgate-fixture-secret-key-do-not-use-in-production'
TIMESTAMP = 1700000000  # 2023-11-14T22:13:20Z, pinned so the file is reproducible
MAX_AGE = 3600

settings.configure(SECRET_KEY=SECRET_KEY, DEFAULT_CHARSET='utf-8')
django.setup()

from django.core import signing  # noqa: E402  (needs settings configured)
from django.http import HttpResponse  # noqa: E402

ROOMS = ['lobby', 'room:42', 'chat.general', 'a.b:c.d:e', 'x', 'Team-7_~notes']
SALTS = ['', 'roomgate']
COOKIE_NAME = 'rg_room'


def unsign_at(value, salt, now, max_age):
    """What request.get_signed_cookie(COOKIE_NAME, salt=salt, max_age=max_age) does, at `now`."""
    with mock.patch('django.core.signing.time.time', return_value=now):
        try:
            return {'ok': True, 'room': signing.get_cookie_signer(salt=COOKIE_NAME + salt).unsign(value, max_age=max_age)}
        except signing.SignatureExpired:
            return {'ok': False, 'reason': 'expired'}
        except signing.BadSignature:
            return {'ok': False, 'reason': 'bad-signature'}


signer_cases = []
cookie_cases = []
for salt in SALTS:
    for room in ROOMS:
        signer_cases.append({'salt': salt, 'room': room, 'value': signing.Signer(salt=salt).sign(room)})

        response = HttpResponse()
        with mock.patch('django.core.signing.time.time', return_value=float(TIMESTAMP)):
            response.set_signed_cookie(COOKIE_NAME, room, salt=salt)
        morsel = response.cookies[COOKIE_NAME]
        # These rooms are cookie-safe, so SimpleCookie must not have quoted/escaped the value.
        assert morsel.coded_value == morsel.value, morsel.coded_value
        value = morsel.value
        checks = []
        # age == max_age is still valid (Django tests `age > max_age`), half a second more is not.
        for now in (TIMESTAMP + 1, TIMESTAMP + MAX_AGE, TIMESTAMP + MAX_AGE + 0.5, TIMESTAMP + 10 * MAX_AGE):
            checks.append({'nowMs': int(now * 1000), 'maxAgeS': MAX_AGE, 'expect': unsign_at(value, salt, now, MAX_AGE)})
        cookie_cases.append({
            'cookieName': COOKIE_NAME,
            'salt': salt,
            'room': room,
            'value': value,
            'timestamp': TIMESTAMP,
            'checks': checks,
        })

fixture = {
    'generator': 'scripts/make-django-fixtures.py',
    'django': django.get_version(),
    'secretKey': SECRET_KEY,
    'signer': signer_cases,
    'cookie': cookie_cases,
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test', 'fixtures', 'django-cookies.json')
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, 'w') as f:
    json.dump(fixture, f, indent=2)
    f.write('\n')
print('wrote', os.path.normpath(out), '(%d signer, %d cookie cases)' % (len(signer_cases), len(cookie_cases)))
