// The pin injection's pure parts (src/http/pin-inject.ts): which answers qualify, the tags, and the
// scanner that finds the end of <head> in a body fed in pieces of every size.
import { describe, expect, it } from 'vitest';
import { HeadScanner, injectable, injectedFields, MAX_SCAN_BYTES, pairsOf, pinTags, pinTagsWith } from '../../src/http/pin-inject.js';

const TAGS = Buffer.from('<!--PIN-->');

/** The body through a scanner in pieces of `size` bytes (the last may be shorter): what is sent. */
function through(body: string | Buffer, size: number, max = MAX_SCAN_BYTES): { out: Buffer; injected: boolean } {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'latin1') : body;
  const s = new HeadScanner(TAGS, max);
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) {
    const piece = bytes.subarray(i, i + size);
    if (s.pending) {
      // A fresh buffer per piece, as a socket read is (the scanner may return views of it).
      const got = s.feed(Buffer.from(piece));
      if (got !== null) out.push(...got);
    } else out.push(Buffer.from(piece));
  }
  if (s.pending) out.push(...s.flush());
  return { out: Buffer.concat(out), injected: s.injected };
}

/** The body through pieces of every size from 1 to its length: all give `want`. */
function expectEverySplit(body: string, want: string): void {
  for (let size = 1; size <= body.length; size++) {
    const { out } = through(body, size);
    expect(out.toString('latin1'), `pieces of ${size}`).toBe(want);
  }
}

describe('which answers get the pin', () => {
  const html: [string, string][] = [['Content-Type', 'text/html; charset=utf-8']];
  it('a 200 text/html in any spelling and with any parameters', () => {
    expect(injectable(200, html)).toBe(true);
    expect(injectable(200, [['content-type', 'TEXT/HTML']])).toBe(true);
    expect(injectable(200, [['Content-Type', ' text/html ;charset=iso-8859-1']])).toBe(true);
    expect(injectable(200, [['Content-Type', 'text/html'], ['Content-Encoding', 'identity']])).toBe(true);
  });
  it('not another status, media type, an encoding, a range, no-transform, or two Content-Types', () => {
    expect(injectable(201, html)).toBe(false);
    expect(injectable(304, html)).toBe(false);
    expect(injectable(200, [['Content-Type', 'text/plain']])).toBe(false);
    expect(injectable(200, [['Content-Type', 'application/xhtml+xml']])).toBe(false);
    expect(injectable(200, [['Content-Type', 'text/htmlx']])).toBe(false);
    expect(injectable(200, [])).toBe(false);
    expect(injectable(200, [...html, ['Content-Encoding', 'gzip']])).toBe(false);
    expect(injectable(200, [...html, ['content-encoding', 'identity, br']])).toBe(false);
    expect(injectable(200, [...html, ['Content-Range', 'bytes 0-1/2']])).toBe(false);
    expect(injectable(200, [...html, ['Cache-Control', 'public, No-Transform']])).toBe(false);
    expect(injectable(200, [...html, ['Content-Type', 'text/html']])).toBe(false);
  });
  it('flat lists as pairs; the dropped fields and the new length', () => {
    expect([...pairsOf(['A', '1', 'B', '2', 'odd'])]).toEqual([['A', '1'], ['B', '2']]);
    const fields = ['Content-Type', 'text/html', 'ETag', '"x"', 'Last-Modified', 'Mon, 01 Jan 2024 00:00:00 GMT', 'content-length', '5', 'X-A', '1'];
    expect(injectedFields(fields, 15)).toEqual(['Content-Type', 'text/html', 'X-A', '1', 'Content-Length', '15']);
    expect(injectedFields(fields, null)).toEqual(['Content-Type', 'text/html', 'X-A', '1']);
  });
});

describe('the tags', () => {
  it('pinTagsWith makes the same tags as pinTags', () => {
    const o = { scriptPath: '/s.js', sri: 'sha384-Y', param: 'p' };
    expect(pinTagsWith(o)('r.1.s').equals(pinTags('r.1.s', o))).toBe(true);
  });
  it('a kept chunk is copied: the caller may not reuse it, but the scanner does not hold it', () => {
    const s = new HeadScanner(TAGS);
    const first = Buffer.from('<html><he');
    expect(s.feed(first)).toBeNull();
    first.fill(0x78);
    expect(Buffer.concat(s.feed(Buffer.from('ad>x')) ?? []).toString()).toBe('<html><head><!--PIN-->x');
  });
  it('a meta tag with the pin and the external script with its SRI; attribute values escaped', () => {
    const tags = pinTags('a"b<c>&.ts.sig', { scriptPath: '/_roomgate/room-pin.v1.js', sri: 'sha384-X', param: 'roomgate_pin' }).toString();
    expect(tags).toBe(
      '<meta name="roomgate-pin" content="a&quot;b&lt;c&gt;&amp;.ts.sig"><script src="/_roomgate/room-pin.v1.js" integrity="sha384-X" crossorigin="anonymous"></script>',
    );
    expect(pinTags('p', { scriptPath: '/s.js', sri: 's', param: 'rp' }).toString()).toContain('content="p" data-param="rp">');
  });
});

