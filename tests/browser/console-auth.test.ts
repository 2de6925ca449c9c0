/**
 * The console of a node with `--api-key`, in real Chromium: nothing is shown until the key is
 * entered (the key form, the live status unauthorized, no nodes); a wrong key is refused on the
 * page; the right one shows the mesh. The key lives in the tab's sessionStorage only: not in
 * localStorage, not in a cookie, and a new browser context asks for it again.
 */
import { afterAll, beforeAll, expect } from "bun:test";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { attr, browserSuite, byTestId, screenshot, visible, waitForAttr } from "../../harness/browser.ts";
import { waitFor } from "../../harness/wait.ts";

const { skip, browserTest, open, newContext } = browserSuite("tests/browser/console-auth.test.ts");

const KEY = "console-auth-test-key-8f3a";
let node: MeshTestNode;

beforeAll(async () => {
  if (skip) return;
  node = await startMeshNode(["--api-key", KEY], { name: "keyed" });
});
afterAll(async () => {
  try {
    await node?.stop();
  } finally {
    await killAllChildren();
  }
});

/** What the page keeps, as the page itself sees it. */
const STORED = `JSON.stringify({ session: Object.entries(sessionStorage), local: Object.entries(localStorage), cookie: document.cookie })`;

browserTest("nothing is shown until the key is entered; a wrong key is refused; the right one shows the mesh", async () => {
  const { page, errors } = await open(node.url);
  await visible(byTestId(page, "key-form"));
  await waitForAttr(byTestId(page, "live-status"), "data-state", (v) => v === "unauthorized", "the page to say it is unauthorized");
  expect(await byTestId(page, "node-row").count()).toBe(0);
  // Nor on any other tab.
  await page.goto(`${node.url}/#/models`);
  await visible(byTestId(page, "key-form"));
  expect(await byTestId(page, "model-row").count()).toBe(0);
  await screenshot(page, "key-desktop");

  await byTestId(page, "key-input").fill("not-the-key");
  await byTestId(page, "key-submit").click();
  await visible(byTestId(page, "key-error"));
  expect(await byTestId(page, "node-row").count()).toBe(0);
  expect(await attr(byTestId(page, "live-status"), "data-state")).toBe("unauthorized");

  await byTestId(page, "key-input").fill(KEY);
  await byTestId(page, "key-submit").click();
  await waitForAttr(byTestId(page, "live-status"), "data-state", (v) => v === "live", "the page to go live with the right key", 20_000);
  await page.goto(`${node.url}/#/mesh`);
  await waitForAttr(byTestId(page, "node-row", { "data-node-id": node.nodeId }), "data-state", (v) => v === "up", "this node's row");
  expect(await byTestId(page, "key-form").count()).toBe(0);

  // The key is in this tab's sessionStorage and nowhere else the browser keeps things.
  const stored = JSON.parse(await page.evaluate<string>(STORED)) as { session: [string, string][]; local: [string, string][]; cookie: string };
  expect(stored.session.some(([, v]) => v.includes(KEY))).toBe(true);
  expect(JSON.stringify(stored.local)).not.toContain(KEY);
  expect(stored.cookie).not.toContain(KEY);
  expect(JSON.stringify(await page.context().cookies())).not.toContain(KEY);
  // A reload of the same tab keeps it (sessionStorage outlives a reload).
  await page.reload();
  await waitForAttr(byTestId(page, "live-status"), "data-state", (v) => v === "live", "the reloaded tab to go live on its stored key", 20_000);
  // Only the 401s of the wrong key and of the first, keyless, requests may be logged.
  expect(errors.filter((e) => !/401|Unauthorized/i.test(e))).toEqual([]);

  // A new browser context has its own storage: it asks again.
  const fresh = await open(node.url, { context: await newContext() });
  await visible(byTestId(fresh.page, "key-form"));
  await waitForAttr(byTestId(fresh.page, "live-status"), "data-state", (v) => v === "unauthorized", "a new context to be unauthorized");
  await waitFor(async () => (await byTestId(fresh.page, "node-row").count()) === 0, { what: "no node rows in a new context" });
});
