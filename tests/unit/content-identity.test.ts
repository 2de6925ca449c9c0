/** A model's content identity (issue 27): one SHA-256 that any change of its files' names, sizes or bytes moves. */
import { expect, test } from "bun:test";
import { contentIdentity, type IdentityFile } from "../../models/content-identity.ts";

const a: IdentityFile = { name: "m-00001-of-00002.gguf", size: 100, sha256: "a".repeat(64) };
const b: IdentityFile = { name: "m-00002-of-00002.gguf", size: 50, sha256: "b".repeat(64) };
const base = contentIdentity([a, b]);

test("a SHA-256, the same whatever order the files are listed in", () => {
  expect(base).toMatch(/^[0-9a-f]{64}$/);
  expect(contentIdentity([b, a])).toBe(base);
});

test.each<[string, IdentityFile[]]>([
  ["a file's bytes", [a, { ...b, sha256: "c".repeat(64) }]],
  ["a file's size", [a, { ...b, size: 51 }]],
  ["a file's name", [a, { ...b, name: "mmproj-m.gguf" }]],
  ["a file left out", [a]],
  ["a file added", [a, b, { name: "mmproj-m.gguf", size: 1, sha256: "d".repeat(64) }]],
  ["fields run together differently", [{ ...a, name: `${a.name}\t100` }, b]],
])("any change moves it: %s", (_, files) => {
  expect(contentIdentity(files)).not.toBe(base);
});
