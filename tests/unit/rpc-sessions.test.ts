/** RpcSessions: a member's share of sessions into rpc-server, and the setup deadline each must meet once served. */
import { expect, test } from "bun:test";
import { RpcSessions } from "../../tunnel/rpc-sessions.ts";
import { waitFor } from "../../harness/wait.ts";

test("a member holds at most its share; a place given back (once) is taken again; members do not share", () => {
  const sessions = new RpcSessions(2, 60_000);
  const never = () => undefined;
  const a1 = sessions.take("a", () => true, never);
  const a2 = sessions.take("a", () => true, never);
  expect(a1 && a2).toBeDefined();
  expect(sessions.take("a", () => true, never)).toBeUndefined();
  expect(sessions.take("b", () => true, never)).toBeDefined();
  a1!.release();
  a1!.release();
  expect(sessions.of("a")).toBe(1);
  expect(sessions.take("a", () => true, never)).toBeDefined();
  expect(sessions.take("a", () => true, never)).toBeUndefined();
});

test("once served, a session that allocated nothing by its setup deadline is closed; one that allocated, ended, or still waits its turn is not", async () => {
  const sessions = new RpcSessions(8, 50);
  const closed: string[] = [];
  sessions.take("m", () => false, () => closed.push("idle"))!.served();
  sessions.take("m", () => true, () => closed.push("working"))!.served();
  const ended = sessions.take("m", () => false, () => closed.push("ended"))!;
  ended.served();
  ended.release();
  const queued = sessions.take("m", () => false, () => closed.push("queued"))!;
  // Served last, so its deadline comes after the others': once it is closed, theirs have passed.
  sessions.take("other", () => false, () => closed.push("last"))!.served();
  await waitFor(() => closed.includes("last"), { what: "the setup deadlines" });
  expect(closed).toEqual(["idle", "last"]);
  queued.release();
});
