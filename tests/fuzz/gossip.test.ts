/**
 * Gossip frames under fuzzing: `readFrame` over a stream of arbitrary bytes cut at arbitrary
 * points gives frames, null at a clean end, or a WireError, never another exception and never a
 * hang; it never asks for a buffer over MAX_CONTROL_MESSAGE; and what it reads does not depend on
 * how the bytes were cut. `ControlMessageSchema` takes any JSON (and mutated valid messages)
 * without throwing, and what it accepts is a well-formed message.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { ControlMessageSchema, PROTOCOL_VERSION, type ControlMessage } from "../../mesh/messages.ts";
import type { RecvSide } from "../../mesh/transport.ts";
import { decodePayload, encodeFrame, MAX_CONTROL_MESSAGE, readFrame, WireError } from "../../streams/wire.ts";
import { fakeAnnouncement } from "../../harness/rogue-peer.ts";
import { closeRoster, ownClaim, publicKeyOf, revokePass } from "../../mesh/roster.ts";
import { concat, cutAt, cuts, mutate, mutation } from "./arbitraries.ts";
import { holds, holdsAsync } from "./settings.ts";

const RUNS = 200;
// Fixed, so the seed replays the same messages: the schema is fuzzed here, never the signatures.
const ROSTER_KEY = new Uint8Array(32).fill(7);
const ROSTER = publicKeyOf(ROSTER_KEY);
const PASS_SECRET = new Uint8Array(32).fill(9);
const PASS = { pass: { id: "5".repeat(32), name: "fuzz", key: publicKeyOf(PASS_SECRET), sig: "a".repeat(128) }, passSecret: PASS_SECRET };
const HANG_MS = 5_000;

/**
 * A receive side fed from chunks, as the transport hands them over: `read` gives at most one
 * chunk's bytes, null at the end; `readExact` fails on an early end with the transport's own
 * (non-Wire) error, as iroh's does. It remembers the largest buffer anyone asked it to fill.
 */
function recvOf(chunks: readonly Uint8Array[]): RecvSide & { largestRead: number } {
  const queue = chunks.filter((c) => c.length > 0).map((c) => c.slice());
  const side = {
    largestRead: 0,
    async read(buf: Uint8Array): Promise<number | null> {
      side.largestRead = Math.max(side.largestRead, buf.length);
      const head = queue[0];
      if (!head) return null;
      const n = Math.min(buf.length, head.length);
      buf.set(head.subarray(0, n));
      if (n === head.length) queue.shift();
      else queue[0] = head.subarray(n);
      return n;
    },
    async readExact(buf: Uint8Array): Promise<void> {
      side.largestRead = Math.max(side.largestRead, buf.length);
      for (let at = 0; at < buf.length; ) {
        const n = await side.read(buf.subarray(at));
        if (n === null) throw new Error("early eof");
        at += n;
      }
    },
    async stop() {},
  };
  return side;
}

type Outcome = { frames: unknown[]; end: "clean" | { wire: string } };

/** Reads frames until the end or the first error; an error that is not a WireError fails the property. */
async function readAll(recv: RecvSide): Promise<Outcome> {
  const frames: unknown[] = [];
  for (;;) {
    let f: unknown;
    try {
      f = await readFrame(recv);
    } catch (err) {
      if (!(err instanceof WireError)) throw new Error(`readFrame threw ${(err as Error)?.constructor?.name}, not a WireError: ${(err as Error)?.message}`);
      expect(err.message.length).toBeGreaterThan(0);
      return { frames, end: { wire: err.message } };
    }
    if (f === null) return { frames, end: "clean" };
    frames.push(f);
  }
}

const frameOf = (payload: Uint8Array) => {
  const out = new Uint8Array(4 + payload.length);
  new DataView(out.buffer).setUint32(0, payload.length);
  out.set(payload, 4);
  return out;
};

