/** Where the demo says the node listens: what the node's own log says, in either format. */
import { expect, test } from "bun:test";
import { apiUrlIn } from "../../scripts/api-address.ts";

test.each([
  ["the text line", "mesh API listening on http://127.0.0.1:9401 version=0.1.0 models=1\n", "http://127.0.0.1:9401"],
  ["the JSON line", '{"time":"t","level":"info","msg":"mesh API listening on http://[::1]:9337","version":"0.1.0"}\n', "http://[::1]:9337"],
  ["after other lines, before the ollama API's", "demo\nmesh API listening on http://127.0.0.1:40123 v=1\nollama API listening on http://127.0.0.1:11434\n", "http://127.0.0.1:40123"],
  ["a line cut mid-port: not yet", "mesh API listening on http://127.0.0.1:94", undefined],
  ["only the ollama API's", "ollama API listening on http://127.0.0.1:11434\n", undefined],
  ["nothing yet", "", undefined],
])("%s", (_, log, expected) => {
  expect(apiUrlIn(log)).toBe(expected);
});
