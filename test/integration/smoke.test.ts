import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, backendRooms, startBackends, startGateway, stopAll, type BackendProc, type GatewayProc } from '../support/processes.js';

describe('smoke: gateway in front of real backends', () => {
  let backends: BackendProc[];
  let gw: GatewayProc;
  beforeAll(async () => {
    backends = await startBackends(['b1', 'b2', 'b3']);
    gw = await startGateway({ backends });
  });
  afterAll(stopAll);

  it('routes a page and a socket of one room to one backend', async () => {
    const res = await fetch(`${gw.url}/game/smoke/`);
    expect(res.status).toBe(200);
    const servedBy = res.headers.get('x-backend-id');
    const c = new Client(`${gw.wsUrl}/ws/live/?room=smoke`);
    expect(await c.join('smoke')).toBe(servedBy);
    const rooms = await backendRooms(backends);
    expect(rooms.get(servedBy!)).toEqual({ smoke: 1 });
    await c.close();
  });
});
