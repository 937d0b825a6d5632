/**
 * The child's side of an IPC worker (driver.ts's IpcWorker): answers each command {id, ...} with
 * {id, ok: true, ...result} or {id, ok: false, error}, says {id: 0} once ready, and exits when
 * the channel closes (the orchestrator is gone). The suite's load generator and the soak's
 * clients serve their commands through it.
 */
export function serveIpc<C extends { id: number }>(handle: (c: C) => Promise<unknown>): void {
  process.on('message', (m: C) => {
    handle(m).then(
      (r) => process.send?.({ id: m.id, ok: true, ...(r as object) }),
      (err: Error) => process.send?.({ id: m.id, ok: false, error: err.message }),
    );
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.({ id: 0, ok: true, ready: true });
}
