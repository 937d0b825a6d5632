// pino JSON logs. One line per upgrade and per proxy error; nothing per frame.
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { name: 'roomgate', pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}

/**
 * Exits once what was logged is written (an async destination may still hold the last lines),
 * or after a second whatever happens: a stdout that is gone must not keep the process alive.
 */
export function exitAfterFlush(out: { flush(cb: (err?: Error) => void): void }, code: number): void {
  let done = false;
  const go = (): void => {
    if (done) return;
    done = true;
    process.exit(code);
  };
  setTimeout(go, 1_000).unref();
  out.flush(() => go());
}
