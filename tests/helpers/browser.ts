/**
 * Real Chromium for the console's browser tests: Debian's `chromium` driven by playwright-core.
 * `browserSuite()` gives a test file one browser, launched before its first test and closed after
 * its last whatever happened (and killed at process exit should the file die first); every page a
 * test opens lives in its own context, closed after that test. Where there is no Chromium the
 * file's tests skip, saying why. The page is found by its `data-testid`s (the contract with
 * console/src); screenshots go to docs/console/, overwritten on every run.
 */
import { afterAll, afterEach, beforeAll, test } from "bun:test";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from "playwright-core";
import type { ConsoleState } from "../../console/protocol.ts";
import { waitFor } from "./wait.ts";

const REPO = join(import.meta.dir, "..", "..");
export const SCREENSHOT_DIR = join(REPO, "docs", "console");

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

export interface OpenOptions {
  /** The page's route, e.g. "#/models"; the default tab when absent. */
  route?: string;
  viewport?: { width: number; height: number };
  colorScheme?: "light" | "dark";
  /** An existing context (another tab of the same session); a new one when absent. */
  context?: BrowserContext;
}

/** A console page, with what it threw or logged as an error (shown when a test fails). */
export interface ConsolePage {
  page: Page;
  context: BrowserContext;
  errors: string[];
}

export interface BrowserSuite {
  skip: string | undefined;
  /** `test`, skipped where there is no Chromium. */
  browserTest: ReturnType<typeof test.skipIf>;
  /** Opens the console of the node at `url` in a new context (closed after the running test). */
  open(url: string, opts?: OpenOptions): Promise<ConsolePage>;
  /** A new context of its own (its sessionStorage is empty), closed after the running test. */
  newContext(opts?: OpenOptions): Promise<BrowserContext>;
}

export function browserSuite(title: string): BrowserSuite {
  const skip = browserUnavailable();
  if (skip) console.log(`SKIP ${title}: ${skip}`);
  // A test process that dies before afterAll still takes its Chromium with it: playwright kills
  // the browsers it launched at exit and on SIGINT, SIGTERM and SIGHUP.
  let browser: Browser | undefined;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    if (skip) return;
    browser = await chromium.launch({ executablePath: chromiumPath(), args: ["--no-sandbox"], headless: true, timeout: 60_000 });
  });
  afterEach(async () => {
    for (const c of contexts.splice(0)) await c.close().catch(() => undefined);
  });
  afterAll(async () => {
    for (const c of contexts.splice(0)) await c.close().catch(() => undefined);
    await browser?.close();
  });

  const newContext = async (opts: OpenOptions = {}) => {
    if (!browser) throw new Error("the browser is not running (launch failed, or called outside a browser test)");
    const context = await browser.newContext({ viewport: opts.viewport ?? DESKTOP, colorScheme: opts.colorScheme ?? "light", reducedMotion: "reduce" });
    contexts.push(context);
    return context;
  };

  return {
    skip,
    browserTest: test.skipIf(skip !== undefined),
    newContext,
    async open(url, opts = {}) {
      const context = opts.context ?? (await newContext(opts));
      const page = await context.newPage();
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
      page.on("console", (m) => {
        if (m.type() === "error") errors.push(`console.error: ${m.text()} (${m.location().url})`);
      });
      await page.goto(`${url}/${opts.route ?? ""}`, { waitUntil: "domcontentloaded", timeout: 30_000 });
      return { page, context, errors };
    },
  };
}

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
    { what: `${what} (last ${name}=${JSON.stringify(value)})`, timeoutMs, intervalMs: 25 },
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
