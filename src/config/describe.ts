// Reading the schema: the keys it has, and what each allows, in words. Error messages, the
// reference and the example file all take their words from here, so they say the same thing.
import type { z } from 'zod';
import { configSchema, docs, type KeyDoc } from './schema.js';

type Node = z.core.$ZodType;
type Def = { type: string; innerType?: Node; shape?: Record<string, Node>; element?: Node; options?: Node[]; values?: unknown[]; entries?: Record<string, unknown>; checks?: Node[] };

const def = (n: Node): Def => n._zod.def as unknown as Def;

/** A key's schema with the wrappers (default, nullable, optional) taken off. */
export interface Unwrapped {
  /** The value type: object, array, string, number, boolean, enum, literal or union. */
  readonly node: Node;
  readonly type: string;
  readonly nullable: boolean;
  readonly optional: boolean;
  /** The default value, or undefined when there is none (or the key is a section). */
  readonly default: unknown;
  readonly hasDefault: boolean;
  /** Docs of every layer, the outer layer's winning. */
  readonly doc: KeyDoc;
}

export function unwrap(schema: Node): Unwrapped {
  let n = schema;
  let doc: KeyDoc = {};
  let nullable = false;
  let optional = false;
  let hasDefault = false;
  let dflt: unknown;
  for (;;) {
    doc = { ...(docs.get(n as z.ZodType) ?? {}), ...doc };
    const d = def(n);
    if (d.type === 'default' && !hasDefault) {
      hasDefault = true;
      dflt = (d as unknown as { defaultValue: unknown }).defaultValue;
    } else if (d.type === 'nullable') nullable = true;
    else if (d.type === 'optional') optional = true;
    else if (d.type !== 'prefault' && d.type !== 'default') return { node: n, type: d.type, nullable, optional, default: dflt, hasDefault, doc };
    n = d.innerType as Node;
  }
}

/** The keys of an object node, in schema order (empty for anything else). */
export function keysOf(schema: Node): string[] {
  const u = unwrap(schema);
  return u.type === 'object' ? Object.keys(def(u.node).shape ?? {}) : [];
}

/** The schema of one step down: a key of an object, an element of an array (any number or "[]"). */
export function child(schema: Node, step: PropertyKey): Node | undefined {
  const u = unwrap(schema);
  const d = def(u.node);
  if (u.type === 'object' && typeof step === 'string' && Object.hasOwn(d.shape ?? {}, step)) return d.shape?.[step];
  if (u.type === 'array' && (typeof step === 'number' || step === '[]' || /^\d+$/.test(String(step)))) return d.element;
  return undefined;
}

/** The schema at a path of the configuration, e.g. ['backends', 0, 'url']. */
export function schemaAt(path: readonly PropertyKey[], root: Node = configSchema): Node | undefined {
  let n: Node | undefined = root;
  for (const step of path) n = n && child(n, step);
  return n;
}

/** The docs of every node along a path merged (for "is this a secret?": a list of tokens is). */
export function docsAlong(path: readonly PropertyKey[], root: Node = configSchema): KeyDoc {
  let n: Node | undefined = root;
  let doc: KeyDoc = {};
  for (const step of path) {
    n = n && child(n, step);
    if (n) doc = { ...doc, ...unwrap(n).doc };
  }
  return doc;
}

/** One documented key: a leaf, a list, or a nullable group (sections are not keys of their own). */
export interface KeyInfo extends Unwrapped {
  /** "listen.port", "backends[].url". */
  readonly path: string;
  readonly schema: Node;
}

/** Every key under a node, depth first in schema order; arrays of objects and nullable objects are listed and entered. */
export function listKeys(schema: Node = configSchema, at = ''): KeyInfo[] {
  const out: KeyInfo[] = [];
  for (const key of keysOf(schema)) {
    const s = child(schema, key) as Node;
    const u = unwrap(s);
    const path = at + key;
    if (u.type === 'object' && !u.nullable) {
      out.push(...listKeys(s, `${path}.`));
      continue;
    }
    out.push({ ...u, path, schema: s });
    if (u.type === 'object') out.push(...listKeys(s, `${path}.`));
    const el = u.type === 'array' ? (def(u.node).element as Node) : undefined;
    if (el && unwrap(el).type === 'object') out.push(...listKeys(el, `${path}[].`));
  }
  return out;
}

/** The top-level sections (and top-level lists) in schema order, with their docs. */
export function sections(): { key: string; info: Unwrapped }[] {
  return keysOf(configSchema).map((key) => ({ key, info: unwrap(child(configSchema, key) as Node) }));
}

