/**
 * Passes an SSE answer on whole event by whole event, and ends it in its dialect's words when the
 * server or node answering it is gone: the source failed, or closed before the dialect's final
 * event (a killed llama-server closes its socket like a finished one). The bytes of an event still
 * in flight are dropped rather than sent half, so an error never lands glued onto a cut event.
 * Used where an answer leaves a server for a client: the serving node's proxy and the node that
 * forwarded the request to it (which sees a clean ending from the first and adds nothing).
 */
import { brokenStreamEnding, endOfLastEvent, MAX_HELD_EVENT_BYTES } from "./stream-endings.ts";
import { emptySse, isFinalEvent, readSse } from "./sse-events.ts";
import { tapStream, tappedAnswer, type TapHooks } from "./stream-tap.ts";

const encoder = new TextEncoder();
const EMPTY = new Uint8Array(0);

export interface Broken {
  message: string;
  code: string;
}

/** `body`, event by event, ended with `route`'s error event saying `gone` when it breaks (in the tap it passes through, if any). */
export function guardSse(body: ReadableStream<Uint8Array>, route: string, gone: Broken): ReadableStream<Uint8Array> {
  return tapStream(body, sseGuard(route, gone));
}

/** The guard's hooks on a stream's tap (`stream-tap.ts`). */
function sseGuard(route: string, gone: Broken): TapHooks {
  let decoder = new TextDecoder();
  let events = emptySse();
  // The bytes of the event still arriving, as they came: each piece is scanned once, joined once.
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  // The events passed last, not read yet: only the last event decides how the stream ended, and
  // the next whole events passed make these moot, so most are never decoded at all.
  let unread: Uint8Array | undefined;
  // Whether what is passed next starts an event (what went before ended one).
  let atStart = true;
  const read = (bytes: Uint8Array, stream: boolean) => void (events = readSse(events, decoder.decode(bytes, { stream })));
  const ending = () => ({ add: encoder.encode(brokenStreamEnding(route, gone.message, gone.code)), end: { done: true } as const });
  return {
    onChunk(piece) {
      // An event's blank line may begin in the held bytes: their last three are scanned with the piece.
      const before = heldBytes === 0 ? EMPTY : lastBytes(held, 3);
      const cut = Math.max(0, endOfLastEvent(before.length === 0 ? piece : concat([before, piece])) - before.length);
      if (cut === 0 && heldBytes + piece.length <= MAX_HELD_EVENT_BYTES) {
        held.push(piece);
        heldBytes += piece.length;
        return [];
      }
      // Past the bound an event is passed on unsplit: a whole answer repeated in one event fits under it.
      const upTo = cut === 0 ? piece.length : cut;
      const upToPiece = upTo === piece.length ? piece : piece.subarray(0, upTo);
      const whole = heldBytes === 0 ? upToPiece : concat([...held, upToPiece]);
      held = upTo < piece.length ? [piece.subarray(upTo)] : [];
      heldBytes = piece.length - upTo;
      if (unread) {
        if (atStart && startsWithData(whole)) {
          // Its first event is whole and carries data: the last event is in it or after it.
          events = emptySse();
          decoder = new TextDecoder();
        } else read(unread, true);
      }
      unread = whole;
      atStart = cut !== 0;
      return whole;
    },
    onEnd(end) {
      if (unread) read(unread, false);
      unread = undefined;
      // A failed source, or a tail that never became an event after one that does not finish the
      // stream: broken. The bytes of an event still in flight are dropped, not sent half.
      if (!end.done || !isFinalEvent(events.last, route)) return ending();
      return heldBytes > 0 ? { add: concat(held) } : undefined;
    },
  };
}

const DATA_FIELD = encoder.encode("data:");

/** Whether `bytes` begin with a `data:` line. */
function startsWithData(bytes: Uint8Array): boolean {
  if (bytes.length < DATA_FIELD.length) return false;
  for (let i = 0; i < DATA_FIELD.length; i++) if (bytes[i] !== DATA_FIELD[i]) return false;
  return true;
}

/** The last `n` bytes of `pieces` (fewer when they hold fewer). */
function lastBytes(pieces: readonly Uint8Array[], n: number): Uint8Array {
  const out: Uint8Array[] = [];
  let need = n;
  for (let i = pieces.length - 1; i >= 0 && need > 0; i--) {
    const p = pieces[i]!;
    out.unshift(p.subarray(Math.max(0, p.length - need)));
    need -= Math.min(need, p.length);
  }
  return concat(out);
}

function concat(pieces: readonly Uint8Array[]): Uint8Array {
  if (pieces.length === 1) return pieces[0]!;
  const out = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** `res` with its SSE body guarded (`guardSse`); any other answer as it is. */
export function guardedAnswer(res: Response, route: string, gone: Broken): Response {
  if (!(res.headers.get("content-type") ?? "").includes("text/event-stream") || !res.body) return res;
  return tappedAnswer(res, sseGuard(route, gone));
}
