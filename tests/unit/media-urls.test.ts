/** Which request bodies name media by URL (which llama-server would download), across the APIs' shapes. */
import { expect, test } from "bun:test";
import { remoteMediaUrl } from "../../router/serving/media-urls.ts";

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
  ["chat input_audio, base64", chat({ type: "input_audio", input_audio: { data: "UklGRiQAAABXQVZF", format: "wav" } }), undefined],
  ["chat input_audio, data a URL", chat({ type: "input_audio", input_audio: { data: "http://127.0.0.1:9/a.wav", format: "wav" } }), "http://127.0.0.1:9/a.wav"],
  ["chat input_audio, by url", chat({ type: "input_audio", input_audio: { url: "http://lan/a.wav" } }), "http://lan/a.wav"],
  ["chat input_audio, file: data", chat({ type: "input_audio", input_audio: { data: "file:///etc/passwd", format: "wav" } }), "file:///etc/passwd"],
  ["chat input_video, by url", chat({ type: "input_video", input_video: { url: "http://10.0.0.2/v.mp4" } }), "http://10.0.0.2/v.mp4"],
  ["chat video_url", chat({ type: "video_url", video_url: { url: "http://169.254.169.254/v" } }), "http://169.254.169.254/v"],
  ["chat video_url, inline", chat({ type: "video_url", video_url: { url: "data:video/mp4;base64,AAAA" } }), undefined],
  ["chat audio_url as a string", chat({ type: "audio_url", audio_url: "https://example.com/a.mp3" }), "https://example.com/a.mp3"],
  ["chat file, inline", chat({ type: "file", file: { file_data: "data:application/pdf;base64,JVBERi0=", filename: "a.pdf" } }), undefined],
  ["a tool's schema with a url property is not media", { model: "m", messages: [{ role: "user", content: "hi" }], tools: [{ type: "function", function: { name: "open", parameters: { type: "object", properties: { page_url: { type: "string" } } } } }] }, undefined],
  ["a schema's default naming a URL, in tools", { model: "m", messages: [{ role: "user", content: "hi" }], tools: [{ type: "function", function: { name: "f", parameters: { type: "object", default: { avatar_url: "https://x/a.png" } } } }] }, undefined],
  ["a response format's schema naming a URL", { model: "m", messages: [], response_format: { type: "json_schema", json_schema: { schema: { examples: [{ image_url: "https://x/b.png" }] } } } }, undefined],
  ["a callback URL in metadata", { model: "m", messages: [], metadata: { callback_url: "https://example.com/cb" } }, undefined],
  ["a media URL at the top of the body", { model: "m", image_url: "http://10.0.0.9/x" }, "http://10.0.0.9/x"],
  ["deep inside a tool result", { model: "m", messages: [{ role: "tool", content: [{ content: [[{ image_url: "http://deep/x" }]] }] }] }, "http://deep/x"],
] as const)("%s", (_, body, remote) => expect(remoteMediaUrl(body)).toBe(remote));

test("a body nested far deeper than any stack is walked without overflow", () => {
  let node: unknown = { image_url: "http://bottom/x" };
  for (let i = 0; i < 100_000; i++) node = [node];
  expect(remoteMediaUrl({ model: "m", messages: node })).toBe("http://bottom/x");
});
