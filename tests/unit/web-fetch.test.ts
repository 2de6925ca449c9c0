/** fetchWeb follows redirects only to http(s): fetch on its own would read a `file:` redirect off the disk. */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fetchWeb } from "../../base/web-fetch.ts";

const dir = mkdtempSync(join(tmpdir(), "mesh-web-fetch-"));
const secret = join(dir, "secret.json");
writeFileSync(secret, '{"secret":true}', { mode: 0o600 });
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    const path = new URL(req.url).pathname;
    if (path === "/ok") return Response.json({ ok: true });
    if (path === "/loop") return new Response(null, { status: 302, headers: { location: "/loop" } });
    if (path.startsWith("/to/")) return new Response(null, { status: 302, headers: { location: decodeURIComponent(path.slice(4)) } });
    return new Response("no", { status: 404 });
  },
});
const base = `http://127.0.0.1:${server.port}`;
afterAll(() => {
  server.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

test.each([
  ["a redirect to file:", `${base}/to/${encodeURIComponent(`file://${secret}`)}`, "redirects to file://"],
  ["a redirect to data:", `${base}/to/${encodeURIComponent('data:application/json,{"secret":true}')}`, "data is not http or https"],
  ["a file: URL itself", `file://${secret}`, "file is not http or https"],
  ["a redirect loop", `${base}/loop`, "redirects more than 10 times"],
])("%s is refused", async (_, url, why) => {
  const err = await fetchWeb(url).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(Error);
  expect((err as Error).message).toContain(why);
});

test("a redirect to another http path is followed", async () => {
  const res = await fetchWeb(`${base}/to/${encodeURIComponent("/ok")}`);
  expect(await res.json()).toEqual({ ok: true });
});
