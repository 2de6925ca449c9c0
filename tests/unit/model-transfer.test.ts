import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FileHasher } from "../../models/file-hasher.ts";
import { arrivalName, isArrivalNameOf, throttledProgress, type TransferProgress } from "../../models/model-transfer.ts";
import { sha256, tempDirs } from "../../harness/transfer.ts";
import { waitFor } from "../../harness/wait.ts";

const dirs = tempDirs("mesh-transfer-");
afterAll(dirs.remove);
const freshDir = dirs.fresh;

describe("arrival names", () => {
  test.each([
    ["tiny", "whatever.gguf", "model", "tiny.gguf"],
    ["big", "Orig-Q4-00002-of-00003.gguf", "model", "big-00002-of-00003.gguf"],
    ["big", "mmproj-f16.gguf", "projector", "mmproj-big.gguf"],
    ["team/big", "x.gguf", "model", "team/big.gguf"],
    ["team/big", "x.gguf", "projector", "team/mmproj-big.gguf"],
  ] as const)("%s / %s (%s) arrives as %s", (model, file, kind, name) => {
    expect(arrivalName(model, file, kind)).toBe(name);
    expect(isArrivalNameOf(model, name)).toBe(true);
  });
  test.each([
    ["tiny", "other.gguf"],
    ["tiny", "../tiny.gguf"],
    ["tiny", "sub/tiny.gguf"],
    ["tiny", "tiny-1-of-2.gguf"],
    ["tiny", ".partial/tiny.gguf"],
    ["team/big", "big.gguf"],
  ])("%s never arrives as %s", (model, name) => expect(isArrivalNameOf(model, name)).toBe(false));
  test.each(["../x", "a/../../x", ".hidden", "", "a//b"])("model name %p is refused", (model) => {
    expect(() => arrivalName(model, "x.gguf", "model")).toThrow("cannot be used as a file name");
  });
});

describe("FileHasher", () => {
  test("caches per file version and notices a change", async () => {
    const path = join(freshDir("hasher"), "f.gguf");
    writeFileSync(path, "a".repeat(1000));
    const hasher = new FileHasher();
    const first = await hasher.digest(path);
    expect(first).toEqual({ size: 1000, sha256: sha256(new TextEncoder().encode("a".repeat(1000))) });
    writeFileSync(path, "b".repeat(1000));
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    expect((await hasher.digest(path)).sha256).toBe(sha256(new TextEncoder().encode("b".repeat(1000))));
  });

  /** Writes `text` over `path` with the same size and a fixed mtime, as `cp -p` or `rsync -a` would. */
  const writeAtFixedTime = (path: string, text: string) => {
    writeFileSync(path, text);
    utimesSync(path, 1_700_000_000, 1_700_000_000);
  };
  const hashOf = (text: string) => sha256(new TextEncoder().encode(text));

  test("with a cache file, a new process knows what the last one knew (a restart reads no model again), while the file is the same file", async () => {
    const dir = freshDir("hasher-cache");
    const path = join(dir, "f.gguf");
    const cache = join(dir, "file-hashes.json");
    writeAtFixedTime(path, "a".repeat(1000));
    // A hash only the cache can give: what the first process was told, not what the file holds.
    new FileHasher(cache).remember(path, hashOf("told"));
    await waitFor(() => existsSync(cache), { what: "the cache file to be written" });
    expect(statSync(cache).mode & 0o777).toBe(0o600);
    expect((await new FileHasher(cache).digest(path)).sha256).toBe(hashOf("told"));
    // Without the cache file, or with junk in it, the file is read.
    expect((await new FileHasher().digest(path)).sha256).toBe(hashOf("a".repeat(1000)));
    writeFileSync(cache, "{not json");
    expect((await new FileHasher(cache).digest(path)).sha256).toBe(hashOf("a".repeat(1000)));
  });

  test("a file replaced by one of the same size and mtime is read again", async () => {
    const path = join(freshDir("hasher-replaced"), "f.gguf");
    writeAtFixedTime(path, "a".repeat(1000));
    const hasher = new FileHasher();
    await hasher.digest(path);
    writeAtFixedTime(path, "c".repeat(1000));
    expect((await hasher.digest(path)).sha256).toBe(hashOf("c".repeat(1000)));
  });

  test("a hash an install already checked is remembered without reading the file", async () => {
    const path = join(freshDir("hasher-remember"), "f.gguf");
    writeFileSync(path, "a".repeat(1000));
    const hasher = new FileHasher();
    hasher.remember(path, hashOf("told"));
    expect((await hasher.digest(path)).sha256).toBe(hashOf("told"));
  });
});

describe("throttledProgress", () => {
  test("reports at most every interval, and always the last", () => {
    const seen: TransferProgress[] = [];
    const progress = throttledProgress("m", (p) => seen.push(p), 60_000);
    progress.set({ bytes: 0, total: 1000 });
    for (let i = 0; i < 1000; i++) progress.add(1);
    progress.done();
    expect(seen).toEqual([
      { model: "m", bytes: 0, total: 1000 },
      { model: "m", bytes: 1000, total: 1000 },
    ]);
  });
});
