/**
 * `/v1/responses` served through `/v1/chat/completions` on the node the client called: the request
 * turned into a chat completion (`responses-request.ts`), its answer turned back, a whole one at
 * once (`responses-answer.ts`), a stream event by event (`responses-stream.ts`). An error answer
 * (a refusal, a 503 while the model loads) passes as it came: both APIs share the OpenAI error shape.
 */
import type { Translation, Translator } from "./translation.ts";
import { isObject, type JsonObject } from "../http/json.ts";
import { newResponseIds, responseOfChat, type ResponseIds } from "./responses-answer.ts";
import { chatRequestOf, type ResponsesEcho } from "./responses-request.ts";
import { readChatSse, ResponsesEvents, sseOf } from "./responses-stream.ts";
import { headersForNewBody, MAX_REWRITTEN_ANSWER_BYTES, textWithin } from "../http/bounded-body.ts";

/** How a chat stream's error event (`{"error": {...}}`) ends the Responses stream. */
function failureOf(error: JsonObject): { message: string; code: string } {
  const message = typeof error.message === "string" ? error.message : "the model's server failed mid-answer; retry";
  const code = typeof error.code === "string" ? error.code : typeof error.type === "string" ? error.type : "server_error";
  return { message, code };
}

/** The chat stream `body` as the Responses API's events. */
export function responsesStream(body: ReadableStream<Uint8Array>, echo: ResponsesEcho, ids: ResponseIds): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  const events = new ResponsesEvents(echo, ids);
  let held = "";
  let started = false;
  const send = (controller: ReadableStreamDefaultController<Uint8Array>, out: JsonObject[], extra = "") => {
    const text = out.map(sseOf).join("") + extra;
    if (text) controller.enqueue(encoder.encode(text));
  };
  const end = (controller: ReadableStreamDefaultController<Uint8Array>, out: JsonObject[]) => {
    send(controller, out);
    controller.close();
    reader.cancel().catch(() => undefined);
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (!started) {
          started = true;
          return send(controller, events.start());
        }
        for (;;) {
          let step: Awaited<ReturnType<typeof reader.read>>;
          try {
            step = await reader.read();
          } catch {
            return end(controller, events.fail("the node serving this model went away mid-stream; retry", "peer_gone"));
          }
          if (step.done) {
            // llama-server ends with [DONE]; a stream that stops after its finish reason is whole all the same.
            return end(controller, events.finished ? events.done() : events.fail("the answer stopped before it was complete; retry", "stream_incomplete"));
          }
          const read = readChatSse(held, decoder.decode(step.value, { stream: true }));
          if (!read) return end(controller, events.fail("the model's server sent an event too large to read; retry", "bad_stream"));
          held = read.held;
          const out: JsonObject[] = [];
          let keepAlive = "";
          for (const event of read.events) {
            if ("comment" in event) {
              keepAlive = ": keep-alive\n\n";
              continue;
            }
            if (event.data.trim() === "[DONE]") {
              out.push(...events.done());
              break;
            }
            let json: unknown;
            try {
              json = JSON.parse(event.data);
            } catch {
              continue;
            }
            if (!isObject(json)) continue;
            if (isObject(json.error)) {
              const why = failureOf(json.error);
              out.push(...events.fail(why.message, why.code));
              break;
            }
            out.push(...events.chunk(json));
            if (events.ended) break;
          }
          if (events.ended) return end(controller, out);
          if (out.length === 0 && keepAlive === "") continue;
          return send(controller, out, keepAlive);
        }
      },
      cancel(reason) {
        return reader.cancel(reason).catch(() => undefined);
      },
    },
    { highWaterMark: 0 },
  );
}

/** The client's answer from the chat completion's: a 200 JSON or SSE answer translated, anything else as it came. */
export async function responsesAnswer(res: Response, echo: ResponsesEcho, ids: ResponseIds): Promise<Response> {
  const type = res.headers.get("content-type") ?? "";
  if (res.status !== 200 || !res.body) return res;
  if (type.includes("text/event-stream")) {
    const headers = headersForNewBody(res, "text/event-stream");
    headers.set("cache-control", "no-cache");
    return new Response(responsesStream(res.body, echo, ids), { status: 200, headers });
  }
  if (!type.includes("application/json")) return res;
  const text = await textWithin(res, MAX_REWRITTEN_ANSWER_BYTES);
  let chat: unknown;
  try {
    chat = JSON.parse(text);
  } catch {
    return new Response(text, { status: res.status, headers: res.headers });
  }
  if (!isObject(chat)) return new Response(text, { status: res.status, headers: res.headers });
  return new Response(JSON.stringify(responseOfChat(chat, echo, ids)), { status: 200, headers: headersForNewBody(res, "application/json") });
}

/** `/v1/responses` as a chat completion, its answer in the Responses API's words. */
export const responsesTranslator: Translator = (body) => {
  const request = chatRequestOf(body);
  if ("error" in request) return request;
  const ids = newResponseIds();
  const translation: Translation = {
    path: "/v1/chat/completions",
    body: request.chat,
    answer: (res) => responsesAnswer(res, request.echo, ids),
  };
  return translation;
};
