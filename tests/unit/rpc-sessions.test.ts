/** RpcSessions: a member's share of sessions into rpc-server, and the setup deadline each must meet. */
import { expect, test } from "bun:test";
import { RpcSessions } from "../../tunnel/rpc-sessions.ts";
import { waitFor } from "../helpers/wait.ts";

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

test("at the setup deadline a session that allocated nothing is closed; one that allocated, or ended, is not", async () => {
  const sessions = new RpcSessions(4, 50);
  const closed: string[] = [];
  sessions.take("m", () => false, () => closed.push("idle"));
  sessions.take("m", () => true, () => closed.push("working"));
  const ended = sessions.take("m", () => false, () => closed.push("ended"))!;
  ended.release();
  // Taken last, so its deadline comes after the others': once it is closed, theirs have passed.
  sessions.take("other", () => false, () => closed.push("last"));
  await waitFor(() => closed.includes("last"), { what: "the setup deadlines" });
  expect(closed).toEqual(["idle", "last"]);
});
