/**
 * Other tools' model stores, as tables: Ollama's names and manifests, where each store is, the
 * naming rule for clashes, the quant names of `general.file_type`, and the flags. Real layouts in a
 * temporary home are in model-store-scan.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { defaultConfig } from "../../config/config.ts";
import { parseCli, UsageError } from "../../config/parse-cli.ts";
import { factsFromMetadata, quantName } from "../../models/gguf-info.ts";
import { MAX_MANIFEST_BYTES, ollamaModelName, parseOllamaManifest } from "../../models/stores/ollama.ts";
import { hfHubCacheDir, llamaCacheDir, modelStoreRoots, parseStoreList, storeModelName, type StoreKind } from "../../models/stores/stores.ts";

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
