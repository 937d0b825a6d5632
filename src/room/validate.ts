// A room key is checked here before it is hashed, stored or logged as a room.
// Anything that fails is treated as absent by the caller.

/** Hard cap whatever the configured pattern says: keeps regex work and memory per key bounded. */
export const MAX_ROOM_KEY_LENGTH = 1024;

export type RoomValidator = (candidate: string) => boolean;

export function createRoomValidator(pattern: string): RoomValidator {
  const re = new RegExp(pattern);
  return (candidate) => candidate.length > 0 && candidate.length <= MAX_ROOM_KEY_LENGTH && re.test(candidate);
}
