#!/usr/bin/env bash
# Makes sure the machine has what the test suite uses beyond npm packages:
# Debian's python3-django (Django fixtures and live cross-checks of cookie signing), Channels and
# daphne (python3-django-channels, daphne: examples/django-channels under test, docs/django.md),
# uvicorn and channels_redis (python3-uvicorn, python3-channels-redis: the same example under
# uvicorn, and its channel layer on a real Redis, test/integration/django-uvicorn-redis.test.ts),
# redis-server (the tests start their own on free ports; Redis >= 6.2) and chromium (the page tests
# in test/browser drive /usr/bin/chromium headless through playwright-core, which brings no browser),
# nginx and HAProxy (the benchmark suite's smoke run, test/bench/smoke.test.ts: installed here, once,
# before any test runs; two of its runs at once each running apt-get failed on the dpkg lock), and
# promtool (Debian's prometheus package: test/deploy/observability.test.ts checks the alert rules,
# their unit tests and the dashboard's queries with it).
# As root with apt-get, installs what is missing; otherwise says what to install and fails.
set -euo pipefail

missing=()
/usr/bin/python3 -c 'import django' >/dev/null 2>&1 || missing+=(python3-django)
/usr/bin/python3 -c 'import channels' >/dev/null 2>&1 || missing+=(python3-django-channels)
[ -x /usr/bin/daphne ] || missing+=(daphne)
/usr/bin/python3 -c 'import uvicorn' >/dev/null 2>&1 || missing+=(python3-uvicorn)
/usr/bin/python3 -c 'import channels_redis' >/dev/null 2>&1 || missing+=(python3-channels-redis)
/usr/bin/python3 -c 'import pytest' >/dev/null 2>&1 || missing+=(python3-pytest)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
# Without its recommends (installed on its own below): they bring a node exporter, a service on port 9100.
bare=()
command -v promtool >/dev/null 2>&1 || bare+=(prometheus)

if [ ${#missing[@]} -eq 0 ] && [ ${#bare[@]} -eq 0 ]; then exit 0; fi

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing test dependencies: ${missing[*]} ${bare[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # RUNLEVEL=1: Debian's scripts start no service (nginx would take port 80).
  if [ ${#missing[@]} -gt 0 ]; then RUNLEVEL=1 apt-get install -y -qq "${missing[@]}" >/dev/null; fi
  if [ ${#bare[@]} -gt 0 ]; then RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${bare[@]}" >/dev/null; fi
  # A package may still have started its service (redis-server on 6379, nginx on 80, HAProxy,
  # Prometheus on 9090): the tests start their own, so stop those the install started.
  for svc in nginx haproxy prometheus; do
    case " ${missing[*]} ${bare[*]} " in *" $svc "*) service "$svc" stop >/dev/null 2>&1 || true ;; esac
  done
else
  echo "the test suite needs Debian packages: ${missing[*]} ${bare[*]}" >&2
  echo "install them with: sudo apt-get install -y ${missing[*]} ${bare[*]}" >&2
  exit 1
fi
