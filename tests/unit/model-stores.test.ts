/**
 * Other tools' model stores: Ollama's names and manifests, where each store is, the naming rule for
 * clashes, the quant names of `general.file_type`, and real layouts in a temporary home (Ollama
 * manifests and blobs, LM Studio folders, a Hugging Face cache with links into blobs, llama.cpp's
 * cache, MESH_MODEL_STORES folders) listed by the model store, read only, rescanned only on change.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { defaultConfig } from "../../config/config.ts";
import { parseCli, UsageError } from "../../config/parse-cli.ts";
import { factsFromMetadata, quantName } from "../../models/gguf-info.ts";
import { ModelStore, type ModelInfo } from "../../models/model-store.ts";
import { repoOfFolder } from "../../models/stores/hf-cache.ts";
import { MAX_MANIFEST_BYTES, ollamaModelName, parseOllamaManifest } from "../../models/stores/ollama.ts";
import { StoreScanner } from "../../models/stores/scan.ts";
import { hfHubCacheDir, llamaCacheDir, modelStoreRoots, parseStoreList, storeModelName, type StoreKind } from "../../models/stores/stores.ts";
import { readDir } from "../../models/stores/walk.ts";
import { testModel } from "../helpers/models.ts";
import { hfCacheRepo, ollamaBlob, ollamaModel, placeFile, treeSnapshot } from "../helpers/store-fixtures.ts";
import { tempDirs } from "../helpers/transfer.ts";

describe("Ollama names: manifests/<host>/<namespace>/<model>/<tag> -> the name `ollama list` shows, without :latest", () => {
  const cases: [parts: [string, string, string, string], name: string | undefined][] = [
    [["registry.ollama.ai", "library", "llama3.2", "latest"], "llama3.2"],
    [["registry.ollama.ai", "library", "qwen2.5", "0.5b"], "qwen2.5:0.5b"],
    [["registry.ollama.ai", "library", "qwen2.5", "7b-instruct-q4_K_M"], "qwen2.5:7b-instruct-q4_K_M"],
    [["registry.ollama.ai", "jmorganca", "model", "v1"], "jmorganca/model:v1"],
    [["registry.ollama.ai", "jmorganca", "model", "latest"], "jmorganca/model"],
    [["hf.co", "bartowski", "Llama-3.2-1B-Instruct-GGUF", "Q4_K_M"], "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"],
    [["localhost:5000", "team", "m", "latest"], "localhost:5000/team/m"],
    // Not parts Ollama could have written: passed over.
    [["registry.ollama.ai", "library", "has space", "latest"], undefined],
    [["registry.ollama.ai", "library", "..", "latest"], undefined],
    [["registry.ollama.ai", "library", "m", ".hidden"], undefined],
    [["registry.ollama.ai", "library", "m", "a..b"], undefined],
    [["registry.ollama.ai", "lib\nrary", "m", "latest"], undefined],
    [["", "library", "m", "latest"], undefined],
    [["registry.ollama.ai", "library", "m".repeat(129), "latest"], undefined],
  ];
  for (const [parts, name] of cases) test(`${parts.join("/")} -> ${name}`, () => expect(ollamaModelName(...parts)).toBe(name));
});

describe("Ollama manifests: the model and projector blobs, anything else passed over", () => {
  const hex = "a".repeat(64);
  const hex2 = "b".repeat(64);
  const layer = (mediaType: string, digest: string) => ({ mediaType, digest, size: 1 });
  const model = (digest = `sha256:${hex}`) => layer("application/vnd.ollama.image.model", digest);
  const manifest = (...layers: unknown[]) => JSON.stringify({ schemaVersion: 2, config: layer("application/vnd.docker.container.image.v1+json", `sha256:${hex2}`), layers });
  const cases: [what: string, text: string, expected: ReturnType<typeof parseOllamaManifest>][] = [
    ["a model", manifest(model(), layer("application/vnd.ollama.image.template", `sha256:${hex2}`)), { model: hex, projector: undefined }],
    ["a model with a projector", manifest(model(), layer("application/vnd.ollama.image.projector", `sha256:${hex2}`)), { model: hex, projector: hex2 }],
    ["unknown fields", JSON.stringify({ layers: [{ ...model(), from: "x", annotations: {} }], extra: 1 }), { model: hex, projector: undefined }],
    ["not JSON", "not json {", undefined],
    ["empty", "", undefined],
    ["an array", "[]", undefined],
    ["no layers", JSON.stringify({ schemaVersion: 2 }), undefined],
    ["layers not an array", JSON.stringify({ layers: {} }), undefined],
    ["a layer without digest", JSON.stringify({ layers: [{ mediaType: "application/vnd.ollama.image.model" }] }), undefined],
    ["no model layer (an adapter)", manifest(layer("application/vnd.ollama.image.adapter", `sha256:${hex}`)), undefined],
    ["a short digest", manifest(model(`sha256:${"a".repeat(63)}`)), undefined],
    ["a long digest", manifest(model(`sha256:${"a".repeat(65)}`)), undefined],
    ["an upper-case digest", manifest(model(`sha256:${"A".repeat(64)}`)), undefined],
    ["another hash", manifest(model(`sha512:${hex}`)), undefined],
    ["a path in the digest", manifest(model(`sha256:../../${hex}`)), undefined],
    ["a bad projector digest", manifest(model(), layer("application/vnd.ollama.image.projector", "sha256:zz")), undefined],
    ["too many layers", manifest(...Array.from({ length: 300 }, () => model())), undefined],
    ["too big", manifest(model()) + " ".repeat(MAX_MANIFEST_BYTES), undefined],
  ];
  for (const [what, text, expected] of cases) test(what, () => expect(parseOllamaManifest(text)).toEqual(expected));
});

describe("naming rule: the name is kept when free, else <name>@<store>, then <name>@<store>-2...", () => {
  const cases: [name: string, store: StoreKind, taken: string[], expected: string | undefined][] = [
    ["qwen", "ollama", [], "qwen"],
    ["qwen", "ollama", ["other"], "qwen"],
    ["qwen", "ollama", ["qwen"], "qwen@ollama"],
    ["qwen:0.5b", "ollama", ["qwen:0.5b"], "qwen:0.5b@ollama"],
    ["tiny-Q8_0", "huggingface", ["tiny-Q8_0"], "tiny-Q8_0@huggingface"],
    ["tiny", "lm-studio", ["tiny", "tiny@lm-studio"], "tiny@lm-studio-2"],
    ["tiny", "extra", ["tiny", "tiny@extra", "tiny@extra-2"], "tiny@extra-3"],
    ["org/repo/tiny", "llama.cpp", ["org/repo/tiny"], "org/repo/tiny@llama.cpp"],
    // The plain name of one store does not block another's suffix.
    ["tiny", "ollama", ["tiny", "tiny@huggingface"], "tiny@ollama"],
    // Names that could not be file names or announcements are not listed.
    [".hidden", "extra", [], undefined],
    ["a/../b", "extra", [], undefined],
    ["bell\u0007", "extra", [], undefined],
    ["a/b/c/d/e", "extra", [], undefined],
    ["x".repeat(255), "extra", [], "x".repeat(255)],
    ["x".repeat(255), "extra", ["x".repeat(255)], undefined],
  ];
  for (const [name, store, taken, expected] of cases) {
    test(`${name.slice(0, 30)} in ${store}, taken [${taken.join(", ").slice(0, 60)}] -> ${expected?.slice(0, 40)}`, () => expect(storeModelName(name, store, new Set(taken))).toBe(expected));
  }
});

describe("quant names: general.file_type (llama.cpp's llama_ftype) -> the name in file names", () => {
  const cases: [fileType: number | undefined, quant: string | undefined][] = [
    [0, "F32"],
    [1, "F16"],
    [2, "Q4_0"],
    [3, "Q4_1"],
    [7, "Q8_0"],
    [8, "Q5_0"],
    [10, "Q2_K"],
    [12, "Q3_K_M"],
    [14, "Q4_K_S"],
    [15, "Q4_K_M"],
    [17, "Q5_K_M"],
    [18, "Q6_K"],
    [19, "IQ2_XXS"],
    [25, "IQ4_NL"],
    [30, "IQ4_XS"],
    [32, "BF16"],
    [33, "Q4_0_4_4"],
    [36, "TQ1_0"],
    [38, "MXFP4_MOE"],
    [undefined, undefined],
    [99, undefined],
    [1024, undefined],
    [-1, undefined],
    [7.5, undefined],
  ];
  for (const [fileType, quant] of cases) test(`${fileType} -> ${quant}`, () => expect(quantName(fileType)).toBe(quant));

  test("the facts carry general.file_type, as a number or a bigint", () => {
    expect(factsFromMetadata({ "general.file_type": 15 }).fileType).toBe(15);
    expect(factsFromMetadata({ "general.file_type": 7n }).fileType).toBe(7);
    expect(factsFromMetadata({ "general.file_type": "Q4" }).fileType).toBeUndefined();
    expect(factsFromMetadata({}).fileType).toBeUndefined();
  });
});

describe("where the stores are: as each tool finds its own", () => {
  const home = "/h";
  const hubCases: [env: Record<string, string>, dir: string][] = [
    [{}, "/h/.cache/huggingface/hub"],
    [{ XDG_CACHE_HOME: "/x" }, "/x/huggingface/hub"],
    [{ HF_HOME: "/hf" }, "/hf/hub"],
    [{ HF_HOME: "/hf", XDG_CACHE_HOME: "/x" }, "/hf/hub"],
    [{ HUGGINGFACE_HUB_CACHE: "/old" }, "/old"],
    [{ HF_HUB_CACHE: "/hub", HF_HOME: "/hf", HUGGINGFACE_HUB_CACHE: "/old" }, "/hub"],
    [{ HF_HUB_CACHE: "", HF_HOME: "" }, "/h/.cache/huggingface/hub"],
  ];
  for (const [env, dir] of hubCases) test(`Hugging Face ${JSON.stringify(env)} -> ${dir}`, () => expect(hfHubCacheDir(env, home)).toBe(dir));

  const llamaCases: [env: Record<string, string>, platform: NodeJS.Platform, dir: string][] = [
    [{}, "linux", "/h/.cache/llama.cpp"],
    [{ XDG_CACHE_HOME: "/x" }, "linux", "/x/llama.cpp"],
    [{ LLAMA_CACHE: "/l", XDG_CACHE_HOME: "/x" }, "linux", "/l"],
    [{}, "darwin", "/h/Library/Caches/llama.cpp"],
    [{ LOCALAPPDATA: "/appdata" }, "win32", "/appdata/llama.cpp"],
  ];
  for (const [env, platform, dir] of llamaCases) test(`llama.cpp ${platform} ${JSON.stringify(env)} -> ${dir}`, () => expect(llamaCacheDir(env, home, platform)).toBe(dir));

  test("every store, in naming order, a folder named twice scanned once", () => {
    expect(modelStoreRoots({}, home, ["/e1", "/e2"], "linux")).toEqual([
      { kind: "ollama", dir: "/h/.ollama/models" },
      { kind: "lm-studio", dir: "/h/.lmstudio/models" },
      { kind: "lm-studio", dir: "/h/.cache/lm-studio/models" },
      { kind: "huggingface", dir: "/h/.cache/huggingface/hub" },
      { kind: "llama.cpp", dir: "/h/.cache/llama.cpp" },
      { kind: "extra", dir: "/e1" },
      { kind: "extra", dir: "/e2" },
    ]);
    const same = modelStoreRoots({ OLLAMA_MODELS: "/o", LLAMA_CACHE: "/h/.cache/huggingface/hub/" }, home, ["/o", "/e/"], "linux");
    expect(same).toEqual([
      { kind: "ollama", dir: "/o" },
      { kind: "lm-studio", dir: "/h/.lmstudio/models" },
      { kind: "lm-studio", dir: "/h/.cache/lm-studio/models" },
      { kind: "huggingface", dir: "/h/.cache/huggingface/hub" },
      { kind: "extra", dir: "/e" },
    ]);
  });

  const listCases: [text: string, dirs: string[]][] = [
    ["/a", ["/a"]],
    ["/a:/b", ["/a", "/b"]],
    [" /a : :/b:", ["/a", "/b"]],
    ["", []],
  ];
  for (const [text, dirs] of listCases) test(`MESH_MODEL_STORES "${text}" -> ${JSON.stringify(dirs)}`, () => expect(parseStoreList(text)).toEqual(dirs));
});

describe("flags: --scan-model-stores, --model-stores and their variables", () => {
  const config = (argv: string[], env: Record<string, string> = {}) => {
    const c = parseCli(argv, "/h", { env, readConfigFile: () => undefined });
    if (c.kind !== "node") throw new Error(c.kind);
    return c.config;
  };
  test("on with no extra folders by default", () => {
    expect(defaultConfig("/h").scanModelStores).toBe("on");
    expect(config([])).toMatchObject({ scanModelStores: "on", modelStores: [] });
  });
  test("the flag, else the variable", () => {
    expect(config(["--scan-model-stores", "off"]).scanModelStores).toBe("off");
    expect(config([], { MESH_SCAN_MODEL_STORES: "off" }).scanModelStores).toBe("off");
    expect(config(["--scan-model-stores", "on"], { MESH_SCAN_MODEL_STORES: "off" }).scanModelStores).toBe("on");
    expect(config([], { MESH_MODEL_STORES: "/a:/b" }).modelStores).toEqual(["/a", "/b"]);
    expect(config(["--model-stores", "/c"], { MESH_MODEL_STORES: "/a:/b" }).modelStores).toEqual(["/c"]);
  });
  test("a bad value names what is expected", () => {
    expect(() => config(["--scan-model-stores", "maybe"])).toThrow(UsageError);
    expect(() => config([], { MESH_SCAN_MODEL_STORES: "yes" })).toThrow(/MESH_SCAN_MODEL_STORES/);
  });
});

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
