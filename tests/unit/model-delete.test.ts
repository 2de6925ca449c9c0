import { describe, expect, test } from "bun:test";
import { deletePlan, foldersToPrune, isInside, registryWithout, type DeletableModel, type DeleteFacts } from "../../models/model-delete.ts";

const DIR = "/m";
const pulled: DeletableModel = {
  name: "hf.co/org/repo:Q8_0",
  path: "/m/hf/org/repo/repo-Q8_0.gguf",
  files: ["/m/hf/org/repo/repo-Q8_0.gguf"],
  mmproj: "/m/hf/org/repo/mmproj-f16.gguf",
  store: "models-dir",
  pulled: true,
};
const split: DeletableModel = {
  name: "big",
  path: "/m/hf/org/big/big-00001-of-00002.gguf",
  files: ["/m/hf/org/big/big-00001-of-00002.gguf", "/m/hf/org/big/big-00002-of-00002.gguf"],
  mmproj: undefined,
  store: "models-dir",
  pulled: true,
};
const facts = (over: Partial<DeleteFacts> = {}): DeleteFacts => ({ modelsDir: DIR, realPath: (f) => f, loaded: false, pulling: false, others: [], ...over });

describe("deletePlan: what may go", () => {
  const cases: [what: string, name: string, model: DeletableModel | undefined, facts: DeleteFacts, expected: ReturnType<typeof deletePlan>][] = [
    ["a pulled model and its projector", pulled.name, pulled, facts(), { ok: true, name: pulled.name, files: [...pulled.files, pulled.mmproj!], kept: [] }],
    ["every shard of a split model", "big", split, facts(), { ok: true, name: "big", files: split.files, kept: [] }],
    [
      "a projector another quant of the repo still uses stays",
      pulled.name,
      pulled,
      facts({ others: [{ name: "hf.co/org/repo:Q4_K_M", files: ["/m/hf/org/repo/repo-Q4_K_M.gguf"], mmproj: pulled.mmproj }] }),
      { ok: true, name: pulled.name, files: pulled.files, kept: [pulled.mmproj!] },
    ],
    [
      "a file with a second name stays",
      "big",
      split,
      facts({ others: [{ name: "big-alias", files: [split.files[0]!], mmproj: undefined }] }),
      { ok: true, name: "big", files: [split.files[1]!], kept: [split.files[0]!] },
    ],
    ["the model itself in the others list does not keep its files", "big", split, facts({ others: [split] }), { ok: true, name: "big", files: split.files, kept: [] }],
  ];
  test.each(cases)("%s", (_, name, model, f, expected) => {
    expect(deletePlan(name, model, f)).toEqual(expected);
  });
});

