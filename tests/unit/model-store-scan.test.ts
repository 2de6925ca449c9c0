/**
 * Other tools' real layouts in a temporary home (Ollama manifests and blobs, LM Studio folders, a
 * Hugging Face cache with links into blobs, llama.cpp's cache, MESH_MODEL_STORES folders) listed by
 * the model store, read only, rescanned only on change; and the bound on what one scan reads.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ModelStore, type ModelInfo } from "../../models/model-store.ts";
import { MAX_MANIFEST_BYTES } from "../../models/stores/ollama.ts";
import { StoreScanner } from "../../models/stores/scan.ts";
import { modelStoreRoots } from "../../models/stores/stores.ts";
import { readDir } from "../../models/stores/walk.ts";
import { testModel } from "../../harness/models.ts";
import { hfCacheRepo, ollamaBlob, ollamaModel, placeFile, treeSnapshot } from "../../harness/store-fixtures.ts";
import { tempDirs } from "../../harness/transfer.ts";

test("a scan reads within its bound, the same part every time", () => {
  const dirs = tempDirs("mesh-stores-bound-");
  try {
    const dir = dirs.fresh("many");
    for (const name of ["e", "b", "d", "a", "c"]) writeFileSync(join(dir, name), "");
    const scan = { watched: new Map<string, string>(), entriesLeft: 3 };
    expect(readDir(dir, scan).map((e) => e.name)).toEqual(["a", "b", "c"]);
    expect(scan.entriesLeft).toBe(0);
    expect(readDir(dir, scan)).toEqual([]);
  } finally {
    dirs.remove();
  }
});

describe("fixture stores in a temporary home", () => {
  const dirs = tempDirs("mesh-stores-");
  let home: string;
  let modelsDir: string;
  let extra1: string;
  let extra2: string;
  let tiny: string;
  let ollama: string;
  let hub: string;
  let lmStudio: string;
  let llamaCache: string;
  let before: Record<string, string>;
  let store: ModelStore;
  let models: ModelInfo[];
  const byName = (name: string) => models.find((m) => m.name === name);
  const REV_OLD = "1".repeat(40);
  const REV_MAIN = "2".repeat(40);

  beforeAll(async () => {
    tiny = await testModel("tiny", "q8_0");
    home = dirs.fresh("home");
    modelsDir = dirs.fresh("models");
    extra1 = dirs.fresh("extra");
    extra2 = dirs.fresh("extra");
    const notGguf = join(dirs.fresh("junk"), "notes.txt");
    writeFileSync(notGguf, "hello, not a model");
    placeFile(tiny, join(modelsDir, "shared.gguf"));

    // Ollama: library, tagged, other namespace, another host, a projector, two tags of one blob, and junk.
    ollama = join(home, ".ollama", "models");
    ollamaModel(ollama, { model: "shared", gguf: tiny });
    ollamaModel(ollama, { model: "qwen", tag: "0.5b", gguf: tiny, projector: tiny });
    ollamaModel(ollama, { namespace: "myns", model: "model", tag: "v1", gguf: tiny });
    ollamaModel(ollama, { host: "hf.co", namespace: "org", model: "repo", tag: "Q8_0", gguf: tiny });
    ollamaModel(ollama, { model: "twin", gguf: tiny });
    ollamaModel(ollama, { model: "twin", tag: "alias", gguf: tiny });
    const manifests = join(ollama, "manifests", "registry.ollama.ai", "library");
    const junk = (model: string, text: string) => {
      mkdirSync(join(manifests, model), { recursive: true });
      writeFileSync(join(manifests, model, "latest"), text);
    };
    junk("not-json", "{ nope");
    junk("bad-digest", JSON.stringify({ layers: [{ mediaType: "application/vnd.ollama.image.model", digest: "sha256:abc" }] }));
    junk("missing-blob", JSON.stringify({ layers: [{ mediaType: "application/vnd.ollama.image.model", digest: `sha256:${"c".repeat(64)}` }] }));
    junk("not-gguf", JSON.stringify({ layers: [{ mediaType: "application/vnd.ollama.image.model", digest: ollamaBlob(ollama, "hello, not a model") }] }));
    // Good layers (the blob is a GGUF), but past the size bound or under a name Ollama could not write.
    const good = JSON.stringify({ layers: [{ mediaType: "application/vnd.ollama.image.model", digest: ollamaBlob(ollama, readFileSync(tiny)) }] });
    junk("huge", `${good}${" ".repeat(MAX_MANIFEST_BYTES)}`);
    junk("a folder", good);
    mkdirSync(join(manifests, "dir-tag", "latest"), { recursive: true });

    // LM Studio: publisher/repo/file, one file name in two folders, a projector, a text file named .gguf,
    // a link to a file mesh lists already, and the older folder.
    lmStudio = join(home, ".lmstudio", "models");
    placeFile(tiny, join(lmStudio, "pub-a", "repo", "lms-tiny-Q8_0.gguf"));
    placeFile(tiny, join(lmStudio, "pub-a", "repo", "mmproj-lms-tiny-f16.gguf"));
    placeFile(tiny, join(lmStudio, "pub-b", "repo", "lms-tiny-Q8_0.gguf"));
    placeFile(tiny, join(lmStudio, "pub-c", "repo", "shared.gguf"));
    placeFile(notGguf, join(lmStudio, "pub-c", "repo", "notes.gguf"));
    mkdirSync(join(lmStudio, "pub-d", "repo"), { recursive: true });
    symlinkSync(join(modelsDir, "shared.gguf"), join(lmStudio, "pub-d", "repo", "linked.gguf"));
    placeFile(tiny, join(home, ".cache", "lm-studio", "models", "old", "repo", "old-tiny.gguf"));

    // Hugging Face: a file at an older revision, the main revision with a split model, a file name two
    // repos share, a link whose blob is gone, a repo with no files, and a dataset (not models).
    hub = join(home, ".cache", "huggingface", "hub");
    hfCacheRepo(hub, "org/tiny-GGUF", REV_OLD, { "tiny-Q4.gguf": tiny }, false);
    hfCacheRepo(hub, "org/tiny-GGUF", REV_MAIN, { "tiny-Q8_0.gguf": tiny, "sub/split-00001-of-00002.gguf": tiny, "sub/split-00002-of-00002.gguf": tiny, "shared.gguf": tiny });
    hfCacheRepo(hub, "other/repo", REV_MAIN, { "tiny-Q8_0.gguf": tiny });
    const gone = hfCacheRepo(hub, "org/gone", REV_MAIN, { "gone.gguf": tiny })[0]!;
    rmSync(realpathSync(gone));
    hfCacheRepo(hub, "org/empty", REV_MAIN, {});
    mkdirSync(join(hub, "datasets--org--data", "snapshots", REV_MAIN), { recursive: true });
    placeFile(tiny, join(hub, "datasets--org--data", "snapshots", REV_MAIN, "data.gguf"));

    // llama.cpp's cache: flat downloads with their notes.
    llamaCache = join(home, ".cache", "llama.cpp");
    placeFile(tiny, join(llamaCache, "org_repo_llama-tiny.gguf"));
    writeFileSync(join(llamaCache, "org_repo_llama-tiny.gguf.json"), "{}");
    placeFile(tiny, join(llamaCache, "shared.gguf"));

    // Two MESH_MODEL_STORES folders with the same names.
    for (const extra of [extra1, extra2]) {
      placeFile(tiny, join(extra, "x.gguf"));
      placeFile(tiny, join(extra, "shared.gguf"));
    }

    before = { ...treeSnapshot(home), ...treeSnapshot(extra1), ...treeSnapshot(extra2) };
    const stores = modelStoreRoots({}, home, [extra1, extra2], "linux");
    store = new ModelStore({ modelsDir, extraFiles: [], hasGpu: false, stores });
    models = await store.refresh();
  });
  afterAll(() => dirs.remove());

  test("each model is listed under the name its store gives it, suffixed when taken, with its store", () => {
    const listed = Object.fromEntries(models.map((m) => [m.name, m.store]));
    expect(listed).toEqual({
      shared: "models-dir",
      "shared@ollama": "ollama",
      "qwen:0.5b": "ollama",
      "myns/model:v1": "ollama",
      "hf.co/org/repo:Q8_0": "ollama",
      twin: "ollama",
      "twin:alias": "ollama",
      "pub-a/repo/lms-tiny-Q8_0": "lm-studio",
      "pub-b/repo/lms-tiny-Q8_0": "lm-studio",
      "shared@lm-studio": "lm-studio",
      "old-tiny": "lm-studio",
      "tiny-Q4": "huggingface",
      "org/tiny-GGUF/tiny-Q8_0": "huggingface",
      "other/repo/tiny-Q8_0": "huggingface",
      split: "huggingface",
      "shared@huggingface": "huggingface",
      "org_repo_llama-tiny": "llama.cpp",
      "shared@llama.cpp": "llama.cpp",
      x: "extra",
      "x@extra": "extra",
      "shared@extra": "extra",
      "shared@extra-2": "extra",
    });
  });

  test("files are used where they lie: Ollama blobs, Hugging Face snapshot links, plain files", () => {
    const blob = byName("qwen:0.5b")!;
    expect(blob.path).toStartWith(join(ollama, "blobs", "sha256-"));
    expect(blob.files).toEqual([blob.path]);
    expect(blob.mmproj).toStartWith(join(ollama, "blobs", "sha256-"));
    expect(byName("twin")!.path).toBe(byName("twin:alias")!.path);
    expect(byName("hf.co/org/repo:Q8_0")!.mmproj).toBeUndefined();

    expect(byName("tiny-Q4")!.path).toBe(join(hub, "models--org--tiny-GGUF", "snapshots", REV_OLD, "tiny-Q4.gguf"));
    const split = byName("split")!;
    const snap = join(hub, "models--org--tiny-GGUF", "snapshots", REV_MAIN, "sub");
    expect(split.files).toEqual([join(snap, "split-00001-of-00002.gguf"), join(snap, "split-00002-of-00002.gguf")]);
    expect(split.path).toBe(split.files[0]!);
    expect(split.problem).toBeUndefined();
    expect(split.sizeBytes).toBe(2 * readFileSync(tiny).length);

    const lms = byName("pub-a/repo/lms-tiny-Q8_0")!;
    expect(lms.path).toBe(join(lmStudio, "pub-a", "repo", "lms-tiny-Q8_0.gguf"));
    expect(lms.mmproj).toBe(join(lmStudio, "pub-a", "repo", "mmproj-lms-tiny-f16.gguf"));
    expect(byName("org_repo_llama-tiny")!.path).toBe(join(llamaCache, "org_repo_llama-tiny.gguf"));
    expect(byName("x@extra")!.path).toBe(join(extra2, "x.gguf"));
  });

  test("each has its quant and header facts", () => {
    for (const m of models) {
      expect(m.quant).toBe("Q8_0");
      expect(m.facts?.architecture).toBe("llama");
    }
  });

  test("x:latest finds x", async () => {
    expect((await store.find("twin:latest"))?.name).toBe("twin");
    expect((await store.find("twin:alias"))?.name).toBe("twin:alias");
    expect((await store.find("qwen:latest"))?.name).toBeUndefined();
  });

  test("nothing in any store was written, moved or touched", async () => {
    await store.refresh();
    expect({ ...treeSnapshot(home), ...treeSnapshot(extra1), ...treeSnapshot(extra2) }).toEqual(before);
  });

  test("a store is read again only when something it read changed", () => {
    const scanner = new StoreScanner();
    const root = { kind: "extra" as const, dir: extra1 };
    const first = scanner.scan(root);
    expect(scanner.scan(root)).toBe(first);
    const added = placeFile(tiny, join(extra1, "later.gguf"));
    try {
      const second = scanner.scan(root);
      expect(second).not.toBe(first);
      expect(second.map((m) => m.name)).toContain("later");
      expect(scanner.scan(root)).toBe(second);
    } finally {
      rmSync(added);
    }
    expect(scanner.scan(root).map((m) => m.name)).not.toContain("later");
  });

  test("an Ollama manifest rewritten in place is read again", () => {
    const scanner = new StoreScanner();
    const root = { kind: "ollama" as const, dir: dirs.fresh("ollama") };
    const { manifest } = ollamaModel(root.dir, { model: "m", gguf: tiny });
    const text = readFileSync(manifest, "utf8");
    expect(scanner.scan(root).map((m) => m.name)).toEqual(["m"]);
    writeFileSync(manifest, "junk");
    expect(scanner.scan(root)).toEqual([]);
    writeFileSync(manifest, text);
    expect(scanner.scan(root).map((m) => m.name)).toEqual(["m"]);
  });

  test("--scan-model-stores off: the models dir alone", async () => {
    const off = await new ModelStore({ modelsDir, extraFiles: [], hasGpu: false, stores: [] }).refresh();
    expect(off.map((m) => [m.name, m.store])).toEqual([["shared", "models-dir"]]);
  });

  test("a --model path is mesh's own and takes its name first", async () => {
    const path = join(extra1, "x.gguf");
    const list = await new ModelStore({ modelsDir, extraFiles: [path], hasGpu: false, stores: modelStoreRoots({}, home, [extra1], "linux") }).refresh();
    expect(list.find((m) => m.path === path)).toMatchObject({ name: "x", store: "path" });
    expect(list.filter((m) => m.name.startsWith("x"))).toHaveLength(1);
  });
});
