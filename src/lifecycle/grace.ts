// The graceful stop's wait: live sockets get up to graceMs to end by themselves before the rest
// are closed. Polled (a tunnel ends on its own socket's events, which the stop does not own).

/** How often the remaining count is read while waiting. */
export const GRACE_POLL_MS = 100;

/**
 * Resolves once `remaining()` is 0 or `graceMs` has passed, whichever is first; returns what is
 * still left (0 when everything ended in time).
 */
export async function waitForDrain(remaining: () => number, graceMs: number): Promise<number> {
  const deadline = Date.now() + graceMs;
  while (remaining() > 0 && Date.now() < deadline) await sleep(Math.min(GRACE_POLL_MS, deadline - Date.now()));
  return remaining();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
