import { describe, expect, test } from "bun:test";
import { formatModels, rowsOfListing } from "../../commands/models.ts";
import { PULL_ERROR_STATUS, refProblem } from "../../node/model-admin.ts";

const GiB = 2 ** 30;

describe("mesh models: the table", () => {
  test("columns in order, loaded as yes/no, sizes readable", () => {
    const text = formatModels([
      { name: "hf.co/org/repo:Q8_0", sizeBytes: 12 * 2 ** 20, quant: "Q8_0", store: "models-dir", path: "/m/hf/org/repo/r.gguf", loaded: true },
      { name: "llama3.2:3b", sizeBytes: 2 * GiB, quant: null, store: "ollama", path: "/o/blobs/sha256-x", loaded: false },
    ]);
    expect(text.split("\n")).toEqual([
      "NAME                 SIZE      QUANT  STORE       PATH                   LOADED",
      "hf.co/org/repo:Q8_0  12.0 MiB  Q8_0   models-dir  /m/hf/org/repo/r.gguf  yes",
      "llama3.2:3b          2.0 GiB   -      ollama      /o/blobs/sha256-x      no",
    ]);
  });
  test("none: says how to get one", () => {
    expect(formatModels([])).toContain("mesh pull");
  });
  test("from a node's listing: only the models with a file here", () => {
    expect(
      rowsOfListing([
        { id: "here", size: 5, quant: "Q8_0", store: "models-dir", checkpoint: "/m/here.gguf", status: "loaded" },
        { id: "on-a-peer", size: 9, status: "unloaded" },
      ]),
    ).toEqual([{ name: "here", sizeBytes: 5, quant: "Q8_0", store: "models-dir", path: "/m/here.gguf", loaded: true }]);
  });
});

describe("refProblem: references refused before anything is fetched", () => {
  const cases: [ref: string, says: string | undefined][] = [
    ["bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", undefined],
    ["hf.co/org/repo:Q8_0", undefined],
    ["https://huggingface.co/org/repo/resolve/main/a.gguf", undefined],
    ["http://10.0.0.5/a.gguf", undefined],
    ["qwen2.5-7b-instruct", undefined],
    ["", "a model reference is required"],
    ["file:///etc/passwd", "file: references are not pulled"],
    ["FILE:///etc/passwd", "file: references are not pulled"],
    ["ftp://host/a.gguf", "ftp: references are not pulled"],
    ["org/repo\n:Q4", "no spaces"],
    ["org/re po", "no spaces"],
    ["org\\repo", "backslashes"],
    ["x".repeat(3000), "too long"],
  ];
  test.each(cases)("%p", (ref, says) => {
    if (says === undefined) expect(refProblem(ref)).toBeUndefined();
    else expect(refProblem(ref)).toContain(says);
  });
});

describe("the status each pull failure answers with", () => {
  test.each([
    ["bad_reference", 400],
    ["gated", 401],
    ["not_found", 404],
    ["quant_not_found", 404],
    ["no_space", 507],
    ["name_taken", 409],
    ["download_failed", 502],
    ["hash_mismatch", 502],
  ] as const)("%s: %d", (code, status) => {
    expect(PULL_ERROR_STATUS[code]).toBe(status);
  });
});
