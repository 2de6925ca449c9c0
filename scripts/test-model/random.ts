/**
 * Deterministic pseudo-random numbers for test weights: mulberry32 seeded per tensor from the model
 * seed and the tensor's name, so a tensor's values do not depend on the order tensors are made in.
 */

function fnv1a32(text: string, basis = 0x811c9dc5): number {
  let h = basis;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** `count` values uniform in [-scale, scale). */
export function randomValues(seed: number, name: string, count: number, scale: number): Float32Array {
  let state = fnv1a32(name, fnv1a32(String(seed)));
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const u = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    out[i] = (u * 2 - 1) * scale;
  }
  return out;
}
