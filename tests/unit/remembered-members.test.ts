import { expect, test } from "bun:test";
import { RememberedMembers } from "../../mesh/remembered-members.ts";

const addr = (id: string) => ({ nodeId: id, addresses: [`127.0.0.1:${id.length}`] });

test("the most recently seen last, at most max: the oldest goes, and with it its goodbye", () => {
  const m = new RememberedMembers(2, 1_000);
  m.seen(addr("a"));
  m.seen(addr("b"));
  m.leftOnPurpose("a", 0);
  m.seen(addr("c"));
  expect([...m.ids()]).toEqual(["b", "c"]);
  expect([...m.left()]).toEqual([]);
  expect(m.recent(5).map((a) => a.nodeId)).toEqual(["c", "b"]);
});

test("a goodbye is kept for a member it knows only, cleared when it is seen again, and forgotten after forgetAfterMs", () => {
  const m = new RememberedMembers(8, 1_000);
  m.leftOnPurpose("stranger", 0);
  expect([...m.left()]).toEqual([]);
  m.seen(addr("a"));
  m.leftOnPurpose("a", 0);
  expect(m.goneForGood("a", 1_000)).toBe(false);
  m.seen(addr("a"));
  expect(m.goneForGood("a", 5_000)).toBe(false);
  m.leftOnPurpose("a", 5_000);
  expect(m.goneForGood("a", 6_001)).toBe(true);
  expect(m.size).toBe(0);
});
