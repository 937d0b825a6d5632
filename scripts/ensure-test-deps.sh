#!/usr/bin/env bash
# Makes sure the machine has what the test suite uses beyond npm packages:
# Debian's python3-django (Django fixtures and live cross-checks of cookie signing), Channels and
# daphne (python3-django-channels, daphne: examples/django-channels under test, docs/django.md),
# redis-server (the tests start their own on free ports; Redis >= 6.2) and chromium (the page tests
# in test/browser drive /usr/bin/chromium headless through playwright-core, which brings no browser).
# As root with apt-get, installs what is missing; otherwise says what to install and fails.
set -euo pipefail

missing=()
/usr/bin/python3 -c 'import django' >/dev/null 2>&1 || missing+=(python3-django)
/usr/bin/python3 -c 'import channels' >/dev/null 2>&1 || missing+=(python3-django-channels)
[ -x /usr/bin/daphne ] || missing+=(daphne)
/usr/bin/python3 -c 'import pytest' >/dev/null 2>&1 || missing+=(python3-pytest)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ -x /usr/bin/chromium ] || missing+=(chromium)

if [ ${#missing[@]} -eq 0 ]; then exit 0; fi

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing test dependencies: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
  # The package starts a system redis-server on 6379; the tests never use it.
else
  echo "the test suite needs Debian packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
