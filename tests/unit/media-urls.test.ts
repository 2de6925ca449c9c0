/** Which request bodies name media by URL (which llama-server would download), across the APIs' shapes. */
import { expect, test } from "bun:test";
import { remoteMediaUrl } from "../../router/media-urls.ts";

const DATA = "data:image/png;base64,iVBORw0KGgo=";
const chat = (part: unknown) => ({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: "hi" }, part] }] });

test.each([
  ["plain text chat", { model: "m", messages: [{ role: "user", content: "hi" }] }, undefined],
  ["chat image_url as an object, inline", chat({ type: "image_url", image_url: { url: DATA } }), undefined],
  ["chat image_url as a string, inline", chat({ type: "image_url", image_url: DATA }), undefined],
  ["chat image_url, http", chat({ type: "image_url", image_url: { url: "http://127.0.0.1:8080/x.png" } }), "http://127.0.0.1:8080/x.png"],
  ["chat image_url, metadata address", chat({ type: "image_url", image_url: { url: "http://169.254.169.254/latest" } }), "http://169.254.169.254/latest"],
  ["chat image_url as a string, https", chat({ type: "image_url", image_url: "https://example.com/a.png" }), "https://example.com/a.png"],
  ["chat image_url, DATA: in capitals", chat({ type: "image_url", image_url: { url: " DATA:image/png;base64,AA==" } }), undefined],
  ["chat image_url, url not a string", chat({ type: "image_url", image_url: { url: 42 } }), "42"],
  ["responses input_image", { model: "m", input: [{ role: "user", content: [{ type: "input_image", image_url: "http://10.0.0.1/a" }] }] }, "http://10.0.0.1/a"],
  ["responses input_file", { model: "m", input: [{ role: "user", content: [{ type: "input_file", file_url: "http://lan/doc.pdf" }] }] }, "http://lan/doc.pdf"],
  ["anthropic image by url", { model: "m", messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: "http://x/y.png" } }] }] }, "http://x/y.png"],
  ["anthropic document by url", { model: "m", messages: [{ role: "user", content: [{ type: "document", source: { type: "url", url: "http://x/d.pdf" } }] }] }, "http://x/d.pdf"],
  ["anthropic image, base64", { model: "m", messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AA==" } }] }] }, undefined],
  ["deep inside a tool result", { model: "m", messages: [{ role: "tool", content: [{ content: [[{ image_url: "http://deep/x" }]] }] }] }, "http://deep/x"],
] as const)("%s", (_, body, remote) => expect(remoteMediaUrl(body)).toBe(remote));

test("a body nested far deeper than any stack is walked without overflow", () => {
  let node: unknown = { image_url: "http://bottom/x" };
  for (let i = 0; i < 100_000; i++) node = [node];
  expect(remoteMediaUrl({ model: "m", messages: node })).toBe("http://bottom/x");
});
