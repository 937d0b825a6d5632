// The page modules without processes: escaping, the CSP of each page matches its inline blocks,
// colour contrast, rendering of hostile values, room links and names, credentials, the stream.
import { emptyHistory } from '../support/history.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import vm from 'node:vm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { GAME_PAGE_TONES } from '../../examples/demo-backend/server.js';
import type { PublicRoom } from '../../src/shared-data/listing.js';
import { MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import { BASE_CSS, CONTRAST_PAIRS, HIDEABLE_COLUMNS, PALETTE, STREAM_CLIENT_JS, cspHash, escapeHtml, hiddenColumns, html, percent, trusted } from '../../src/pages/html.js';
import { LOBBY_SCRIPT, loadLobby, metaParts, newRoomName, renderLobbyPage, roomHref, roomPathTemplate } from '../../src/pages/lobby-page.js';
import { STATUS_SCRIPT, cacheSummary, collectStatus, rebalancingLine, renderStatusPage, type StatusView } from '../../src/pages/status-page.js';
import { StatusStream } from '../../src/control/status-stream.js';
import { StreamSlots, streamsFull } from '../../src/http/stream-slots.js';
import { sendError } from '../../src/http/replies.js';
import type { BackendEventView, PushEvent } from '../../src/runtime/views.js';
import { REBALANCE_OFF } from '../../src/runtime/rebalance.js';
import { fakeBackend, fakeHandoff } from '../support/control.js';
import { waitFor } from '../support/processes.js';
import { createRoomValidator } from '../../src/room/validate.js';

const XSS = '<img src=x onerror=alert(1)>';

/** WCAG 2 relative luminance and contrast ratio of two #rrggbb colours. */
function contrast(a: string, b: string): number {
  const lum = (hex: string): number => {
    const [r, g, bl] = [1, 3, 5].map((i) => {
      const c = parseInt(hex.slice(i, i + 2), 16) / 255;
      return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    }) as [number, number, number];
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/** The inline <style> and <script> bodies of a document. */
function inline(doc: string, tag: 'style' | 'script'): string[] {
  return [...doc.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, 'g'))].map((m) => m[1] as string);
}

/** A RuntimeView's reads, as the status page takes them: a degraded Redis gateway, b2 draining, hostile names. */
function fakeView(): StatusView {
  const deadline = Date.parse('2030-01-01T00:00:00Z');
  const backends = [
    fakeBackend('b1', 'http://10.0.0.1:8000', { rooms: 3, sockets: 6 }),
    fakeBackend('b2', 'http://10.0.0.2:8000', { weight: 2, rooms: 1, state: 'draining', admin: { state: 'draining', deadline, since: Date.now() } }),
  ];
  const event = (kind: BackendEventView['kind'], backend: string, detail: string): BackendEventView => ({ at: new Date().toISOString(), kind, backend, detail, roomsMoved: 0, liveRoomsMoved: 0 });
  const events = [event('joined', 'b1', 'http://10.0.0.1:8000'), event('joined', 'b2', 'http://10.0.0.2:8000'), event('down', 'b1', `detail ${XSS}`)];
  const at = new Date().toISOString();
  const pushes: PushEvent[] = [
    { at, call: 'room', target: `room-${XSS}`, result: 'delivered', backend: 'b1', sender: 'job:nightly', ms: 4, sockets: 3 },
    { at, call: 'fanout', target: 'tournament-*', result: 'sent', backend: '2 backends, 7 rooms', sender: 'api', ms: 12, sockets: null },
  ];
  return {
    gateway: () => ({ gatewayId: `gw-${XSS}`, store: 'redis', degraded: true, ready: true, sockets: 6, rooms: 3 }),
    cache: () => null,
    history: () => emptyHistory(['b1', 'b2']),
    backends: () => backends,
    events: () => events,
    pushes: () => pushes,
    handoffs: () => ({
      inProgress: [fakeHandoff({ id: 'h-2', room: 'chess-2', stage: 'import', result: null, release: null, ms: null })],
      recent: [fakeHandoff({ id: 'h-1', room: `room-${XSS}`, result: 'rolled-back', reason: `import answered 500 ${XSS}`, release: null })],
      drains: [],
      rebalance: REBALANCE_OFF,
      waiting: 2,
    }),
  };
}

describe('html template', () => {
  it('escapes every interpolated value, keeps SafeHtml, joins arrays, drops null/false', () => {
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe('&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
    const v = html`<p title="${'"><script>'}">${XSS}${[XSS, html`<b>ok</b>`]}${null}${false}${undefined}${0}</p>`;
    expect(v.value).toBe('<p title="&quot;&gt;&lt;script&gt;">&lt;img src=x onerror=alert(1)&gt;&lt;img src=x onerror=alert(1)&gt;<b>ok</b>0</p>');
    expect(html`${trusted('<i>')}`.value).toBe('<i>');
  });

  it('bars: a width class for every whole percent', () => {
    expect(percent(1, 3)).toBe(33);
    expect(percent(0, 0)).toBe(0);
    expect(percent(5, 0)).toBe(0);
    expect(percent(3, 3)).toBe(100);
    for (const p of [0, 33, 100]) expect(BASE_CSS).toContain(`.p${p}{width:${p}%}`);
  });

  it('empty columns: data-hide names the columns no row has a value in; the stylesheet leaves them out', () => {
    expect(hiddenColumns(['title', 'status', 'details'], [])).toBe('title status details');
    expect(hiddenColumns(['title', 'status', 'details'], [{ title: '', status: 'open' }, { title: '', details: 'a: 1' }])).toBe('title');
    expect(hiddenColumns(['detail'], [{ detail: 'x' }])).toBe('');
    for (const c of HIDEABLE_COLUMNS) expect(BASE_CSS).toContain(`table[data-hide~="${c}"] [data-col="${c}"]{display:none}`);
    expect(BASE_CSS).toContain('[hidden]{display:none!important}');
    // Narrow screens: tables of class "stack" show rows as labelled blocks.
    expect(BASE_CSS).toMatch(/@media \(max-width:40rem\)\{[^]*table\.stack thead\{position:absolute/);
    expect(BASE_CSS).toContain('content:attr(data-label)');
  });

  it('colours have enough contrast (text 4.5:1, bars 3:1), the demo banner tones too', () => {
    for (const [what, fg, bg, min] of CONTRAST_PAIRS) {
      expect(contrast(PALETTE[fg], PALETTE[bg]), what).toBeGreaterThanOrEqual(min);
    }
    for (const tone of GAME_PAGE_TONES) expect(contrast('#ffffff', tone), tone).toBeGreaterThanOrEqual(4.5);
  });
});

describe('status page', () => {
  it('renders every backend with state and bars, events, placement mode; escapes; CSP hashes match', () => {
    const view = fakeView();
    const snap = collectStatus(view, { internal: true });
    expect(snap.totalRooms).toBe(4);
    expect(snap.backends.map((b) => [b.id, b.state, b.rooms, b.sockets])).toEqual([
      ['b1', 'up', 3, 6],
      ['b2', 'draining', 1, 0],
    ]);
    expect(snap.events[0]?.kind).toBe('down'); // newest first
    const page = renderStatusPage(snap, { internal: true });
    const doc = page.html;
    expect(doc).toContain('<html lang="en">');
    expect(doc).toContain('<th scope="row" class="mono">b1</th>');
    expect(doc).toContain('http://10.0.0.1:8000');
    expect(doc).toContain('<span class="fill rooms p75">');
    expect(doc).toContain('<span class="fill rooms p25">');
    expect(doc).toContain('<span class="fill sockets p100">');
    expect(doc).toContain('state-draining');
    expect(doc).toContain('until 2030-01-01 00:00:00Z');
    expect(doc).toContain('Redis: degraded');
    expect(doc).not.toContain(XSS);
    expect(doc).toContain('gw-&lt;img src=x onerror=alert(1)&gt;');
    expect(doc).toContain('detail &lt;img');
    const ths = doc.match(/<th[\s>][^>]*>/g) ?? [];
    expect(ths.length).toBeGreaterThan(10);
    for (const th of ths) expect(th).toMatch(/scope="(col|row)"/);
    const [style] = inline(doc, 'style');
    const [script] = inline(doc, 'script');
    expect(script).toBe(STATUS_SCRIPT);
    expect(page.csp).toContain(`style-src ${cspHash(style as string)}`);
    expect(page.csp).toContain(`script-src ${cspHash(script as string)}`);
    expect(page.csp).toMatch(/default-src 'none'/);
    expect(page.csp).not.toMatch(/unsafe/);
  });

  it('the page cache line: off, no requests yet, then the hit ratio and the size', () => {
    expect(renderStatusPage(collectStatus(fakeView(), { internal: true }), { internal: true }).html).toContain('<dd id="cache">off</dd>');
    const counts = { hit: 90, stale: 5, 'stale-if-error': 1, miss: 10, coalesced: 4, bypass: 7 };
    const withCache = (hitRatio: number | null, c = counts): StatusView => ({
      ...fakeView(),
      cache: () => ({ enabled: true, objects: 42, bytes: 3 * 1_048_576, maxBytes: 64 * 1_048_576, hitRatio, counts: c, fetching: 0 }),
    });
    const zero = { hit: 0, stale: 0, 'stale-if-error': 0, miss: 0, coalesced: 0, bypass: 3 };
    expect(cacheSummary(collectStatus(withCache(null, zero), { internal: false }).cache)).toBe('no requests yet; 42 stored pages, 3 MiB of 64 MiB');
    expect(cacheSummary(collectStatus(withCache(100 / 110), { internal: false }).cache)).toBe('90.9 % hits (100 of 110); 42 stored pages, 3 MiB of 64 MiB');
  });

  it('recent pushes, newest first: room and sender on the admin port only; the sockets a receiver reached, when it said', () => {
    const snap = collectStatus(fakeView(), { internal: true });
    expect(snap.pushes.map((p) => [p.call, p.result, p.backend, p.sockets])).toEqual([
      ['fanout', 'sent', '2 backends, 7 rooms', null],
      ['room', 'delivered', 'b1', 3],
    ]);
    const doc = renderStatusPage(snap, { internal: true }).html;
    expect(doc).toContain('<th scope="col" class="num">Sockets</th>');
    expect([...doc.matchAll(/<td class="num" data-label="Sockets">([^<]*)<\/td>/g)].map((m) => m[1])).toEqual(['', '3']);
    expect(doc).toContain('<th scope="row" class="mono" data-label="Room">room-&lt;img');
    expect(doc).toContain('job:nightly');
    expect(doc).toContain('<td data-label="Call">fan-out</td>');
    expect(doc).toContain('<p id="no-pushes">No pushes yet.</p>'.replace('>No', ' hidden>No'));
    const pub = collectStatus(fakeView(), { internal: false });
    expect(pub.pushes.every((p) => p.target === '' && p.sender === '')).toBe(true);
    const pubDoc = renderStatusPage(pub, { internal: false }).html;
    expect(pubDoc).not.toContain('room-&lt;img');
    expect(pubDoc).not.toContain('job:nightly');
    expect(pubDoc).not.toContain('>Room<');
    expect(pubDoc).toContain('<td class="num" data-label="Sockets">3</td>');
    const none = renderStatusPage(collectStatus({ ...fakeView(), pushes: () => [] }, { internal: true }), { internal: true }).html;
    expect(none).toContain('<p id="no-pushes">No pushes yet.</p>');
  });

  it('room handoffs: those in progress first, then the done ones; hooks per backend; room and reason on the admin port only', () => {
    const snap = collectStatus(fakeView(), { internal: true });
    expect(snap.handoffHooks).toBe('b1 unknown, b2 unknown');
    expect(snap.handoffs.map((h) => [h.room, h.state, h.done])).toEqual([
      ['chess-2', 'import', false],
      [`room-${XSS}`, 'rolled-back', true],
    ]);
    const doc = renderStatusPage(snap, { internal: true }).html;
    expect(doc).toContain('<dd id="handoff-hooks">b1 unknown, b2 unknown</dd>');
    expect(doc).toContain('<span class="handoff-import">import...</span>');
    expect(doc).toContain('<span class="handoff-rolled-back">rolled-back</span>');
    expect(doc).toContain('<td data-label="Reason">import answered 500 &lt;img');
    expect(doc).toContain('<p id="no-handoffs" hidden>No handoffs yet.</p>');
    const pub = renderStatusPage(collectStatus(fakeView(), { internal: false }), { internal: false }).html;
    expect(pub).not.toContain('chess-2');
    expect(pub).not.toContain('import answered');
    expect(pub).toContain('<span class="handoff-rolled-back">rolled-back</span>');
    const none = renderStatusPage(collectStatus({ ...fakeView(), handoffs: () => ({ inProgress: [], recent: [], drains: [], rebalance: REBALANCE_OFF, waiting: 0 }) }, { internal: true }), { internal: true }).html;
    expect(none).toContain('<p id="no-handoffs">No handoffs yet.</p>');
    expect(none).toContain('<dt>Rebalancing</dt><dd id="rebalancing">off</dd>');
    const on = { ...REBALANCE_OFF, enabled: true, targets: ['b3'], moved: 4, failed: 1, last: 'moved chess-9 from b1 to b3' };
    const rebalancing = renderStatusPage(collectStatus({ ...fakeView(), handoffs: () => ({ inProgress: [], recent: [], drains: [], rebalance: on, waiting: 0 }) }, { internal: false }), { internal: false }).html;
    expect(rebalancing).toContain('<dd id="rebalancing">on: moving live rooms to b3; 4 moved, 1 failed (skew factor 1.5, 30 rooms/min)</dd>');
    expect(rebalancing).not.toContain('chess-9');
    expect(rebalancingLine({ ...on, targets: [] })).toBe('on: no backend to move rooms to now; 4 moved, 1 failed (skew factor 1.5, 30 rooms/min)');
  });

  it('room handoffs, version 2: per handoff the sockets resumed and reconnected and the held messages delivered; the requests waiting now', () => {
    const resumed = fakeHandoff({ id: 'h-3', held: { sockets: 3, resumed: 1, messages: 7, lostSockets: 0 } });
    const lost = fakeHandoff({ id: 'h-4', held: { sockets: 2, resumed: 0, messages: 1, lostSockets: 1 } });
    const view = { ...fakeView(), handoffs: () => ({ inProgress: [], recent: [lost, resumed, fakeHandoff({ id: 'h-5' })], drains: [], rebalance: REBALANCE_OFF, waiting: 4 }) };
    const snap = collectStatus(view, { internal: false });
    expect(snap.handoffs.map((h) => h.sockets)).toEqual(['', '1 resumed, 2 reconnected, 7 held messages delivered', '0 resumed, 2 reconnected, 1 held message delivered, 1 lost']);
    expect(snap.handoffWaiting).toBe(4);
    const doc = renderStatusPage(snap, { internal: false }).html;
    expect(doc).toContain('<td data-label="Sockets">1 resumed, 2 reconnected, 7 held messages delivered</td>');
    expect(doc).toContain('<dt>Requests waiting for a handoff</dt><dd id="handoff-waiting">4</dd>');
  });

  it('the public view has no backend URLs and no joined/removed details', () => {
    const snap = collectStatus(fakeView(), { internal: false });
    expect(snap.backends.every((b) => b.url === null)).toBe(true);
    expect(snap.events.filter((e) => e.kind === 'joined').every((e) => e.detail === '')).toBe(true);
    const doc = renderStatusPage(snap, { internal: false }).html;
    expect(doc).not.toContain('10.0.0.');
    expect(doc).not.toContain('>URL<');
    // The down event keeps its detail: the Detail column stays.
    expect(doc).toContain('<table id="events" class="stack" data-hide="">');
    const joinedOnly: StatusView = { ...fakeView(), events: () => fakeView().events().filter((e) => e.kind === 'joined') };
    const bare = renderStatusPage(collectStatus(joinedOnly, { internal: false }), { internal: false }).html;
    expect(bare).toContain('<table id="events" class="stack" data-hide="detail">');
    expect(bare).toContain('<th scope="col" data-col="detail">Detail</th>');
    expect(bare).toContain('<td data-col="detail" data-label="Detail"></td>');
  });

  it('the script never builds markup from data', () => {
    for (const s of [STATUS_SCRIPT, LOBBY_SCRIPT]) {
      expect(s).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/);
      expect(s).toContain(STREAM_CLIENT_JS);
    }
  });
});

describe('lobby page', () => {
  const room = (name: string, sockets: number, meta: PublicRoom['meta'] = null): PublicRoom => ({ room: name, sockets, since: new Date(0).toISOString(), meta, pinned: false, listed: true });

  it('renders rooms with links, counts, metadata and a leaderboard; escapes user data', () => {
    const page = renderLobbyPage(
      {
        rooms: [room('blue', 2, { title: XSS, status: '"><svg onload=alert(2)>', capacity: 4, tags: ['a', '</script>'] }), room(XSS, 1)],
        total: 2,
        online: { total: 3, rooms: 2 },
        board: 'global',
        scores: [{ member: XSS, score: 10, rank: 1 }],
      },
      { roomPath: '/game/{room}/', apiPrefix: '/_roomgate/api' },
    );
    const doc = page.html;
    expect(doc).toContain('<a href="/game/blue/">blue</a>');
    expect(doc).toContain('<td class="num" data-col="sockets" data-label="Players">2</td>');
    expect(doc).toContain('<p class="big" id="online-total" aria-labelledby="online-label">3</p>');
    expect(doc).toContain('capacity: 4, tags: [&quot;a&quot;,&quot;&lt;/script&gt;&quot;]');
    expect(doc).toContain(`<a href="/game/${encodeURIComponent(XSS)}/">&lt;img src=x onerror=alert(1)&gt;</a>`);
    expect(doc).not.toMatch(/<img|<svg|onerror=alert\(1\)>|<\/script>",/);
    expect(doc).toContain('<form class="card action" method="get" action="/_roomgate/lobby/new" target="_blank">');
    expect(inline(doc, 'script')).toEqual([LOBBY_SCRIPT]);
    expect(page.csp).toContain(`script-src ${cspHash(LOBBY_SCRIPT)}`);
    expect(page.csp).toContain(`style-src ${cspHash(BASE_CSS)}`);
    expect(page.csp).toContain("connect-src 'self'");
  });

  it('leaves out the columns no room has a value in, and the leaderboard table while it is empty', () => {
    const opts = { roomPath: '/game/{room}/', apiPrefix: '/_roomgate/api' };
    const base = { total: 2, online: { total: 2, rooms: 2 }, board: 'global' };
    const bare = renderLobbyPage({ ...base, rooms: [room('a', 1), room('b', 1, {})], scores: [] }, opts).html;
    expect(bare).toContain('<table id="rooms" class="stack" data-hide="title status details">');
    for (const c of ['title', 'status', 'details']) expect(bare).toContain(`<th scope="col" data-col="${c}">`);
    expect(bare).toContain('<table id="board" class="narrow" hidden>');
    expect(bare).toMatch(/<p id="no-scores">No scores yet\.<\/p>/);
    const some = renderLobbyPage({ ...base, rooms: [room('a', 1, { status: 'open' }), room('b', 1, { mode: 'ffa' })], scores: [{ member: 'ana', score: 1, rank: 1 }] }, opts).html;
    expect(some).toContain('<table id="rooms" class="stack" data-hide="title">');
    expect(some).toContain('<table id="board" class="narrow">');
    expect(some).toContain('<p id="no-scores" hidden>');
  });

  it('lists only listed rooms (metadata or api.listRooms), never a private key or a backend id; the counts take in every room', async () => {
    const store = new MemorySharedDataStore('gw', { presenceTtlMs: 60_000 });
    try {
      const since = Date.now();
      await store.publishPresence(
        [
          { room: 'private-7f3a9c2e', backend: 'backend-secret-1', sockets: 3, since },
          { room: 'public-1', backend: 'backend-secret-2', sockets: 2, since },
          { room: 'chess', backend: 'backend-secret-1', sockets: 1, since },
          { room: 'hidden-meta', backend: 'backend-secret-2', sockets: 1, since },
        ],
        60_000,
      );
      await store.setMeta('chess', { title: 'Chess' }, false);
      await store.setMeta('hidden-meta', { title: 'Quiet' }, false, false);
      const data = await loadLobby(store, { patterns: ['public-*'] }, 'global');
      expect(data.rooms?.map((r) => r.room)).toEqual(['public-1', 'chess']);
      expect(data.total).toBe(2);
      expect(data.online).toEqual({ total: 7, rooms: 4 });
      const doc = renderLobbyPage(data, { roomPath: '/game/{room}/', apiPrefix: '/_roomgate/api' }).html;
      expect(doc).toContain('<a href="/game/public-1/">public-1</a>');
      expect(doc).toContain('<a href="/game/chess/">chess</a>');
      for (const secret of ['private-7f3a9c2e', 'hidden-meta', 'Quiet', 'backend-secret', 'data-col="backend"']) expect(doc).not.toContain(secret);
      expect(LOBBY_SCRIPT).not.toContain('backend');
    } finally {
      await store.close();
    }
  });

  it('says when the store is unavailable instead of failing', () => {
    const doc = renderLobbyPage({ rooms: null, total: 0, online: null, board: 'global', scores: null }, { roomPath: '/game/{room}/', apiPrefix: '/_roomgate/api' }).html;
    expect(doc).toContain('id="unavailable"');
    expect(doc).toContain('Scores are unavailable right now.');
  });

  it('room links: encoded, no dot segments, never protocol-relative', () => {
    expect(roomHref('/game/{room}/', 'a/b?c#d')).toBe('/game/a%2Fb%3Fc%23d/');
    expect(roomHref('/game/{room}/', '$&')).toBe('/game/%24%26/');
    expect(roomHref('/game/{room}/', '..')).toBeNull();
    expect(roomPathTemplate(['/game/{room}/'], '/r/')).toBe('/game/{room}/');
    expect(roomPathTemplate(['//{room}/', '/play/{room}'], '/r/')).toBe('/play/{room}');
    expect(roomPathTemplate([], '/r/')).toBe('/r/{room}/');
  });

  it('new room names pass the room validator, or none is made', () => {
    const valid = createRoomValidator('^[A-Za-z0-9_.:-]{1,128}$');
    for (let i = 0; i < 50; i++) expect(valid(newRoomName(valid) as string)).toBe(true);
    expect(newRoomName(createRoomValidator('^[0-9]+$'))).toMatch(/^[0-9]{10}$/);
    expect(newRoomName(() => false)).toBeNull();
  });

  it('metadata as title, status and the rest', () => {
    expect(metaParts(null)).toEqual({ title: '', status: '', details: '' });
    expect(metaParts({ title: 3, status: 'open', a: { b: 1 } })).toEqual({ title: '3', status: 'open', details: 'a: {"b":1}' });
    expect(metaParts({ long: 'x'.repeat(500) }).details).toHaveLength(160);
  });
});

describe('stream client of the pages', () => {
  interface FakeSource {
    url: string;
    readyState: number;
    onerror: (() => void) | null;
    listeners: Record<string, (ev: { data: string }) => void>;
    closed: boolean;
  }

  /** Runs STREAM_CLIENT_JS against a fake EventSource and fetch; `answer` is what the probe gets. */
  function run(answer: () => Promise<unknown>) {
    const sources: FakeSource[] = [];
    const said: string[] = [];
    const got: string[] = [];
    class EventSource {
      readonly s: FakeSource;
      constructor(url: string) {
        this.s = { url, readyState: 0, onerror: null, listeners: {}, closed: false };
        sources.push(this.s);
      }
      get readyState(): number {
        return this.s.readyState;
      }
      set onerror(f: () => void) {
        this.s.onerror = f;
      }
      addEventListener(name: string, f: (ev: { data: string }) => void): void {
        this.s.listeners[name] = f;
      }
      close(): void {
        this.s.closed = true;
        this.s.readyState = 2;
      }
    }
    const fetch = vi.fn(answer);
    const ctx = vm.createContext({ EventSource, fetch, setTimeout, AbortController, location: { origin: 'http://gw.test' }, Math, Number, Object, say: (t: string) => said.push(t), got: (d: string) => got.push(d) });
    vm.runInContext(`${STREAM_CLIENT_JS}\nliveStream('/_roomgate/status/stream', { status: function (ev) { got(ev.data); } }, say);`, ctx);
    return { sources, said, got, fetch };
  }

  const refused = (code: string, retryAfter: string) => async () => ({
    ok: false,
    status: 503,
    headers: new Headers({ 'Retry-After': retryAfter }),
    json: async () => ({ error: { code, message: 'x' } }),
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it('a refused stream (503 too_many_streams): says why and counts down from Retry-After, then opens a new one', async () => {
    vi.useFakeTimers();
    const c = run(refused('too_many_streams', '5'));
    expect(c.sources).toHaveLength(1);
    const first = c.sources[0] as FakeSource;
    first.readyState = 2; // the browser gave up
    first.onerror?.();
    await vi.advanceTimersByTimeAsync(0);
    expect(c.fetch).toHaveBeenCalledWith('http://gw.test/_roomgate/status/stream', expect.objectContaining({ cache: 'no-store' }));
    expect(c.said.at(-1)).toBe('Live updates paused: too many live pages are open on this server right now; retrying in 5 s.');
    await vi.advanceTimersByTimeAsync(1000);
    expect(c.said.at(-1)).toMatch(/retrying in 4 s\.$/);
    expect(c.sources).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(4000);
    expect(c.said.at(-1)).toMatch(/retrying now\.$/);
    expect(c.sources).toHaveLength(2);
    c.sources[1]?.listeners['status']?.({ data: '{"n":1}' });
    expect(c.got).toEqual(['{"n":1}']);
  });

  it('store down, unreachable server, a stream that reconnects by itself', async () => {
    vi.useFakeTimers();
    const down = run(refused('store_unavailable', '2'));
    (down.sources[0] as FakeSource).readyState = 2;
    down.sources[0]?.onerror?.();
    await vi.advanceTimersByTimeAsync(0);
    expect(down.said.at(-1)).toMatch(/^Live updates paused: the server.s data store is unavailable; retrying in 2 s\.$/);

    const gone = run(() => Promise.reject(new TypeError('failed to fetch')));
    (gone.sources[0] as FakeSource).readyState = 2;
    gone.sources[0]?.onerror?.();
    await vi.advanceTimersByTimeAsync(0);
    expect(gone.said.at(-1)).toBe('Live updates paused: the server cannot be reached; retrying in 2 s.');
    // Failing again: a longer back-off.
    await vi.advanceTimersByTimeAsync(2000);
    (gone.sources[1] as FakeSource).readyState = 2;
    gone.sources[1]?.onerror?.();
    await vi.advanceTimersByTimeAsync(0);
    expect(gone.said.at(-1)).toMatch(/retrying in 4 s\.$/);

    const blip = run(() => Promise.reject(new Error('not asked')));
    blip.sources[0]?.onerror?.(); // readyState CONNECTING: EventSource retries by itself
    expect(blip.said).toEqual(['Live updates interrupted; reconnecting.']);
    expect(blip.fetch).not.toHaveBeenCalled();
  });
});

describe('status stream', () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = undefined;
  });

  it('sends a snapshot at once, then only changes; past its StreamSlots: 503; close() ends streams and frees the slot', async () => {
    let value = { n: 1 };
    const stream = new StatusStream({ snapshot: () => value, intervalMs: 20, pingMs: 60_000, retryMs: 2000, maxBufferedBytes: 1 << 20 });
    const slots = new StreamSlots(1);
    server = http.createServer((req, res) => {
      if (!slots.take(res)) return sendError(res, streamsFull(slots.max));
      if (!stream.open(req, res)) {
        res.writeHead(503);
        res.end();
      }
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    const until = async (pattern: RegExp): Promise<void> => {
      const deadline = Date.now() + 5_000;
      while (!pattern.test(text)) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${pattern} in ${text}`);
        const { value: chunk, done } = await reader.read();
        if (done) throw new Error(`stream ended: ${text}`);
        text += Buffer.from(chunk).toString();
      }
    };
    await until(/event: status\ndata: \{"n":1\}\n\n/);
    const full = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    expect(full.status).toBe(503);
    expect(full.headers.get('retry-after')).toBe('5');
    expect(await full.json()).toEqual({ error: { code: 'too_many_streams', message: expect.stringContaining('api.maxStreams: 1') } });
    await new Promise((r) => setTimeout(r, 100));
    expect(text.match(/event: status/g)).toHaveLength(1); // unchanged: nothing more sent
    value = { n: 2 };
    await until(/data: \{"n":2\}/);
    stream.close();
    const rest = await reader.read();
    expect(rest.done).toBe(true);
    expect(stream.size).toBe(0);
    await waitFor('the slot of the ended stream to be freed', 5_000, () => slots.size === 0);
  });
});
