/**
 * PNG images for tests that send a picture to a vision model: a colored gradient of any size,
 * encoded by `pngjs` (the long-kept pure-JS PNG codec; its sync API runs under Bun), as bytes or
 * as the `data:` URL an OpenAI chat message's `image_url` part carries.
 */
import { PNG } from "pngjs";

/** An RGB gradient `width` x `height`: red grows left to right, green top to bottom, blue fixed. */
export function gradientPng(width = 64, height = 64): Buffer {
  const png = new PNG({ width, height, colorType: 2, inputHasAlpha: true });
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      png.data[i] = Math.round((255 * x) / Math.max(1, width - 1));
      png.data[i + 1] = Math.round((255 * y) / Math.max(1, height - 1));
      png.data[i + 2] = 128;
      png.data[i + 3] = 255;
    }
  return PNG.sync.write(png, { colorType: 2 });
}

/** `data:image/png;base64,...` for the bytes of a PNG. */
export const pngDataUrl = (png: Uint8Array): string => `data:image/png;base64,${Buffer.from(png).toString("base64")}`;
