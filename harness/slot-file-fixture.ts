/** Slot files as llama-server writes them (`POST /slots/N?action=save`), built in memory for tests of what reads them (`kv/`). */
import { SLOT_FILE_MAGIC } from "../pool/slot-file.ts";

/** A slot file as llama-server writes one: `n` tokens in one stream of `streams`, `layers` layers of K and V rows (of ggml `type`, f16 by default). */
export function slotFile(n: number, o: { streams?: number; layers?: number; row?: number; type?: number; vTrans?: boolean; media?: boolean; token?: (i: number) => number } = {}): Uint8Array<ArrayBuffer> {
  const { streams = 2, layers = 2, row = 8, vTrans = false } = o;
  const out: number[] = [];
  const u32 = (x: number) => out.push(x & 0xff, (x >>> 8) & 0xff, (x >>> 16) & 0xff, (x >>> 24) & 0xff);
  u32(SLOT_FILE_MAGIC);
  u32(3);
  u32(n + 4);
  u32(-1 >>> 0);
  u32(1);
  u32(n);
  for (let i = 0; i < n; i++) u32(o.token ? o.token(i) : 100 + i);
  u32(o.media ? 1 : 0);
  u32(streams);
  u32(0);
  for (let s = 1; s < streams; s++) {
    if (s > 1) {
      u32(0);
      continue;
    }
    u32(n);
    for (let i = 0; i < n; i++) (u32(i), u32(1), u32(s));
    u32(vTrans ? 1 : 0);
    u32(layers);
    const rows = (tag: number) => {
      u32(o.type ?? 1);
      u32(row);
      u32(0);
      // Bytes that read as finite f16 values (no 0x7c-0x7f or 0xfc-0xff, whose exponent is all ones), each row its own.
      for (let c = 0; c < n; c++) for (let b = 0; b < row; b++) out.push((tag + c) % 124);
    };
    for (let l = 0; l < layers; l++) rows(l * 16);
    for (let l = 0; l < layers; l++) {
      if (!vTrans) rows(128 + l * 16);
      else {
        u32(1);
        u32(2);
        u32(3);
        for (let j = 0; j < 3; j++) for (let c = 0; c < n; c++) out.push(j, c % 124);
      }
    }
  }
  return new Uint8Array(out);
}
