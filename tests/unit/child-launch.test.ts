/** How the node starts its llama.cpp children: dying with the node, and out of its terminal's signals when they can. */
import { expect, test } from "bun:test";
import { childLaunch, type ChildLaunch } from "../../pool/child-process.ts";

const argv = ["/llama/rpc-server", "-H", "127.0.0.1", "-p", "5000"];

const cases: [string, string | null, ChildLaunch][] = [
  ["setpriv: the kernel kills it with the node, so it leaves the node's group", "/usr/bin/setpriv", { argv: ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--", ...argv], detached: true }],
  ["no setpriv: it stays in the node's group, where a kill of the group still ends it", null, { argv, detached: false }],
];

test.each(cases)("%s", (_, setpriv, expected) => {
  expect(childLaunch(argv, setpriv)).toEqual(expected);
});