const UNITS = { ms: 'milliseconds', s: 'seconds', bytes: 'bytes' } as const;

/** The messages given to a node's own rules (regex, refine, startsWith, min with words), in order. */
export function ruleMessages(node: Node): string[] {
  return (def(node).checks ?? []).flatMap((c) => {
    const error = (c._zod.def as unknown as { error?: () => unknown }).error;
    const m = typeof error === 'function' ? error() : undefined;
    return typeof m === 'string' ? [m] : [];
  });
}

function check(node: Node, kind: string): Record<string, unknown> | undefined {
  const c = (def(node).checks ?? []).find((x) => (x._zod.def as unknown as { check: string }).check === kind);
  return c?._zod.def as unknown as Record<string, unknown> | undefined;
}

/** "a, b or c" (or "a, b and c"). */
export function oneOf(items: readonly string[], conjunction = 'or'): string {
  return items.length < 2 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} ${conjunction} ${items.at(-1)}`;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** What a key allows, as an "expected ..." phrase: "a whole number from 0 to 65535". */
export function allowed(schema: Node): string {
  const u = unwrap(schema);
  const text = allowedValue(u.node, u.doc);
  return u.nullable ? `${text}, or null (${u.doc.null ?? 'none'})` : text;
}

function allowedValue(node: Node, doc: KeyDoc): string {
  const d = def(node);
  if (doc.allowed) return doc.allowed;
  switch (d.type) {
    case 'number': {
      const n = node as unknown as z.ZodNumber;
      const min = n.minValue ?? -Infinity;
      const max = n.maxValue ?? Infinity;
      const what = `${n.isInt ? 'a whole number' : 'a number'}${doc.unit ? ` of ${UNITS[doc.unit]}` : ''}`;
      const low = min === 0 && doc.zero ? `0 (${doc.zero})` : String(min);
      if (Number.isFinite(min) && Number.isFinite(max)) return `${what} from ${low} to ${max}`;
      if (Number.isFinite(min)) return `${what} of at least ${low}`;
      return Number.isFinite(max) ? `${what} of at most ${max}` : what;
    }
    case 'boolean':
      return 'true or false';
    case 'enum': {
      const values = Object.values(d.entries ?? {}).map((v) => JSON.stringify(v));
      return values.length > 2 ? `one of ${oneOf(values)}` : oneOf(values);
    }
    case 'literal': {
      const v = (d.values ?? [])[0];
      return v === 0 && doc.zero ? `0 (${doc.zero})` : JSON.stringify(v);
    }
    case 'union':
      return (d.options ?? []).map((o) => allowedValue(o, { ...doc, ...unwrap(o).doc, allowed: undefined })).join(' or ');
    case 'string': {
      const rules = ruleMessages(node);
      if (rules.length) return rules.join('; ');
      const min = check(node, 'min_length')?.minimum as number | undefined;
      return min ? (min === 1 ? 'non-empty text' : `text of at least ${plural(min, 'character')}`) : 'any text';
    }
    case 'array': {
      const min = check(node, 'min_length')?.minimum as number | undefined;
      const el = d.element as Node;
      const each = allowed(el);
      const head = min ? `a list of at least ${plural(min, 'item')}` : 'a list';
      return [`${head}, each ${each}`, ...ruleMessages(node)].join('; ');
    }
    case 'object':
      return `a mapping with the keys ${oneOf(keysOf(node), 'and')}`;
    default:
      return `a ${d.type}`;
  }
}

/** How a raw value reads in a message; secrets are never shown. */
export function showValue(value: unknown, doc: KeyDoc): string {
  if (value === undefined) return 'nothing';
  if (doc.secret === 'value' || (doc.secret === 'url-password' && typeof value !== 'string')) {
    if (typeof value === 'string') return `<redacted, ${plural(value.length, 'character')}>`;
    if (Array.isArray(value)) return `<redacted list of ${plural(value.length, 'item')}>`;
    return `<redacted ${value === null ? 'null' : typeof value}>`;
  }
  const s = doc.secret === 'url-password' ? JSON.stringify(redactUrlPassword(value as string)) : JSON.stringify(value);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** "redis://user:pw@host" -> "redis://user:<redacted>@host"; "redis://pw@host" -> "redis://<redacted>@host". */
export function redactUrlPassword(url: string): string {
  return url.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)([^@/?#]*)@/, (_, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return `${scheme}${colon >= 0 ? `${userinfo.slice(0, colon)}:<redacted>` : '<redacted>'}@`;
  });
}
