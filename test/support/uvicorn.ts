// The Django Channels example under Debian's uvicorn (python3-uvicorn 0.17, `python3 -m uvicorn`:
// the package installs no /usr/bin/uvicorn) on a free port, tracked with the daphnes of daphne.ts
// (stopExample and stopDaphnes kill it; stopAsgiServer(app, 'SIGTERM') is its graceful shutdown).
// --ws wsproto: uvicorn's wsproto protocol closes each socket with 1012 on shutdown (its
// websockets protocol only drops the connection); --lifespan off: Django's ASGI handler has none.
import { EXAMPLE_APP, PYTHON, startAsgiServer, type AsgiApp, type DaphneApp } from './daphne.js';

export function startUvicorn(env: Record<string, string>, app: AsgiApp = EXAMPLE_APP): Promise<DaphneApp> {
  const args = ['-m', 'uvicorn', '--host', '127.0.0.1', '--port', '0', '--ws', 'wsproto', '--lifespan', 'off', '--no-access-log', app.asgi];
  return startAsgiServer('uvicorn', PYTHON, args, /Uvicorn running on http:\/\/127\.0\.0\.1:(\d+)/, env, app.cwd);
}
