/** An answer read whole stops at its bound: a member sending without end cannot fill a node's memory. */
import { expect, test } from "bun:test";
import { AnswerTooLarge, jsonWithin, textWithin } from "../../router/http/bounded-body.ts";

const answer = (...pieces: (string | number[])[]) =>
  new Response(
    new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of pieces) c.enqueue(typeof p === "string" ? new TextEncoder().encode(p) : new Uint8Array(p));
        c.close();
      },
    }),
  );

test.each<[string, (string | number[])[], number, string]>([
  ["within the bound", ['{"a":', "1}"], 10, '{"a":1}'],
  ["exactly at it", ["12345"], 5, "12345"],
  ["a UTF-8 character split between pieces", [[0xe2], [0x82, 0xac]], 10, "€"],
])("textWithin: %s", async (_, pieces, max, want) => expect(await textWithin(answer(...pieces), max)).toBe(want));

test("past the bound: AnswerTooLarge, and the body is left unread", async () => {
  let pulled = 0;
  const endless = new Response(
    new ReadableStream<Uint8Array>({
      pull(c) {
        pulled++;
        c.enqueue(new Uint8Array(1024));
      },
    }),
  );
  await expect(textWithin(endless, 10_000)).rejects.toBeInstanceOf(AnswerTooLarge);
  expect(pulled).toBeLessThan(20);
});

test("jsonWithin: undefined for what is not JSON", async () => {
  expect(await jsonWithin(answer("{\"a\":1}"), 100)).toEqual({ a: 1 });
  expect(await jsonWithin(answer("nope"), 100)).toBeUndefined();
});