describe('where the tags go', () => {
  it('right after <head>, whatever the split', () => {
    const page = '<!DOCTYPE html>\n<html lang="en">\n<head>\n<title>t</title></head><body>x</body></html>';
    expectEverySplit(page, page.replace('<head>', '<head><!--PIN-->'));
  });
  it('after a <head> with attributes, quoted ">" included, in any case', () => {
    const page = '<HTML><HEAD data-x="a>b" data-y=\'c>d\' profile=x>rest';
    expectEverySplit(page, page.replace("profile=x>", 'profile=x><!--PIN-->'));
  });
  it('past comments (a <head> inside one does not count) and processing instructions', () => {
    const page = '\xef\xbb\xbf<?xml version="1.0"?><!-- <head> --><!----><html><!-- a -- b --><head>x';
    expectEverySplit(page, page.replace('<head>x', '<head><!--PIN-->x'));
  });
  it('<head/> and a <head> with white space before ">"', () => {
    expectEverySplit('<head/>x', '<head/><!--PIN-->x');
    expectEverySplit('<head\n>x', '<head\n><!--PIN-->x');
  });
  it('not injected: no <head> before other content, <header>, a closing tag, text with "<"', () => {
    for (const page of ['<html><body><head>x', '<header>x</header><head>', '<!doctype html><headx>', '</html><head>', 'a < b <head>', '<script>"<head>"</script>', '<html><hea']) {
      for (let size = 1; size <= page.length; size++) {
        const r = through(page, size);
        expect(r.out.toString('latin1'), `${page} in pieces of ${size}`).toBe(page);
        expect(r.injected).toBe(false);
      }
    }
  });
  it('a body that ends before <head> is decided: everything kept is sent unchanged', () => {
    for (const page of ['', '<!DOCTYPE html>', '<!-- never closed', '<html lang="e', '<he', '<']) {
      const r = through(page, 1);
      expect(r.out.toString('latin1')).toBe(page);
      expect(r.injected).toBe(false);
    }
  });
  it('a huge preamble: past the scan window the body goes on unchanged, at most the window held', () => {
    const page = `<!--${'x'.repeat(MAX_SCAN_BYTES)}--><head>tail`;
    const s = new HeadScanner(TAGS);
    let held = 0;
    let sent: Buffer[] | null = null;
    for (let i = 0; i < page.length && sent === null; i += 1000) {
      sent = s.feed(Buffer.from(page.slice(i, i + 1000), 'latin1'));
      if (sent === null) held = i + 1000;
    }
    expect(held).toBeLessThanOrEqual(MAX_SCAN_BYTES);
    expect(s.injected).toBe(false);
    expect(Buffer.concat(sent ?? []).toString('latin1')).toBe(page.slice(0, held + 1000));
    // Within the window, the same preamble shape is injected.
    expect(through(`<!--${'x'.repeat(100)}--><head>t`, 7).injected).toBe(true);
  });
  it('a one-piece huge body is decided at once, the bytes past the window included', () => {
    const page = `<html${' a'.repeat(MAX_SCAN_BYTES)}><head>`;
    const r = through(page, page.length);
    expect(r.injected).toBe(false);
    expect(r.out.toString('latin1')).toBe(page);
  });
  it('UTF-16 (a "<" followed by a zero byte) is never injected', () => {
    const page = Buffer.from('<html><head>', 'utf16le');
    expect(through(page, 1).injected).toBe(false);
    expect(through(Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from('<head>', 'utf16le').swap16()]), 3).injected).toBe(false);
  });
  it('random bytes never throw, and what is sent is the input, or the input with the tags once', () => {
    let seed = 7;
    const rnd = (n: number): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const alphabet = ['<', '>', '"', "'", '!', '-', 'head', 'HTML', ' ', 'x', '?', '/', '<!--', '-->', 'heade'];
    for (let n = 0; n < 2000; n++) {
      let page = '';
      for (let k = rnd(20); k > 0; k--) page += alphabet[rnd(alphabet.length)];
      const r = through(page, 1 + rnd(5));
      const out = r.out.toString('latin1');
      if (r.injected) expect(out.replace('<!--PIN-->', '')).toBe(page);
      else expect(out).toBe(page);
    }
  });
});
