import { expect, test } from "bun:test";
import { hidePaths, hidePathsInJson } from "../../mesh/member-text.ts";

test.each([
  ['model "m": file /home/alice/models/sub/m.gguf does not exist', 'model "m": file m.gguf does not exist'],
  ["/var/lib/mesh/models/x.gguf", "x.gguf"],
  ['llama-server exited: error loading model "/root/.mesh/m.gguf" (code 1)', 'llama-server exited: error loading model "m.gguf" (code 1)'],
  ["path=/tmp/a/b.gguf, next", "path=b.gguf, next"],
  ["failed: (/srv/models/q.gguf)", "failed: (q.gguf)"],
  ["see https://huggingface.co/org/repo/resolve/main/x.gguf", "see https://huggingface.co/org/repo/resolve/main/x.gguf"],
  ["a ratio 3/4 and and/or stay", "a ratio 3/4 and and/or stay"],
  ["POST /api/v1/load is not open to mesh members", "POST /api/v1/load is not open to mesh members"],
  ["GET /v1/models and /tokenize stay", "GET /v1/models and /tokenize stay"],
  ["in /home/alice/models; pull under another name", "in models; pull under another name"],
  ["no path here", "no path here"],
])("%p → %p", (text, shown) => {
  expect(hidePaths(text)).toBe(shown);
});

test("in a JSON answer, every string: after an escaped line break or tab too", () => {
  const body = JSON.stringify({ error: { message: "llama-server exited:\n/home/alice/.models/x.gguf\tand;/srv/m/y.gguf", code: "load_failed", n: 3 } });
  expect(JSON.parse(hidePathsInJson(body))).toEqual({ error: { message: "llama-server exited:\nx.gguf\tand;y.gguf", code: "load_failed", n: 3 } });
  expect(hidePathsInJson("not json /var/lib/mesh/z.gguf")).toBe("not json z.gguf");
});
