import { describe, expect, test } from "bun:test";
import { isSafeRepoPath, quantNames, quantOf, quantRank, selectRepoFiles, type RepoFile } from "../../models/hf-files.ts";
import { FREE_SPACE_MARGIN } from "../../models/download-rules.ts";
import { PullError, type PullErrorCode } from "../../models/pull-error.ts";
import { spaceProblem } from "../../models/pull.ts";

const file = (path: string, size = 100): RepoFile => ({ path, size, sha256: "a".repeat(64), gitOid: undefined });

describe("quantOf", () => {
  const cases: [string, string | undefined][] = [
    ["Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Q4_K_M"],
    ["qwen2.5-7b-instruct-q4_k_m.gguf", "Q4_K_M"],
    ["nomic-embed-text-v1.5.Q8_0.gguf", "Q8_0"],
    ["Llama-3.2-1B-Instruct-IQ4_XS.gguf", "IQ4_XS"],
    ["gemma-3-4b-it-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"],
    ["mmproj-model-f16.gguf", "F16"],
    ["mmproj-BF16.gguf", "BF16"],
    ["vision-fp16.gguf", "F16"],
    ["m-Q4_K_M-00001-of-00003.gguf", "Q4_K_M"],
    ["Q5_K_M/m-00001-of-00002.gguf", "Q5_K_M"],
    ["gpt-oss-20b-MXFP4.gguf", "MXFP4"],
    ["Qwen2-0.5B.gguf", undefined],
    ["model.gguf", undefined],
    // `_` joins a label's parts: no label inside another word
    ["xQ4_K_M.gguf", undefined],
  ];
  test.each(cases)("%p → %p", (path, expected) => expect(quantOf(path)).toBe(expected));
});