describe("deletePlan: refusals, with what to do", () => {
  const ollama: DeletableModel = { name: "llama3.2:3b", path: "/home/u/.ollama/models/blobs/sha256-abc", files: ["/home/u/.ollama/models/blobs/sha256-abc"], mmproj: undefined, store: "ollama", pulled: false };
  const cases: [what: string, name: string, model: DeletableModel | undefined, facts: DeleteFacts, status: number, code: string, says: string][] = [
    ["a name that climbs out", "../etc/passwd", undefined, facts(), 400, "invalid_model_name", "not a model name"],
    ["an absolute name", "/etc/passwd", undefined, facts(), 400, "invalid_model_name", "not a model name"],
    ["an empty segment", "a//b", undefined, facts(), 400, "invalid_model_name", "not a model name"],
    ["an unknown model", "nowhere", undefined, facts(), 404, "model_not_found", 'model "nowhere" is not on this node'],
    ["Ollama's model", ollama.name, ollama, facts(), 403, "not_mesh_owned", "this file belongs to Ollama at /home/u/.ollama/models/blobs/sha256-abc"],
    ["LM Studio's model", "x", { ...ollama, name: "x", store: "lm-studio" }, facts(), 403, "not_mesh_owned", "belongs to LM Studio"],
    ["the Hugging Face cache's", "x", { ...ollama, name: "x", store: "huggingface" }, facts(), 403, "not_mesh_owned", "belongs to the Hugging Face cache"],
    ["a --model path", "x", { ...ollama, name: "x", store: "path" }, facts(), 403, "not_mesh_owned", "--model path"],
    ["an extra store", "x", { ...ollama, name: "x", store: "extra" }, facts(), 403, "not_mesh_owned", "MESH_MODEL_STORES"],
    ["a file put in the models dir by hand", "mine", { ...split, name: "mine", pulled: false }, facts(), 403, "not_downloaded_by_mesh", "remove the file yourself"],
    ["a loaded model", pulled.name, pulled, facts({ loaded: true }), 409, "model_loaded", `model "${pulled.name}" is loaded; unload it first`],
    ["a model being pulled", pulled.name, pulled, facts({ pulling: true }), 409, "model_pulling", "is being pulled"],
    [
      "a registry entry naming a file elsewhere",
      "elsewhere",
      { name: "elsewhere", path: "/data/x.gguf", files: ["/data/x.gguf"], mmproj: undefined, store: "models-dir", pulled: true },
      facts(),
      403,
      "outside_models_dir",
      "/data/x.gguf lies outside it",
    ],
    [
      "a folder in the models dir that links out",
      "linked",
      { name: "linked", path: "/m/link/x.gguf", files: ["/m/link/x.gguf"], mmproj: undefined, store: "models-dir", pulled: true },
      facts({ realPath: (f) => f.replace("/m/link/", "/elsewhere/") }),
      403,
      "outside_models_dir",
      "outside it",
    ],
    [
      "a projector outside the models dir",
      pulled.name,
      { ...pulled, mmproj: "/shared/mmproj.gguf" },
      facts(),
      403,
      "outside_models_dir",
      "/shared/mmproj.gguf",
    ],
    ["a model with no file", "empty", { ...split, name: "empty", files: [] }, facts(), 404, "model_not_found", "has no file"],
  ];
  test.each(cases)("%s", (_, name, model, f, status, code, says) => {
    const plan = deletePlan(name, model, f);
    expect(plan).toMatchObject({ ok: false, status, code });
    expect(plan.ok === false && plan.message).toContain(says);
  });
});

describe("isInside", () => {
  test.each([
    ["/m", "/m/a.gguf", true],
    ["/m", "/m/hf/org/repo/a.gguf", true],
    ["/m", "/m", false],
    ["/m", "/m/../etc/passwd", false],
    ["/m", "/mm/a.gguf", false],
    ["/m/", "/m/a", true],
    ["/m", "/", false],
  ])("%s holds %s: %p", (dir, path, inside) => {
    expect(isInside(dir, path)).toBe(inside);
  });
});

describe("registryWithout", () => {
  const same = (f: string) => f;
  test("the model's entry and any naming a removed file go; others stay with every field", () => {
    const raw = {
      "hf.co/org/repo:Q8_0": { file: "hf/org/repo/repo-Q8_0.gguf", ref: "hf.co/org/repo:Q8_0", pulled: true },
      alias: { file: "/m/hf/org/repo/repo-Q8_0.gguf" },
      keep: { file: "keep.gguf", labels: ["embedding"], custom: 1 },
    };
    expect(registryWithout(raw, "hf.co/org/repo:Q8_0", ["/m/hf/org/repo/repo-Q8_0.gguf"], DIR, same)).toEqual({ keep: { file: "keep.gguf", labels: ["embedding"], custom: 1 } });
  });
  test("nothing to change: undefined", () => {
    expect(registryWithout({ keep: { file: "keep.gguf" } }, "other", ["/m/other.gguf"], DIR, same)).toBeUndefined();
  });
  test("an entry that is not an object is kept unless it is the model's", () => {
    expect(registryWithout({ odd: 3, gone: { file: "g.gguf" } }, "gone", ["/m/g.gguf"], DIR, same)).toEqual({ odd: 3 });
  });
});

describe("foldersToPrune", () => {
  test("folders between each file and the models dir, deepest first, never the models dir", () => {
    expect(foldersToPrune(DIR, ["/m/hf/org/repo/a.gguf", "/m/hf/org/other/b.gguf", "/m/top.gguf"])).toEqual(["/m/hf/org/other", "/m/hf/org/repo", "/m/hf/org", "/m/hf"]);
  });
  test("a file outside the models dir prunes nothing", () => {
    expect(foldersToPrune(DIR, ["/x/y/z.gguf"])).toEqual([]);
  });
});
