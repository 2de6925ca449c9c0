/** Ollama's copy as hard links: which links a copy makes, and which names a request may not give. */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { copyPlan, linkModelAs, ModelCopyError } from "../../models/model-copy.ts";
import type { ModelInfo } from "../../models/model-store.ts";

const model = (over: Partial<ModelInfo> = {}) => ({ name: "qwen", files: ["/m/qwen.gguf"], mmproj: undefined, problem: undefined, ...over });

describe("copyPlan", () => {
  test.each([
    ["one file", model(), "qwen2", [["/m/qwen.gguf", "qwen2.gguf"]]],
    ["a projector beside it", model({ mmproj: "/m/mmproj-qwen.gguf" }), "vis", [["/m/qwen.gguf", "vis.gguf"], ["/m/mmproj-qwen.gguf", "mmproj-vis.gguf"]]],
    [
      "shards keep their suffix",
      model({ files: ["/m/big-00001-of-00002.gguf", "/m/big-00002-of-00002.gguf"] }),
      "huge",
      [["/m/big-00001-of-00002.gguf", "huge-00001-of-00002.gguf"], ["/m/big-00002-of-00002.gguf", "huge-00002-of-00002.gguf"]],
    ],
    ["a tag in the name", model(), "qwen:v2", [["/m/qwen.gguf", "qwen:v2.gguf"]]],
  ] as const)("%s", (_, m, dest, plan) => expect(copyPlan(m, dest)).toEqual(plan.map((p) => [...p])));

  test.each([
    ["../escape", 400],
    ["a/b", 400],
    [".hidden", 400],
    ["", 400],
    ["x\0y", 400],
    ["x\ny", 400],
    ["x\u007fy", 400],
  ] as const)("destination %p is refused with %p", (dest, status) => {
    const err = (() => {
      try {
        copyPlan(model(), dest);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ModelCopyError);
    expect((err as ModelCopyError).status).toBe(status);
  });

  test("a model with a problem or no file is refused", () => {
    expect(() => copyPlan(model({ problem: "split model is missing shard(s) 2" }), "x")).toThrow("cannot be copied");
    expect(() => copyPlan(model({ files: [] }), "x")).toThrow("has no file");
  });
});

describe("linkModelAs", () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
  const setup = () => {
    const dir = mkdtempSync(join(tmpdir(), "mesh-copy-"));
    dirs.push(dir);
    writeFileSync(join(dir, "qwen.gguf"), "GGUF-qwen");
    writeFileSync(join(dir, "mmproj-qwen.gguf"), "GGUF-proj");
    writeFileSync(join(dir, "taken.gguf"), "GGUF-other");
    const info = { ...model(), files: [join(dir, "qwen.gguf")], mmproj: join(dir, "mmproj-qwen.gguf") } as ModelInfo;
    return { dir, info };
  };

  test("links every file under the new name: same inode, no bytes copied", () => {
    const { dir, info } = setup();
    linkModelAs(info, "vis", dir);
    expect(statSync(join(dir, "vis.gguf")).ino).toBe(statSync(join(dir, "qwen.gguf")).ino);
    expect(statSync(join(dir, "mmproj-vis.gguf")).ino).toBe(statSync(join(dir, "mmproj-qwen.gguf")).ino);
  });

  test("an existing name refuses the copy, replaces nothing, and leaves no half copy", () => {
    const { dir, info } = setup();
    writeFileSync(join(dir, "mmproj-taken.gguf"), "GGUF-someone-else");
    // The model's own name is taken: the first link fails, and nothing is made.
    const err = (() => {
      try {
        linkModelAs(info, "taken", dir);
      } catch (e) {
        return e;
      }
    })() as ModelCopyError;
    expect(err.status).toBe(409);
    expect(readFileSync(join(dir, "taken.gguf"), "utf8")).toBe("GGUF-other");
    expect(readFileSync(join(dir, "mmproj-taken.gguf"), "utf8")).toBe("GGUF-someone-else");
  });

  test("a second link failing removes the first", () => {
    const { dir, info } = setup();
    writeFileSync(join(dir, "mmproj-new.gguf"), "GGUF-someone-else");
    expect(() => linkModelAs(info, "new", dir)).toThrow("already exists");
    expect(existsSync(join(dir, "new.gguf"))).toBe(false);
    expect(readFileSync(join(dir, "mmproj-new.gguf"), "utf8")).toBe("GGUF-someone-else");
  });
});
