// The admin API's words for a room key it refuses (GET /rooms/ROOM answers 400 with them), so
// `where` and `sign` reject a key the same way.
import { MAX_ROOM_KEY_LENGTH } from '../room/validate.js';

export function invalidRoomMessage(pattern: string): string {
  return `invalid room key: it must match room.pattern ${pattern} and be 1 to ${MAX_ROOM_KEY_LENGTH} characters`;
}
