// The ownership fields roomgate sends a backend with every request, handshake and push of a room
// (docs/ownership.md): the room and the epoch of its placement, a fencing token.

/** What the backend is told of the room a request belongs to. */
export interface Owner {
  readonly room: string;
  readonly epoch: number;
}

/** The ownership fields for a request, [name, value, ...], or [] for none (no room). */
export function ownerFields(owner: Owner | null | undefined): string[] {
  return owner ? ['X-Roomgate-Room', owner.room, 'X-Roomgate-Epoch', String(owner.epoch)] : [];
}

/** A field only roomgate may send a backend (any X-Roomgate-*, and its underscore spellings); `lower` is lower-case. */
export function isRoomgateField(lower: string): boolean {
  return lower.length > 11 && lower.charCodeAt(0) === 120 && lower.replaceAll('_', '-').startsWith('x-roomgate-');
}
