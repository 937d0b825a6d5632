// roomgate's receiving half for Node backends on node:http and `ws` (docs/node-kit.md), exported
// by the npm package as `roomgate/backend`. It depends on nothing of the gateway but the proof
// format (src/http/call-proof.ts), which it shares with the gateway's signer: one place.
export { createBackendKit, DEFAULT_HANDOFF_PATH, DEFAULT_PUSH_PATH, type BackendKit, type BackendKitOptions } from './kit.js';
export { keysFromEnv, parseKeys, KeyFormatError } from './keys.js';
export { createVerifier, ReplayCache, type Refusal, type Verifier, type VerifierOptions } from './proofs.js';
export { RoomTable, type Room, type RoomSocket } from './rooms.js';
export { CLOSE_SERVICE_RESTART, CLOSE_WRONG_ROOM, ROOM_MOVED, mountRefusal, ownerOf, socketIdOf, type Owner } from './fence.js';
export { HandoffHooks, LEASE_MAX_MS, type HandoffApp } from './handoff.js';
export { receivePush, type Deliver, type PushMeta } from './push.js';
export type { ResumedSocket, SocketInfo } from './upgrade.js';
