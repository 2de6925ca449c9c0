import { expect, test } from "bun:test";
import { hidePaths } from "../../mesh/member-text.ts";

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
