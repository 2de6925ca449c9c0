import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDirs } from "../../harness/transfer.ts";
import type { Log } from "../../base/log.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { SlotCache } from "../../pool/slot-cache.ts";
import { overBudget, toRestore, type SavedSlot } from "../../pool/slot-budget.ts";
import { isSlotFileName, readSlotFileHead, SLOT_FILE_MAGIC } from "../../pool/slot-file.ts";

function head(magic: number, version: number, tokens: number): Uint8Array {
  const b = new Uint8Array(12);
  const v = new DataView(b.buffer);
  v.setUint32(0, magic, true);
  v.setUint32(4, version, true);
  v.setUint32(8, tokens, true);
  return b;
}

describe("readSlotFileHead", () => {
  const cases: [string, Uint8Array, number, ReturnType<typeof readSlotFileHead>][] = [
    ["a state of 10 tokens", head(SLOT_FILE_MAGIC, 3, 10), 1000, { tokens: 10, version: 3, tokenEnd: 52 }],
    ["too short for a head", new Uint8Array(8), 8, { error: "the file has 8 bytes, fewer than a slot file's head" }],
    ["wrong magic", head(0x12345678, 3, 10), 1000, { error: "not a llama.cpp sequence state (wrong magic)" }],
    ["no tokens", head(SLOT_FILE_MAGIC, 3, 0), 1000, { error: "the slot file holds no tokens" }],
    ["a count past any context", head(SLOT_FILE_MAGIC, 3, 2 ** 30), 2 ** 33, { error: "the slot file claims 1073741824 tokens, more than any context" }],
    ["cut inside its tokens", head(SLOT_FILE_MAGIC, 3, 100), 300, { error: "the slot file ends before its 100 tokens do" }],
    ["cut right after its tokens (no state)", head(SLOT_FILE_MAGIC, 3, 10), 52, { error: "the slot file ends before its 10 tokens do" }],
  ];
  for (const [name, bytes, size, want] of cases) test(name, () => expect(readSlotFileHead(bytes, size)).toEqual(want));
});

describe("isSlotFileName", () => {
  const cases: [string, boolean][] = [
    [`${"a".repeat(64)}.bin`, true],
    [`${"0123456789abcdef".repeat(4)}.bin`, true],
    [`${"A".repeat(64)}.bin`, false],
    [`${"a".repeat(63)}.bin`, false],
    [`saving-0.bin`, false],
    [`../${"a".repeat(64)}.bin`, false],
    [`${"a".repeat(64)}.bin.tmp`, false],
  ];
  for (const [name, want] of cases) test(name, () => expect(isSlotFileName(name)).toBe(want));
});

const f = (path: string, bytes: number, usedAt: number): SavedSlot => ({ path, bytes, usedAt });

describe("overBudget", () => {
  const cases: [string, SavedSlot[], number, string[]][] = [
    ["under the budget: nothing", [f("a", 10, 1), f("b", 10, 2)], 20, []],
    ["over: the least recently used first", [f("a", 10, 3), f("b", 10, 1), f("c", 10, 2)], 15, ["b", "c"]],
    ["one big file over the budget alone goes", [f("a", 100, 5)], 50, ["a"]],
    ["a budget of 0 keeps nothing", [f("a", 1, 1), f("b", 1, 2)], 0, ["a", "b"]],
    ["ties by path, so every run picks alike", [f("b", 10, 1), f("a", 10, 1)], 10, ["b"]],
    ["no files", [], 0, []],
  ];
  for (const [name, files, budget, want] of cases) test(name, () => expect(overBudget(files, budget)).toEqual(want));
});

describe("toRestore", () => {
  const files = [f("old", 1, 1), f("new", 1, 3), f("mid", 1, 2)];
  const cases: [string, number, string[]][] = [
    ["one slot: the newest", 1, ["new"]],
    ["more slots than files: all, newest first", 4, ["new", "mid", "old"]],
    ["no slots", 0, []],
  ];
  for (const [name, slots, want] of cases) test(name, () => expect(toRestore(files, slots).map((x) => x.path)).toEqual(want));
});

describe("SlotCache's folders (a temp state dir)", () => {
  const dirs = tempDirs("mesh-slot-cache-");
  afterAll(dirs.remove);
  const quiet: Log = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
  const id = (c: string) => c.repeat(64);
  const llm = (name: string, type = "llm") => ({ name, type }) as unknown as ModelInfo;
  const cache = (root: string, o: { budget?: number; build?: string } = {}) =>
    new SlotCache({ root, build: "build" in o ? o.build : "v1-cpu", budgetBytes: o.budget ?? 1000, identityOf: (m) => (m.name === "hashed" ? id("a") : m.name === "other" ? id("b") : undefined), log: quiet });
  const file = (dir: string, c: string, bytes: number, usedAt: number) => {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, `${c.repeat(64)}.bin`);
    writeFileSync(path, new Uint8Array(bytes));
    utimesSync(path, usedAt, usedAt);
    return path;
  };

  test("a text model whose identity is known gets a folder under the build; none otherwise", () => {
    const root = dirs.fresh("folders");
    expect(cache(root).folderFor(llm("hashed"))).toBe(join(root, "v1-cpu", id("a")));
    expect(existsSync(join(root, "v1-cpu", id("a")))).toBe(true);
    expect(cache(root).folderFor(llm("not-hashed-yet"))).toBeUndefined();
    expect(cache(root).folderFor(llm("hashed", "embedding"))).toBeUndefined();
    expect(cache(root, { budget: 0 }).folderFor(llm("hashed"))).toBeUndefined();
    expect(cache(root, { build: undefined }).folderFor(llm("hashed"))).toBeUndefined();
  });

  test("caches of another build go when the cache starts", () => {
    const root = dirs.fresh("builds");
    file(join(root, "v0-cpu", id("a")), "1", 10, 1);
    const kept = file(join(root, "v1-cpu", id("a")), "2", 10, 1);
    cache(root);
    expect(readdirSync(root)).toEqual(["v1-cpu"]);
    expect(existsSync(kept)).toBe(true);
  });

  test("the budget holds across every model's files, least recently used first", () => {
    const root = dirs.fresh("budget");
    const oldA = file(join(root, "v1-cpu", id("a")), "1", 400, 100);
    const newA = file(join(root, "v1-cpu", id("a")), "2", 400, 300);
    const b = file(join(root, "v1-cpu", id("b")), "3", 400, 200);
    cache(root).keepBudget();
    expect([existsSync(oldA), existsSync(b), existsSync(newA)]).toEqual([false, true, true]);
  });

  test("a deleted model's folder goes; a name that is no identity touches nothing", () => {
    const root = dirs.fresh("drop");
    const a = file(join(root, "v1-cpu", id("a")), "1", 10, 1);
    const b = file(join(root, "v1-cpu", id("b")), "2", 10, 1);
    const c = cache(root);
    c.drop("../..");
    c.drop(id("a"));
    expect([existsSync(a), existsSync(b)]).toEqual([false, true]);
  });
});
