// Content-Type by file extension: a small built-in table of what web apps ship as static files.
// Unknown extensions are application/octet-stream (with nosniff, browsers do not guess).

const UTF8 = '; charset=utf-8';

const TYPES: ReadonlyMap<string, string> = new Map([
  ['html', `text/html${UTF8}`],
  ['htm', `text/html${UTF8}`],
  ['css', `text/css${UTF8}`],
  ['js', `text/javascript${UTF8}`],
  ['mjs', `text/javascript${UTF8}`],
  ['cjs', `text/javascript${UTF8}`],
  ['json', `application/json${UTF8}`],
  ['map', `application/json${UTF8}`],
  ['webmanifest', `application/manifest+json${UTF8}`],
  ['txt', `text/plain${UTF8}`],
  ['md', `text/markdown${UTF8}`],
  ['csv', `text/csv${UTF8}`],
  ['xml', `application/xml${UTF8}`],
  ['svg', `image/svg+xml${UTF8}`],
  ['png', 'image/png'],
  ['jpg', 'image/jpeg'],
  ['jpeg', 'image/jpeg'],
  ['gif', 'image/gif'],
  ['webp', 'image/webp'],
  ['avif', 'image/avif'],
  ['ico', 'image/vnd.microsoft.icon'],
  ['bmp', 'image/bmp'],
  ['woff', 'font/woff'],
  ['woff2', 'font/woff2'],
  ['ttf', 'font/ttf'],
  ['otf', 'font/otf'],
  ['eot', 'application/vnd.ms-fontobject'],
  ['wasm', 'application/wasm'],
  ['pdf', 'application/pdf'],
  ['zip', 'application/zip'],
  ['gz', 'application/gzip'],
  ['br', 'application/x-brotli'],
  ['mp3', 'audio/mpeg'],
  ['ogg', 'audio/ogg'],
  ['wav', 'audio/wav'],
  ['mp4', 'video/mp4'],
  ['webm', 'video/webm'],
]);

export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

/** The Content-Type of a file name (or path), by its last extension, case-insensitive. */
export function contentType(name: string): string {
  const dot = name.lastIndexOf('.');
  if (dot < 0 || dot < name.lastIndexOf('/')) return DEFAULT_CONTENT_TYPE;
  return TYPES.get(name.slice(dot + 1).toLowerCase()) ?? DEFAULT_CONTENT_TYPE;
}
