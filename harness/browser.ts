/**
 * Real Chromium for the console's browser tests: Debian's `chromium` driven by playwright-core.
 * `browserSuite()` gives a test file one browser, launched before its first test and closed after
 * its last whatever happened (and killed at process exit should the file die first); every page a
 * test opens lives in its own context, closed after that test. Where there is no Chromium the
 * file's tests skip, saying why. The page is found by its `data-testid`s (the contract with
 * console/src); screenshots go to docs/console/, overwritten on every run.
 */
import { afterAll, afterEach, beforeAll, test } from "bun:test";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { rmSync } from "node:fs";
import { chromiumPath, browserUnavailable, DESKTOP, REPO, SCREENSHOT_DIR } from "./console-page.ts";

export * from "./console-page.ts";

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
    if (!SCREENSHOT_DIR.startsWith(REPO)) rmSync(SCREENSHOT_DIR, { recursive: true, force: true });
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
