/**
 * The console page as the browser tests and the console soak bench see it, without bun:test: where
 * Chromium is, finding the page's parts by their `data-testid`s (the contract with console/src),
 * moving between tabs, and what the page holds (DOM elements, JS heap after GC).
 */
import { existsSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_LINE } from "../mesh/transport.ts";
import type { Locator, Page } from "playwright-core";
import type { ConsoleState } from "../console/protocol.ts";
import { TEST_LINE } from "./node.ts";
import { waitFor } from "./wait.ts";

export const REPO = join(import.meta.dir, "..");
/**
 * docs/console shows the default line; the same pages taken on the matrix's line (at the same time,
 * by another process) go to a dir of their own so the two never write one file.
 */
export const SCREENSHOT_DIR = TEST_LINE === DEFAULT_LINE ? join(REPO, "docs", "console") : join(tmpdir(), `mesh-console-screenshots-${TEST_LINE}-${process.pid}`);

/** The Chromium the tests drive: MESH_CHROMIUM, else Debian's; undefined when it is not there. */
export function chromiumPath(): string | undefined {
  const path = process.env.MESH_CHROMIUM ?? "/usr/bin/chromium";
  return existsSync(path) ? path : undefined;
}

/** Why browser tests cannot run here, or undefined. */
export function browserUnavailable(): string | undefined {
  if (!chromiumPath()) return `no Chromium at ${process.env.MESH_CHROMIUM ?? "/usr/bin/chromium"} (Debian: apt-get install chromium; or set MESH_CHROMIUM)`;
  return undefined;
}

export const DESKTOP = { width: 1280, height: 800 } as const;
export const MOBILE = { width: 390, height: 844 } as const;

/** `[data-testid=id]`, optionally with more attributes, e.g. `byTestId(page, "model-row", { "data-model": "x" })`. */
export function byTestId(scope: Page | Locator, id: string, attrs: Record<string, string> = {}): Locator {
  const extra = Object.entries(attrs)
    .map(([k, v]) => `[${k}=${JSON.stringify(v)}]`)
    .join("");
  return scope.locator(`[data-testid=${JSON.stringify(id)}]${extra}`);
}

/** Waits for the element to be visible; resolves with it. */
export async function visible(locator: Locator, timeoutMs = 15_000): Promise<Locator> {
  await locator.first().waitFor({ state: "visible", timeout: timeoutMs });
  return locator;
}

/** The attribute of the first element matching, or null when there is none (yet). */
export async function attr(locator: Locator, name: string): Promise<string | null> {
  return (await locator.count()) ? locator.first().getAttribute(name, { timeout: 2_000 }) : null;
}

/** Waits until the attribute satisfies `ok`; resolves with its value and the ms it took. */
export async function waitForAttr(locator: Locator, name: string, ok: (v: string | null) => boolean, what: string, timeoutMs = 15_000): Promise<{ value: string | null; ms: number }> {
  const started = performance.now();
  let value: string | null = null;
  await waitFor(
    async () => {
      value = await attr(locator, name);
      return ok(value);
    },
    { what: () => `${what} (last ${name}=${JSON.stringify(value)})`, timeoutMs, intervalMs: 25 },
  );
  return { value, ms: performance.now() - started };
}

/** Clicks a nav link and waits for the hash to follow. */
export async function goTab(page: Page, tab: "mesh" | "models" | "traffic" | "chat" | "logs"): Promise<void> {
  await byTestId(page, `nav-${tab}`).first().click();
  await page.waitForFunction(`location.hash === "#/${tab}"`, undefined, { timeout: 5_000 });
}

/** The viewport as docs/console/<name>.png (overwritten each run, kept small: the viewport only). */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: false, animations: "disabled", caret: "hide", timeout: 15_000 });
  return path;
}

/** Elements in the page's document (the DOM size the soak watches). */
export const domSize = (page: Page): Promise<number> => page.evaluate<number>("document.getElementsByTagName('*').length");

/** The page's JS heap in use after a full garbage collection, in bytes (CDP). */
export async function heapAfterGc(page: Page): Promise<number> {
  const cdp = await page.context().newCDPSession(page);
  try {
    // Twice: the first collection can leave what finalizers freed for the next.
    await cdp.send("HeapProfiler.collectGarbage");
    await cdp.send("HeapProfiler.collectGarbage");
    return (await cdp.send("Runtime.getHeapUsage")).usedSize;
  } finally {
    await cdp.detach().catch(() => undefined);
  }
}

/** A node's `/api/console/state` (with its API key when it has one). */
export async function consoleState(url: string, key?: string): Promise<ConsoleState> {
  const res = await fetch(`${url}/api/console/state`, { headers: key ? { authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(10_000) });
  if (res.status !== 200) throw new Error(`GET ${url}/api/console/state: ${res.status} ${await res.text()}`);
  return (await res.json()) as ConsoleState;
}
