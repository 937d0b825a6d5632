// Every table a caller can grow is bounded: a Map that forgets its oldest entries past `max`.

/** The latest this many of each table are kept (outcomes, applied messages, fences, socket states). */
export const REMEMBERED = 10_000;

/** Sets `key` as the newest entry of `map`, dropping the oldest past `max`. */
export function remember<K, V>(map: Map<K, V>, key: K, value: V, max: number = REMEMBERED): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) map.delete(map.keys().next().value as K);
}