/** A stream piece: a well-formed frame, a frame of junk, a header claiming any length, or raw bytes. */
const piece: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((j) => encodeFrame(j)),
  fc.uint8Array({ maxLength: 64 }).map(frameOf),
  fc.nat().map((n) => frameOf(new Uint8Array(0)).map((b, i) => (i < 4 ? (n >>> (8 * (3 - i))) & 0xff : b))),
  fc.constantFrom(MAX_CONTROL_MESSAGE, MAX_CONTROL_MESSAGE + 1, 0xffffffff).map((n) => {
    const h = new Uint8Array(4);
    new DataView(h.buffer).setUint32(0, n);
    return h;
  }),
  fc.uint8Array({ maxLength: 64 }),
);

const stream = fc.array(piece, { maxLength: 8 }).map(concat);

function message(kind: number, id: string): ControlMessage {
  const announcement = fakeAnnouncement(id);
  const member = { nodeId: id, addresses: ["127.0.0.1:4433"] };
  switch (kind % 6) {
    case 0:
      return { v: PROTOCOL_VERSION, type: "hello", announcement, members: [member] };
    case 1:
      return { v: PROTOCOL_VERSION, type: "announce", announcement };
    case 2:
      return { v: PROTOCOL_VERSION, type: "members", members: [member] };
    case 3:
      // A guest's claim, as a node shows it: a pass the roster signed, bound to its id.
      return { v: PROTOCOL_VERSION, type: "announce", announcement: { ...announcement, trust: ownClaim({ roster: ROSTER, pass: PASS.pass, passSecret: PASS.passSecret }, id) } };
    case 4:
      return { v: PROTOCOL_VERSION, type: "roster", statements: [{ kind: "pass", pass: PASS.pass }, revokePass(ROSTER_KEY, PASS.pass.id, 1), closeRoster(ROSTER_KEY, 2)] };
    default:
      return { v: PROTOCOL_VERSION, type: "leave" };
  }
}

const validMessage = fc.tuple(fc.nat(), fc.string({ minLength: 1, maxLength: 64 })).map(([k, id]) => message(k, id));

describe("readFrame over arbitrary bytes, fuzzed", () => {
  test("frames, a clean end or a WireError; no buffer over the cap; the same whatever the chunking", async () => {
    await holdsAsync(
      fc.asyncProperty(stream, cuts, async (bytes, offsets) => {
        const whole = recvOf([bytes]);
        const reference = await readAll(whole);
        const split = recvOf(cutAt(bytes, offsets));
        expect(await readAll(split)).toEqual(reference);
        expect(Math.max(whole.largestRead, split.largestRead)).toBeLessThanOrEqual(MAX_CONTROL_MESSAGE);
      }),
      { runs: RUNS, hangMs: HANG_MS },
    );
  });

  test("valid frames, cut anywhere, read back as sent; cut short, a WireError", async () => {
    await holdsAsync(
      fc.asyncProperty(fc.array(validMessage, { minLength: 1, maxLength: 4 }), cuts, fc.nat(), async (msgs, offsets, cutShort) => {
        const frames = msgs.map(encodeFrame);
        const sent: unknown[] = JSON.parse(JSON.stringify(msgs));
        expect(await readAll(recvOf(cutAt(concat(frames), offsets)))).toEqual({ frames: sent, end: "clean" });
        // Cut short: the frames wholly before the cut, then a clean end only on a frame boundary.
        const at = cutShort % concat(frames).length;
        const ends = frames.map((_, i) => frames.slice(0, i + 1).reduce((n, f) => n + f.length, 0));
        const whole = ends.filter((e) => e <= at).length;
        const got = await readAll(recvOf(cutAt(concat(frames).subarray(0, at), offsets)));
        expect(got.frames).toEqual(sent.slice(0, whole));
        if (at === 0 || ends.includes(at)) expect(got.end).toBe("clean");
        else expect(got.end).toEqual({ wire: expect.stringContaining("ended inside a control message") });
      }),
      { runs: RUNS, hangMs: HANG_MS },
    );
  });
});

