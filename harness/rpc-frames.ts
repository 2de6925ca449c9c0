/** llama.cpp RPC requests for tests: frames, byte streams cut at random (seeded) places. */

export /** A deterministic generator, so a failing split can be replayed. */
function rng(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 4294967296;
  };
}

/** One request: `cmd u8 | size u64le | payload`. */
export function frame(cmd: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(9 + payload.length);
  out[0] = cmd;
  new DataView(out.buffer).setBigUint64(1, BigInt(payload.length), true);
  out.set(payload, 9);
  return out;
}

/** The parts one after another, as a plain Uint8Array. */
export const concat = (parts: readonly Uint8Array[]): Uint8Array => new Uint8Array(Buffer.concat(parts));

/** `bytes` cut into chunks of random sizes (mostly small, some up to ~70 KB). */
export function splitRandomly(bytes: Uint8Array, r: () => number): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; ) {
    const n = 1 + Math.floor(r() ** 3 * 70_000);
    chunks.push(bytes.slice(at, at + n));
    at += n;
  }
  return chunks;
}
