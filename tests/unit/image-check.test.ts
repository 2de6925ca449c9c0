/** The images a request carries inline, checked before anything loads: what llama.cpp reads, and no bigger than it may decode. */
import { describe, expect, test } from "bun:test";
import { gradientPng, pngDataUrl } from "../../harness/png.ts";
import { imageProblem, imagesRefusal, MAX_IMAGE_PIXELS } from "../../router/serving/image-check.ts";

const b64 = (bytes: Uint8Array | number[]) => Buffer.from(bytes).toString("base64");
const png = b64(gradientPng(8, 4));
/** A PNG's signature and header chunk saying `w` x `h` (enough for its size to be read). */
function pngHeader(w: number, h: number): string {
  const buf = Buffer.alloc(33);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(buf, 0);
  buf.writeUInt32BE(13, 8);
  buf.write("IHDR", 12, "ascii");
  buf.writeUInt32BE(w, 16);
  buf.writeUInt32BE(h, 20);
  buf[24] = 8;
  buf[25] = 2;
  return b64(buf);
}
const gif = b64([...Buffer.from("GIF89a"), 2, 0, 3, 0, 0, 0, 0, 0x3b]);
/** SOI, a JFIF APP0 segment, then a baseline frame header of 7 x 5. */
const jpeg = b64([0xff, 0xd8, 0xff, 0xe0, 0, 16, ...Buffer.from("JFIF\0"), 1, 1, 0, 0, 1, 0, 1, 0, 0, 0xff, 0xc0, 0, 17, 8, 0, 5, 0, 7, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1, 0xff, 0xd9]);
const webp = b64([...Buffer.from("RIFF"), 30, 0, 0, 0, ...Buffer.from("WEBPVP8X"), 10, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0]);

describe("imageProblem", () => {
  test.each<[string, string | undefined, string | undefined]>([
    ["a PNG", png, undefined],
    ["a GIF", gif, undefined],
    ["a JPEG", jpeg, undefined],
    ["text, not an image", b64(Buffer.from("hello")), "is not an image"],
    ["not base64", "!!!!", "is not valid base64"],
    ["WebP: llama.cpp does not read it", webp, "is webp, which llama.cpp does not read"],
    ["a URL, not inline", undefined, "is not inline base64"],
    ["over the pixels an image may have", pngHeader(16000, 16000), "is 16000 x 16000 pixels, over the 50 megapixels"],
    ["a 48-megapixel photo passes", pngHeader(8000, 6000), undefined],
  ])("%s", (_, data, problem) => {
    const out = imageProblem(data);
    if (problem === undefined) return expect(out).toBeUndefined();
    expect(out).toContain(problem);
  });

  test("the bound is what it says", () => expect(MAX_IMAGE_PIXELS).toBe(50_000_000));
});

describe("imagesRefusal: every image of a request, in the shapes that reach a server", () => {
  const chat = (url: string) => ({ messages: [{ role: "user", content: [{ type: "text", text: "what is it?" }, { type: "image_url", image_url: { url } }] }] });
  test.each<[string, unknown, string | undefined]>([
    ["a chat message's data URL", chat(pngDataUrl(gradientPng(4, 4))), undefined],
    ["junk in a chat message", chat("data:image/png;base64,aGVsbG8="), "the image at messages[0].content[1] is not an image"],
    ["an image_url given as a string", { messages: [{ role: "user", content: [{ type: "image_url", image_url: "data:image/png;base64,aGVsbG8=" }] }] }, "is not an image"],
    ["Anthropic's base64 source", { messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: png } }] }] }, undefined],
    ["junk in Anthropic's source", { messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "aGVsbG8=" } }] }] }, "messages[0].content[0] is not an image"],
    ["junk inside an Anthropic tool result", { messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: [{ type: "image", source: { type: "base64", data: "aGVsbG8=" } }] }] }] }, "messages[0].content[0].content[0] is not an image"],
    ["the second image is the bad one", { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: pngDataUrl(gradientPng(2, 2)) } }] }, { role: "user", content: [{ type: "image_url", image_url: { url: "data:image/gif;base64,aGVsbG8=" } }] }] }, "messages[1].content[0]"],
    ["no images", { messages: [{ role: "user", content: "hi" }] }, undefined],
  ])("%s", (_, body, words) => {
    const out = imagesRefusal(body);
    if (words === undefined) return expect(out).toBeUndefined();
    expect(out).toContain(words);
  });
});