describe("control messages, fuzzed", () => {
  const parses = (raw: unknown) => {
    const parsed = ControlMessageSchema.safeParse(raw);
    if (!parsed.success) {
      expect(parsed.error.issues.length).toBeGreaterThan(0);
      return;
    }
    // What is accepted is a message we could send back: it encodes under the cap.
    expect(["hello", "announce", "members", "leave", "roster"]).toContain(parsed.data.type);
    expect(() => encodeFrame(parsed.data)).not.toThrow();
  };

  test("arbitrary JSON: accepted as a message or refused with issues, never a throw", () => {
    holds(fc.property(fc.jsonValue(), parses), { runs: RUNS });
  });

  test("arbitrary objects with a valid version and type: the same", () => {
    const shaped = fc.record({
      v: fc.oneof(fc.constant(PROTOCOL_VERSION), fc.jsonValue()),
      type: fc.constantFrom("hello", "announce", "members", "leave", "other"),
      announcement: fc.oneof(fc.jsonValue(), fc.string().map(fakeAnnouncement).chain((a) => fc.dictionary(fc.constantFrom(...Object.keys(a)), fc.jsonValue()).map((d) => ({ ...a, ...d })))),
      members: fc.jsonValue(),
    });
    holds(fc.property(shaped, parses), { runs: RUNS });
  });

  test("valid messages with bytes mutated: decodePayload gives JSON or a WireError, the schema a message or issues", () => {
    holds(
      fc.property(validMessage, fc.array(mutation, { minLength: 1, maxLength: 6 }), (msg, ms) => {
        const bytes = mutate(new TextEncoder().encode(JSON.stringify(msg)), ms);
        let raw: unknown;
        try {
          raw = decodePayload(bytes);
        } catch (err) {
          expect(err).toBeInstanceOf(WireError);
          return;
        }
        parses(raw);
      }),
      { runs: RUNS },
    );
  });
});

describe("demand from a peer, fuzzed", () => {
  test("any demand value: the announcement is kept, its demand a list of entries in range or none", () => {
    const entry = fc.record({ model: fc.oneof(fc.string(), fc.jsonValue()), slots: fc.jsonValue(), inFlight: fc.oneof(fc.integer(), fc.double()), queued: fc.oneof(fc.nat(), fc.integer({ min: -5, max: 5 }), fc.jsonValue()), waitMs: fc.oneof(fc.double(), fc.jsonValue()) }, { requiredKeys: [] });
    const demand = fc.oneof(fc.jsonValue(), fc.array(entry, { maxLength: 8 }), fc.array(fc.jsonValue(), { maxLength: 300 }));
    holds(
      fc.property(demand, (value) => {
        const parsed = ControlMessageSchema.safeParse({ v: PROTOCOL_VERSION, type: "announce", announcement: { ...fakeAnnouncement("n1"), demand: value } });
        expect(parsed.success).toBe(true);
        if (!parsed.success || parsed.data.type !== "announce") return;
        for (const d of parsed.data.announcement.demand) {
          expect(Number.isInteger(d.slots) && d.slots >= 0 && d.slots <= 4096).toBe(true);
          expect(Number.isInteger(d.queued) && d.queued >= 0).toBe(true);
          expect(d.waitMs >= 0 && d.waitMs <= 86_400_000).toBe(true);
        }
      }),
      { runs: RUNS },
    );
  });
});

describe("gossip regressions found by fuzzing", () => {
  test("a stream that ends inside a frame ends the read with a WireError, not the transport's error", async () => {
    const frame = encodeFrame({ v: PROTOCOL_VERSION, type: "leave" });
    for (const cut of [1, 3, 4, 5, frame.length - 1]) {
      const read = readFrame(recvOf([frame.subarray(0, cut)]));
      await expect(read).rejects.toBeInstanceOf(WireError);
      await expect(readFrame(recvOf([frame.subarray(0, cut)]))).rejects.toThrow("the stream ended inside a control message");
    }
  });
});