describe("quant order", () => {
  const ascending = ["Q2_K", "Q3_K_S", "Q3_K_M", "IQ4_XS", "Q4_0", "Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "F16", "F32"];
  test("ranks ascend as the data says", () => {
    const ranks = ascending.map((q) => quantRank(q)!);
    expect(ranks.every((r, i) => i === 0 || r > ranks[i - 1]!)).toBe(true);
  });
  test.each([
    ["f16", "BF16"],
    ["UD-Q4_K_XL", "Q4_K_XL"],
    ["fp16", "F16"],
  ])("%p ranks as %p", (a, b) => expect(quantRank(a)).toBe(quantRank(b)!));
  test("an unknown label has no rank", () => expect(quantRank("Q9_Z")).toBeUndefined());
});

describe("quantNames", () => {
  const cases: [string, string, boolean][] = [
    ["Q4_K_M", "m-Q4_K_M.gguf", true],
    ["q4_k_m", "m-Q4_K_M.gguf", true],
    ["Q4_K", "m-Q4_K_M.gguf", false],
    ["Q4_K_M", "m-Q4_K_M-00001-of-00002.gguf", true],
    ["Q4_K_M", "Q4_K_M/m-00001-of-00002.gguf", true],
    ["Q4_K_XL", "m-UD-Q4_K_XL.gguf", true],
    ["Q8", "m-Q8_0.gguf", false],
    ["Q4.K", "m-Q4xK.gguf", false],
  ];
  test.each(cases)("%p names %p: %p", (quant, path, expected) => expect(quantNames(quant, path)).toBe(expected));
});

describe("isSafeRepoPath", () => {
  const cases: [string, boolean][] = [
    ["m.gguf", true],
    ["sub/dir/m.gguf", true],
    ["a b/m (1).gguf", true],
    ["", false],
    ["../m.gguf", false],
    ["a/../m.gguf", false],
    ["./m.gguf", false],
    [".hidden/m.gguf", false],
    ["/abs/m.gguf", false],
    ["a//m.gguf", false],
    ["a\\m.gguf", false],
    ["a/m.gguf\n", false],
    ["a/\u0007.gguf", false],
    [`${"d/".repeat(8)}m.gguf`, false],
    [`${"x".repeat(256)}.gguf`, false],
  ];
  test.each(cases)("%p: %p", (path, expected) => expect(isSafeRepoPath(path)).toBe(expected));
});

describe("selectRepoFiles", () => {
  const tree = (...files: RepoFile[]) => [file("README.md", 10), file(".gitattributes", 10), ...files];
  type Want = { quant?: string; file?: string };
  type Expect = { files: string[]; mmproj?: string; quant?: string } | { error: PullErrorCode; mentions: string[] };
  const cases: [string, RepoFile[], Want, Expect][] = [
    [
      "Q4_K_M when no quant is named",
      tree(file("m-Q2_K.gguf", 30), file("m-Q4_K_M.gguf", 50), file("m-Q4_0.gguf", 45), file("m-Q8_0.gguf", 80)),
      {},
      { files: ["m-Q4_K_M.gguf"], quant: "Q4_K_M" },
    ],
    [
      "else the smallest of at least Q4_0 (by the tree's sizes)",
      tree(file("m-Q3_K_M.gguf", 30), file("m-Q8_0.gguf", 80), file("m-Q5_K_S.gguf", 55), file("m-Q4_K_S.gguf", 46), file("m-F16.gguf", 150)),
      {},
      { files: ["m-Q4_K_S.gguf"], quant: "Q4_K_S" },
    ],
    ["IQ4_XS is below Q4_0", tree(file("m-IQ4_XS.gguf", 40), file("m-Q8_0.gguf", 80)), {}, { files: ["m-Q8_0.gguf"] }],
    ["an F32-only repository", tree(file("m-F32.gguf", 400), file("m-F16.gguf", 200)), {}, { files: ["m-F16.gguf"] }],
    ["one file with no label", tree(file("model.gguf")), {}, { files: ["model.gguf"] }],
    [
      "nothing of at least Q4: the error lists what there is",
      tree(file("m-Q2_K.gguf"), file("m-Q3_K_M.gguf")),
      {},
      { error: "quant_not_found", mentions: ["Q2_K, Q3_K_M", "org/repo:QUANT"] },
    ],
    ["a quant, any case", tree(file("m-Q4_K_M.gguf"), file("m-Q8_0.gguf")), { quant: "q8_0" }, { files: ["m-Q8_0.gguf"], quant: "Q8_0" }],
    [
      "a missing quant lists those there are, in order",
      tree(file("m-Q8_0.gguf"), file("m-F32.gguf"), file("m-Q4_0.gguf"), file("mmproj-F16.gguf")),
      { quant: "Q5_K_M" },
      { error: "quant_not_found", mentions: ["has no Q5_K_M", "quants there: Q4_0, Q8_0, F32"] },
    ],
    [
      "the exact label before a variant that contains it",
      tree(file("m-UD-Q4_K_M.gguf", 40), file("m-Q4_K_M.gguf", 50)),
      { quant: "Q4_K_M" },
      { files: ["m-Q4_K_M.gguf"] },
    ],
    [
      "a split comes whole, shards in order",
      tree(
        file("Q4_K_M/m-Q4_K_M-00002-of-00003.gguf"),
        file("Q4_K_M/m-Q4_K_M-00001-of-00003.gguf"),
        file("Q4_K_M/m-Q4_K_M-00003-of-00003.gguf"),
        file("m-Q8_0.gguf", 1000),
      ),
      { quant: "Q4_K_M" },
      { files: ["Q4_K_M/m-Q4_K_M-00001-of-00003.gguf", "Q4_K_M/m-Q4_K_M-00002-of-00003.gguf", "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf"] },
    ],
    [
      "a split's size is all its shards",
      tree(file("m-Q4_0-00001-of-00002.gguf", 40), file("m-Q4_0-00002-of-00002.gguf", 40), file("m-Q4_1.gguf", 70)),
      {},
      { files: ["m-Q4_1.gguf"] },
    ],
    [
      "naming one shard brings the others",
      tree(file("m-00001-of-00002.gguf"), file("m-00002-of-00002.gguf")),
      { file: "m-00002-of-00002.gguf" },
      { files: ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"] },
    ],
    [
      "a split with a shard missing is refused",
      tree(file("m-Q4_K_M-00001-of-00003.gguf"), file("m-Q4_K_M-00003-of-00003.gguf")),
      {},
      { error: "not_found", mentions: ["shard(s) 2"] },
    ],
    ["a file by its path", tree(file("sub/m-Q8_0.gguf"), file("m-Q4_K_M.gguf")), { file: "sub/m-Q8_0.gguf" }, { files: ["sub/m-Q8_0.gguf"] }],
    ["a file that is not there", tree(file("m-Q8_0.gguf")), { file: "x.gguf" }, { error: "not_found", mentions: ["no file x.gguf", "m-Q8_0.gguf"] }],
    ["no GGUF at all", tree(file("model.safetensors")), {}, { error: "not_found", mentions: ["no GGUF"] }],
    [
      "the projector of the same quant",
      tree(file("m-Q8_0.gguf"), file("mmproj-m-Q8_0.gguf"), file("mmproj-m-F16.gguf")),
      { quant: "Q8_0" },
      { files: ["m-Q8_0.gguf"], mmproj: "mmproj-m-Q8_0.gguf" },
    ],
    [
      "else the F16 projector",
      tree(file("m-Q4_K_M.gguf"), file("mmproj-m-F32.gguf", 400), file("mmproj-m-f16.gguf", 200), file("mmproj-m-BF16.gguf", 200)),
      {},
      { files: ["m-Q4_K_M.gguf"], mmproj: "mmproj-m-f16.gguf" },
    ],
    ["else any projector", tree(file("m-Q4_K_M.gguf"), file("mmproj.gguf")), {}, { files: ["m-Q4_K_M.gguf"], mmproj: "mmproj.gguf" }],
    [
      "a projector is never taken for the model",
      tree(file("mmproj-Q4_K_M.gguf", 10), file("m-Q4_K_M.gguf", 50)),
      {},
      { files: ["m-Q4_K_M.gguf"], mmproj: "mmproj-Q4_K_M.gguf" },
    ],
    ["a projector asked for by name comes alone", tree(file("m-Q4_K_M.gguf"), file("mmproj-F16.gguf")), { file: "mmproj-F16.gguf" }, { files: ["mmproj-F16.gguf"] }],
    [
      "unsafe paths in the tree are not considered",
      tree(file("../evil-Q4_K_M.gguf", 1), file(".hidden/m-Q4_K_M.gguf", 1), file("m-Q8_0.gguf", 80)),
      {},
      { files: ["m-Q8_0.gguf"] },
    ],
  ];
  test.each(cases)("%s", (_label, entries, want, expected) => {
    if ("error" in expected) {
      let caught: unknown;
      try {
        selectRepoFiles("org/repo", entries, want);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(PullError);
      expect((caught as PullError).code).toBe(expected.error);
      for (const m of expected.mentions) expect((caught as PullError).message).toContain(m);
      return;
    }
    const got = selectRepoFiles("org/repo", entries, want);
    expect(got.files.map((f) => f.path)).toEqual(expected.files);
    expect(got.mmproj?.path).toBe(expected.mmproj);
    if (expected.quant) expect(got.quant).toBe(expected.quant);
  });
});

describe("spaceProblem: room for the bytes still to fetch, and a margin", () => {
  const GiB = 2 ** 30;
  const cases: [number, number, boolean][] = [
    [5 * GiB, 10 * GiB, false],
    [5 * GiB, 5 * GiB + FREE_SPACE_MARGIN, false],
    [5 * GiB, 5 * GiB + FREE_SPACE_MARGIN - 1, true],
    [1e15, 80 * GiB, true],
    // nothing to fetch never fails, however full the disk
    [0, 0, false],
  ];
  test.each(cases)("need %p, free %p: refused %p", (need, free, refused) => {
    const problem = spaceProblem(need, free);
    expect(problem !== undefined).toBe(refused);
    if (problem) expect(problem).toContain("free");
  });
});
