import { describe, expect, test } from "bun:test";
import { findKnownModel } from "../../models/known-models.ts";
import { defaultModelName, exactRef, parseModelRef, refSatisfies, type ModelRef } from "../../models/model-ref.ts";
import { isSafeModelName } from "../../models/model-transfer.ts";
import { PullError } from "../../models/pull-error.ts";

const hf = (repo: string, quant?: string, file?: string, revision = "main"): ModelRef => ({ kind: "hf", repo, revision, quant, file });

describe("parseModelRef", () => {
  const qwen = findKnownModel("qwen2.5-7b-instruct")!;
  const cases: [string, ModelRef | undefined | "bad"][] = [
    // llama.cpp's -hf syntax
    ["bartowski/Qwen2.5-7B-Instruct-GGUF", hf("bartowski/Qwen2.5-7B-Instruct-GGUF")],
    ["bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M", hf("bartowski/Qwen2.5-7B-Instruct-GGUF", "Q4_K_M")],
    ["org/repo:q8_0", hf("org/repo", "q8_0")],
    ["  org/repo:Q8_0  ", hf("org/repo", "Q8_0")],
    ["org/repo:UD-Q4_K_XL", hf("org/repo", "UD-Q4_K_XL")],
    // Ollama's: hf.co/ and huggingface.co/ in front; :latest is the default choice
    ["hf.co/org/repo:Q4_K_M", hf("org/repo", "Q4_K_M")],
    ["HF.CO/org/repo", hf("org/repo")],
    ["huggingface.co/org/repo:latest", hf("org/repo")],
    ["hf.co/org/repo", hf("org/repo")],
    // a file in the repository
    ["org/repo/model-Q4_K_M.gguf", hf("org/repo", undefined, "model-Q4_K_M.gguf")],
    ["org/repo/Q4_K_M/model-Q4_K_M-00001-of-00002.gguf", hf("org/repo", undefined, "Q4_K_M/model-Q4_K_M-00001-of-00002.gguf")],
    ["hf.co/org/repo/sub/m.GGUF", hf("org/repo", undefined, "sub/m.GGUF")],
    // Hub URLs are Hub references (the LFS hash comes from the tree)
    ["https://huggingface.co/org/repo/resolve/main/m-Q8_0.gguf", hf("org/repo", undefined, "m-Q8_0.gguf")],
    ["https://huggingface.co/org/repo/resolve/v1.0/sub/m.gguf?download=true", hf("org/repo", undefined, "sub/m.gguf", "v1.0")],
    ["https://hf.co/org/repo/blob/main/m%20x.gguf", hf("org/repo", undefined, "m x.gguf")],
    ["https://huggingface.co/org/repo", hf("org/repo")],
    // other URLs
    ["https://example.com/models/m.gguf", { kind: "url", url: "https://example.com/models/m.gguf" }],
    ["http://127.0.0.1:8000/m-00001-of-00002.gguf", { kind: "url", url: "http://127.0.0.1:8000/m-00001-of-00002.gguf" }],
    // catalog ids, any case
    ["qwen2.5-7b-instruct", hf(qwen.repo, qwen.quant)],
    ["Qwen2.5-7B-Instruct", hf(qwen.repo, qwen.quant)],
    // plain local names
    ["my-model", undefined],
    ["llama3.2:latest", undefined],
    ["folder/sub/model", undefined],
    ["my dir/my model", "bad"],
    // malformed references
    ["", "bad"],
    ["org/repo:", "bad"],
    ["org/repo:Q4:K", "bad"],
    ["org/repo:Q4 K", "bad"],
    ["org/../x.gguf", "bad"],
    ["org/repo/../../etc/x.gguf", "bad"],
    ["org/repo/.hidden/x.gguf", "bad"],
    ["org/repo/a//x.gguf", "bad"],
    [".org/repo:Q4_K_M", "bad"],
    ["hf.co/org", "bad"],
    ["hf.co/org/repo/readme.md", "bad"],
    ["org/repo/x\u0000.gguf", "bad"],
    ["ftp://example.com/m.gguf", "bad"],
    ["https://example.com/m.bin", "bad"],
    ["https://example.com/%2e%2e.gguf", "bad"],
    ["https://huggingface.co/org/repo/tree/main", "bad"],
    ["https://huggingface.co/org/repo/resolve/main/../../x.gguf", "bad"],
    ["https://huggingface.co/org/repo/resolve/main/config.json", "bad"],
    [`org/repo:${"Q".repeat(40)}`, "bad"],
    [`${"a".repeat(2100)}/b`, "bad"],
  ];
  test.each(cases)("%p", (text, expected) => {
    if (expected === "bad") {
      expect(() => parseModelRef(text)).toThrow(PullError);
      try {
        parseModelRef(text);
      } catch (err) {
        expect((err as PullError).code).toBe("bad_reference");
      }
    } else expect(parseModelRef(text)).toEqual(expected);
  });
});

