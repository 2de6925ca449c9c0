/**
 * The join token at rest: 0600, atomic, "first" only once; shown only to a terminal. And the private
 * file under it (and under the service's environment file): 0600 whatever the umask, a link at its
 * name replaced rather than followed, nothing left behind when it fails.
 */
import { afterEach, expect, test } from "bun:test";
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { joinTokenPath, readJoinToken, showJoinTokens, writeJoinToken } from "../../mesh/join-token-file.ts";
import { writePrivateFile } from "../../base/private-file.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const stateDir = () => {
  const d = mkdtempSync(join(tmpdir(), "mesh-test-state-"));
  dirs.push(d);
  return d;
};

test("written with mode 0600, first only once, replaced whole at the next start", () => {
  const dir = stateDir();
  expect(readJoinToken(dir)).toBeUndefined();
  const first = writeJoinToken(dir, "mesh1first");
  expect(first).toEqual({ path: joinTokenPath(dir), first: true });
  expect(statSync(first.path).mode & 0o777).toBe(0o600);
  expect(readJoinToken(dir)).toBe("mesh1first");
  expect(writeJoinToken(dir, "mesh1second").first).toBe(false);
  expect(readJoinToken(dir)).toBe("mesh1second");
  expect(statSync(first.path).mode & 0o777).toBe(0o600);
  // No temporary file left beside it.
  expect(readdirSync(dir)).toEqual(["join-token"]);
});

test("shown to a terminal only: a log file or journal gets nothing", () => {
  const written: string[] = [];
  const pipe = { isTTY: false, write: (t: string) => written.push(`pipe:${t}`) };
  const tty = { isTTY: true, write: (t: string) => written.push(`tty:${t}`) };
  expect(showJoinTokens([{ label: "Join token", token: "mesh1abc" }], [pipe, pipe])).toBe(false);
  expect(written).toEqual([]);
  expect(showJoinTokens([{ label: "Join token", token: "mesh1abc" }], [pipe, tty])).toBe(true);
  expect(written).toHaveLength(1);
  expect(written[0]).toStartWith("tty:Join token: mesh1abc\n");
  // A new mesh's two, labelled.
  written.length = 0;
  showJoinTokens([{ label: "Owner token", token: "mesh1own" }, { label: "Guest token", token: "mesh1guest" }], [tty]);
  expect(written[0]).toStartWith("tty:Owner token: mesh1own\nGuest token: mesh1guest\n");
  expect(written[0]).toContain("`mesh token --guest` makes more");
});

test("a private file is 0600 whatever the umask, and a link at its name is replaced, never followed", () => {
  const dir = stateDir();
  const path = join(dir, "secret");
  const old = process.umask(0o277);
  try {
    writePrivateFile(path, "one");
  } finally {
    process.umask(old);
  }
  expect(statSync(path).mode & 0o777).toBe(0o600);
  const elsewhere = join(dir, "elsewhere");
  writeFileSync(elsewhere, "theirs", { mode: 0o644 });
  rmSync(path);
  symlinkSync(elsewhere, path);
  writePrivateFile(path, "two");
  expect(lstatSync(path).isSymbolicLink()).toBe(false);
  expect(readFileSync(path, "utf8")).toBe("two");
  expect(readFileSync(elsewhere, "utf8")).toBe("theirs");
  expect(statSync(elsewhere).mode & 0o777).toBe(0o644);
});

test("a private file that cannot be put in place throws and leaves no temporary file", () => {
  const dir = stateDir();
  // A non-empty folder at the name: the rename fails after the temporary file was written.
  const path = join(dir, "taken");
  mkdirSync(path);
  writeFileSync(join(path, "inside"), "");
  expect(() => writePrivateFile(path, "x")).toThrow();
  expect(readdirSync(dir)).toEqual(["taken"]);
  expect(() => writePrivateFile(join(dir, "missing", "file"), "x")).toThrow();
  expect(readdirSync(dir)).toEqual(["taken"]);
});

test.skipIf(process.getuid?.() !== 0)("a private file given to an owner is theirs when it appears", () => {
  const path = join(stateDir(), "service.env");
  writePrivateFile(path, "K=v\n", { owner: { uid: 4242, gid: 4343 } });
  const st = statSync(path);
  expect([st.uid, st.gid, st.mode & 0o777]).toEqual([4242, 4343, 0o600]);
});
