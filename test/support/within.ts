// A promise bounded in time, for tests whose every wait has a timeout: `within(p, what)` resolves
// with p, or rejects after the file's default (or `ms`) naming what did not happen.
export type Within = <T>(p: Promise<T>, what: string, ms?: number) => Promise<T>;

/** `within` with `defaultMs` when a call names no time of its own. */
export function withinOf(defaultMs: number): Within {
  return async <T>(p: Promise<T>, what: string, ms = defaultMs): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
    try {
      return await Promise.race([p, late]);
    } finally {
      clearTimeout(timer);
    }
  };
}