describe("defaultModelName", () => {
  const cases: [string, string | "bad"][] = [
    ["org/repo:Q4_K_M", "org/repo:Q4_K_M"],
    ["  hf.co/org/repo:Q4_K_M ", "hf.co/org/repo:Q4_K_M"],
    ["hf.co/org/repo", "hf.co/org/repo"],
    ["org/repo/m-Q8_0.gguf", "org/repo/m-Q8_0.gguf"],
    ["org/repo/sub/m-Q8_0.gguf", "org/repo/sub/m-Q8_0.gguf"],
    // five parts are too many for a name: the repository and the file's stem
    ["hf.co/org/repo/sub/m-Q8_0.gguf", "org/repo/m-Q8_0"],
    ["org/repo/a/b/m-00001-of-00002.gguf", "org/repo/m"],
    ["qwen2.5-7b-instruct", "qwen2.5-7b-instruct"],
    ["https://example.com/x/Model-Q8_0.gguf", "Model-Q8_0"],
    ["https://example.com/x/Big-00001-of-00003.gguf", "Big"],
    ["https://huggingface.co/org/repo/resolve/main/sub/m-Q4_0.gguf", "m-Q4_0"],
    ["https://huggingface.co/org/repo", "org/repo"],
    ["org/repo:", "bad"],
  ];
  test.each(cases)("%p → %p", (text, expected) => {
    if (expected === "bad") expect(() => defaultModelName(text)).toThrow(PullError);
    else {
      expect(defaultModelName(text)).toBe(expected);
      expect(isSafeModelName(defaultModelName(text))).toBe(true);
    }
  });
});

describe("exactRef", () => {
  const cases: [string, ModelRef, string | undefined, string][] = [
    ["a quant, resolved to its file", hf("org/repo", "Q4_K_M"), "m-Q4_K_M.gguf", "org/repo/m-Q4_K_M.gguf"],
    ["the default choice, a split", hf("org/repo"), "sub/m-00001-of-00002.gguf", "org/repo/sub/m-00001-of-00002.gguf"],
    ["another revision", hf("org/repo", undefined, "a b.gguf", "v2"), undefined, "https://huggingface.co/org/repo/resolve/v2/a%20b.gguf"],
    ["no file yet", hf("org/repo", "Q8_0"), undefined, "org/repo:Q8_0"],
    ["a path with a space", hf("org/repo"), "my model.gguf", "https://huggingface.co/org/repo/resolve/main/my%20model.gguf"],
    ["a URL", { kind: "url", url: "https://x.test/m.gguf" }, undefined, "https://x.test/m.gguf"],
  ];
  test.each(cases)("%s", (_label, ref, file, expected) => {
    expect(exactRef(ref, file)).toBe(expected);
    // What is recorded reads back as the same files.
    const back = parseModelRef(expected)!;
    if (file !== undefined) expect(back).toMatchObject({ kind: "hf", repo: "org/repo", file });
  });
});

describe("refSatisfies: what models.json recorded against what a pull asks for", () => {
  const cases: [string, string, boolean][] = [
    ["org/repo/m-Q4_K_M.gguf", "org/repo", true],
    ["org/repo/m-Q4_K_M.gguf", "org/repo:q4_k_m", true],
    ["org/repo/m-Q4_K_M.gguf", "hf.co/org/repo:Q4_K_M", true],
    ["org/repo/m-Q4_K_M.gguf", "org/repo:Q8_0", false],
    ["org/repo/m-Q4_K_M.gguf", "other/repo:Q4_K_M", false],
    ["org/repo/m-Q4_K_M.gguf", "org/repo/m-Q4_K_M.gguf", true],
    ["org/repo/m-Q4_K_M.gguf", "https://huggingface.co/org/repo/resolve/main/m-Q4_K_M.gguf", true],
    ["org/repo/m-Q4_K_M.gguf", "https://huggingface.co/org/repo/resolve/v2/m-Q4_K_M.gguf", false],
    ["org/repo/m-00001-of-00002.gguf", "org/repo/m-00002-of-00002.gguf", true],
    ["org/repo/m-00001-of-00002.gguf", "org/repo/n-00002-of-00002.gguf", false],
    ["https://x.test/m.gguf", "https://x.test/m.gguf", true],
    ["https://x.test/m.gguf", "https://x.test/n.gguf", false],
    ["https://x.test/m.gguf", "org/repo", false],
    ["not a ref", "org/repo", false],
  ];
  test.each(cases)("%p satisfies %p: %p", (pulled, wanted, expected) => {
    expect(refSatisfies(pulled, parseModelRef(wanted)!)).toBe(expected);
  });
});
