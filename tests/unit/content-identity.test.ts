/** A model's content identity (issue 27): one SHA-256 that any change of its files' names, sizes or bytes moves; and a node's own, worked out in the background. */
import { afterAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { contentIdentity, type IdentityFile } from "../../models/content-identity.ts";
import { FileHasher } from "../../models/file-hasher.ts";
import { ModelIdentities } from "../../models/model-identities.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { sha256, tempDirs } from "../../harness/transfer.ts";
import { waitFor } from "../../harness/wait.ts";

const a: IdentityFile = { name: "m-00001-of-00002.gguf", size: 100, sha256: "a".repeat(64) };
const b: IdentityFile = { name: "m-00002-of-00002.gguf", size: 50, sha256: "b".repeat(64) };
const base = contentIdentity([a, b]);

test("a SHA-256, the same whatever order the files are listed in", () => {
  expect(base).toMatch(/^[0-9a-f]{64}$/);
  expect(contentIdentity([b, a])).toBe(base);
});

test.each<[string, IdentityFile[]]>([
  ["a file's bytes", [a, { ...b, sha256: "c".repeat(64) }]],
  ["a file's size", [a, { ...b, size: 51 }]],
  ["a file's name", [a, { ...b, name: "mmproj-m.gguf" }]],
  ["a file left out", [a]],
  ["a file added", [a, b, { name: "mmproj-m.gguf", size: 1, sha256: "d".repeat(64) }]],
  ["fields run together differently", [{ ...a, name: `${a.name}\t100` }, b]],
])("any change moves it: %s", (_, files) => {
  expect(contentIdentity(files)).not.toBe(base);
});

describe("ModelIdentities: this node's own models, worked out in the background", () => {
  const dirs = tempDirs("mesh-identities-");
  afterAll(dirs.remove);

  test("each model's identity is that of its files as a peer would list them; a models dir of many is told in a batch, not once per model", async () => {
    const dir = dirs.fresh("models");
    const models = Array.from({ length: 20 }, (_, i) => {
      const path = join(dir, `file-${i}.gguf`);
      writeFileSync(path, `weights of model ${i}`);
      return { name: `m${i}`, files: [path], mmproj: undefined } as unknown as ModelInfo;
    });
    let told = 0;
    const ids = new ModelIdentities(new FileHasher(), () => void told++);
    expect(models.map((m) => ids.of(m))).toEqual(models.map(() => undefined));
    await waitFor(() => models.every((m) => ids.of(m) !== undefined), { what: "every identity to be worked out" });
    models.forEach((m, i) => {
      const bytes = new TextEncoder().encode(`weights of model ${i}`);
      expect(ids.of(m)).toBe(contentIdentity([{ name: `m${i}.gguf`, size: bytes.length, sha256: sha256(bytes) }]));
    });
    expect(told).toBeGreaterThan(0);
    expect(told).toBeLessThan(models.length);
  });

  test("a model whose file changes gets its new identity", async () => {
    const path = join(dirs.fresh("changing"), "m.gguf");
    writeFileSync(path, "old weights");
    const m = { name: "m", files: [path], mmproj: undefined } as unknown as ModelInfo;
    const ids = new ModelIdentities(new FileHasher(), () => undefined);
    ids.of(m);
    const old = await waitFor(() => ids.of(m), { what: "the identity" });
    writeFileSync(path, "new weights, longer");
    const now = await waitFor(() => ids.of(m), { what: "the new identity" });
    expect(now).not.toBe(old);
  });

  test("a deleted model is forgotten, and the identity it had is told (its saved slots go with it)", async () => {
    const path = join(dirs.fresh("forget"), "a.gguf");
    writeFileSync(path, "weights");
    const a = { name: "a", files: [path], mmproj: undefined } as unknown as ModelInfo;
    const ids = new ModelIdentities(new FileHasher(), () => undefined);
    const identity = await waitFor(() => ids.of(a), { what: "the identity" });
    expect(ids.forget("a")).toBe(identity);
    expect(ids.forget("a")).toBeUndefined();
    expect(ids.forget("never-known")).toBeUndefined();
  });
});
