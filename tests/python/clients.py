#!/usr/bin/env python3
"""
The Python clients users point at a node, each called as a user would call it: the `openai` SDK
(chat whole and streamed, legacy completions with logprobs, embeddings, the model list, the
Responses API, and the same SDK on Lemonade's base URL `/api/v1`), the `anthropic` SDK (messages
whole and streamed, stop sequences, token counts) and LangChain's ChatOpenAI; and tool calls in each
of them (a forced call, its result sent back and answered, structured output by function calling),
asked of a model that calls tools (--tools-model: the `tools` test model). Each check is small
(a few tokens, greedy) and runs whatever the others did; each prints one JSON line,
{"check", "ok", "detail", "seconds"}, so a test can name the one that failed. The test model has
random weights: the checks judge an answer's shape and bookkeeping (finish reasons, usage, offsets,
what the SDK rebuilds from a stream), never what it says. Exit status: 0 when every check passed.

  python clients.py --base-url http://127.0.0.1:9337 --model tiny-q8_0 --embed-model embed --tools-model tools-f32
  python clients.py --list     # the checks, one JSON line each, with why one cannot run here
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal

# Sent as the key: the nodes under test need none, and the SDKs refuse to start without one.
KEY = "unused"
# Per request: a node answers these in well under a second; a hang is a failure, not a wait.
TIMEOUT_S = 60.0
DETAIL_CHARS = 1500


class Failed(Exception):
    """A check's expectation that did not hold."""


def need(cond: object, what: str) -> None:
    if not cond:
        raise Failed(what)


@dataclass
class Node:
    base_url: str
    model: str
    embed_model: str
    # A model that calls a tool whenever it is offered one; None: the tool checks fail and say so.
    tools_model: str | None = None

    def tools(self) -> str:
        need(self.tools_model, "this check needs --tools-model (a model that calls tools, e.g. the tools test model)")
        return self.tools_model  # type: ignore[return-value]

    def openai(self, base: str = "/v1") -> Any:
        import openai

        return openai.OpenAI(base_url=f"{self.base_url}{base}", api_key=KEY, max_retries=0, timeout=TIMEOUT_S)

    def anthropic(self) -> Any:
        import anthropic

        return anthropic.Anthropic(base_url=self.base_url, api_key=KEY, max_retries=0, timeout=TIMEOUT_S)


# ---- openai ------------------------------------------------------------------------------------

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]
FINISHED = ("stop", "length")


def openai_models_list(node: Node) -> object:
    models = list(node.openai().models.list())
    ids = [m.id for m in models]
    need(node.model in ids, f"{node.model!r} is not in the list: {ids}")
    need(all(m.object == "model" for m in models), f"an entry is not a model: {[m.object for m in models]}")
    return {"ids": ids}


def openai_chat_create(node: Node) -> object:
    # max_completion_tokens: the spelling the SDK documents now (max_tokens is in the stream check).
    r = node.openai().chat.completions.create(model=node.model, messages=CHAT, max_completion_tokens=4, temperature=0)
    need(r.object == "chat.completion", f"object {r.object!r}")
    need(len(r.choices) == 1, f"{len(r.choices)} choices")
    c = r.choices[0]
    need(c.message.role == "assistant", f"role {c.message.role!r}")
    need(isinstance(c.message.content, str), f"content {c.message.content!r}")
    need(c.finish_reason in FINISHED, f"finish_reason {c.finish_reason!r}")
    need(r.usage is not None and r.usage.prompt_tokens > 0, f"usage {r.usage!r}")
    need(0 < r.usage.completion_tokens <= 4, f"completion_tokens {r.usage.completion_tokens} for max_completion_tokens 4")
    return {"finish_reason": c.finish_reason, "content": c.message.content, "usage": r.usage.model_dump()}


def openai_chat_stream(node: Node) -> object:
    stream = node.openai().chat.completions.create(
        model=node.model, messages=CHAT, max_tokens=4, temperature=0, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    need(chunks, "no chunks")
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    need(len(finishes) == 1 and finishes[0] in FINISHED, f"finish_reasons {finishes} (one of {FINISHED} expected)")
    # include_usage: one last chunk with no choices carries it; every other chunk's usage is null.
    last = chunks[-1]
    need(last.choices == [] and last.usage is not None, f"the last chunk is not the usage chunk: {last.model_dump_json()[:300]}")
    need(0 < last.usage.completion_tokens <= 4 and last.usage.prompt_tokens > 0, f"usage {last.usage!r}")
    need(all(ch.usage is None for ch in chunks[:-1]), "usage on a chunk before the last")
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    return {"chunks": len(chunks), "finish_reason": finishes[0], "text": text, "usage": last.usage.model_dump()}


def openai_completions_logprobs(node: Node) -> object:
    prompt = "once upon a"
    r = node.openai().completions.create(model=node.model, prompt=prompt, max_tokens=3, temperature=0, logprobs=2)
    need(r.object == "text_completion", f"object {r.object!r}")
    c = r.choices[0]
    need(c.finish_reason in FINISHED, f"finish_reason {c.finish_reason!r}")
    lp = c.logprobs
    need(lp is not None, "no logprobs in the choice")
    tokens, chosen, top, offsets = lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset
    need(all(isinstance(x, list) for x in (tokens, chosen, top, offsets)), f"logprobs fields are not all lists: {lp.model_dump()}")
    n = len(tokens)
    need(n > 0 and [len(chosen), len(top), len(offsets)] == [n, n, n], f"lengths tokens {n}, token_logprobs {len(chosen)}, top_logprobs {len(top)}, text_offset {len(offsets)}")
    need(r.usage is not None and r.usage.completion_tokens == n, f"{n} tokens, usage {r.usage!r}")
    need("".join(tokens) == c.text, f"tokens {tokens!r} do not make the text {c.text!r}")
    need(all(isinstance(x, float) and x <= 0 for x in chosen), f"token_logprobs {chosen}")
    for tok, lp_tok, alts in zip(tokens, chosen, top):
        need(isinstance(alts, dict) and 1 <= len(alts) <= 3, f"top_logprobs entry {alts!r} for logprobs=2")
        need(tok in alts and abs(alts[tok] - lp_tok) < 1e-4, f"the sampled token {tok!r} ({lp_tok}) is not in its top_logprobs {alts!r}")
        # Greedy: the sampled token is the likeliest.
        need(lp_tok >= max(alts.values()) - 1e-4, f"temperature 0 sampled {tok!r} ({lp_tok}) over {alts!r}")
    # Offsets count characters into prompt + text; the first token starts where the prompt ends.
    expected = [len(prompt) + len("".join(tokens[:i])) for i in range(n)]
    need(offsets == expected, f"text_offset {offsets}, expected {expected}")
    return {"text": c.text, "tokens": tokens, "token_logprobs": chosen}


def openai_embeddings(node: Node) -> object:
    client = node.openai()
    # The SDK asks for base64 unless told otherwise, and decodes it itself.
    r = client.embeddings.create(model=node.embed_model, input=["hello world", "a b c"])
    need(len(r.data) == 2 and [d.index for d in r.data] == [0, 1], f"data {[(d.index, len(d.embedding)) for d in r.data]}")
    dims = {len(d.embedding) for d in r.data}
    need(len(dims) == 1 and min(dims) > 0, f"dimensions {dims}")
    need(all(isinstance(x, float) and math.isfinite(x) for d in r.data for x in d.embedding), "a value is not a finite float")
    need(r.data[0].embedding != r.data[1].embedding, "two inputs gave one vector")
    need(r.usage is not None and r.usage.prompt_tokens > 0, f"usage {r.usage!r}")
    as_floats = client.embeddings.create(model=node.embed_model, input="hello world", encoding_format="float")
    a, b = r.data[0].embedding, as_floats.data[0].embedding
    need(len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-6) for x, y in zip(a, b)), "base64 and float answers differ for one input")
    return {"dimensions": dims.pop(), "usage": r.usage.model_dump()}


TURNS = [
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi there"},
    {"role": "user", "content": "and again"},
]
INSTRUCTIONS = "Answer in one word."


def check_response(r: Any, max_output_tokens: int) -> None:
    need(r.object == "response" and r.id.startswith("resp_"), f"object {r.object!r} id {r.id!r}")
    need(r.status in ("completed", "incomplete"), f"status {r.status!r}")
    if r.status == "incomplete":
        need(r.incomplete_details is not None and r.incomplete_details.reason == "max_output_tokens", f"incomplete_details {r.incomplete_details!r}")
    need(any(item.type == "message" and item.role == "assistant" for item in r.output), f"no assistant message in output {[i.type for i in r.output]}")
    need(isinstance(r.output_text, str), f"output_text {r.output_text!r}")
    u = r.usage
    need(u is not None and u.input_tokens > 0 and 0 < u.output_tokens <= max_output_tokens, f"usage {u!r}")
    need(u.total_tokens == u.input_tokens + u.output_tokens, f"total_tokens {u.total_tokens} != {u.input_tokens} + {u.output_tokens}")


def openai_responses_create(node: Node) -> object:
    client = node.openai()
    ask = {"model": node.model, "max_output_tokens": 16, "temperature": 0}
    last_turn = client.responses.create(input=TURNS[-1]["content"], **ask)
    turns = client.responses.create(input=TURNS, **ask)
    told = client.responses.create(instructions=INSTRUCTIONS, input=TURNS, **ask)
    for r in (last_turn, turns, told):
        check_response(r, 16)
    counts = [r.usage.input_tokens for r in (last_turn, turns, told)]
    # Every turn and then the instructions reached the prompt: each adds tokens.
    need(counts[0] < counts[1] < counts[2], f"input_tokens last turn / all turns / with instructions: {counts}")
    need(told.instructions == INSTRUCTIONS, f"instructions echoed as {told.instructions!r}")
    return {"input_tokens": counts, "status": told.status, "output_text": told.output_text}


def openai_responses_stream(node: Node) -> object:
    with node.openai().responses.stream(model=node.model, instructions="Be brief.", input="hello there", max_output_tokens=16, temperature=0) as stream:
        events = list(stream)
        final = stream.get_final_response()
    types = [e.type for e in events]
    need(types[:1] == ["response.created"] and types[-1:] == ["response.completed"], f"events {types}")
    need([e.sequence_number for e in events] == list(range(len(events))), f"sequence numbers {[e.sequence_number for e in events]}")
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    need(final.output_text == deltas, f"final output_text {final.output_text!r} is not the deltas {deltas!r}")
    check_response(final, 16)
    return {"events": len(events), "status": final.status, "output_text": final.output_text}


def openai_responses_parse(node: Node) -> object:
    from pydantic import BaseModel

    class Verdict(BaseModel):
        answer: Literal["yes", "no"]

    # Room for the whitespace a schema's grammar allows: the answer must finish to parse.
    r = node.openai().responses.parse(model=node.model, input="Is the sky blue?", text_format=Verdict, max_output_tokens=200, temperature=0)
    need(r.status == "completed", f"status {r.status!r}, output_text {r.output_text!r}")
    need(isinstance(r.output_parsed, Verdict), f"output_parsed {r.output_parsed!r} from {r.output_text!r}")
    return {"output_parsed": r.output_parsed.model_dump()}


# ---- tool calls (asked of the tools model) ------------------------------------------------------

ASK_WEATHER = "what is the weather in paris?"
CITIES = ("paris", "london")
WEATHER_PARAMETERS = {"type": "object", "properties": {"city": {"type": "string", "enum": list(CITIES)}}, "required": ["city"]}
# Enough for the call's fixed text and the longest city; the grammar ends the call itself.
CALL_TOKENS = 64


def need_city(args: object) -> None:
    need(isinstance(args, dict) and set(args) == {"city"} and args["city"] in CITIES, f"arguments {args!r}")


def openai_chat_tools(node: Node) -> object:
    client, model = node.openai(), node.tools()
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": WEATHER_PARAMETERS}}]
    messages: list[Any] = [{"role": "user", "content": ASK_WEATHER}]
    r = client.chat.completions.create(model=model, messages=messages, tools=tools, tool_choice="required", max_tokens=CALL_TOKENS, temperature=0)
    c = r.choices[0]
    need(c.finish_reason == "tool_calls", f"finish_reason {c.finish_reason!r}")
    calls = c.message.tool_calls or []
    need(len(calls) == 1 and calls[0].function.name == "get_weather" and calls[0].id, f"tool_calls {[t.model_dump() for t in calls]}")
    need_city(json.loads(calls[0].function.arguments))
    messages += [c.message, {"role": "tool", "tool_call_id": calls[0].id, "content": "sunny"}]
    answer = client.chat.completions.create(model=model, messages=messages, tools=tools, tool_choice="none", max_tokens=4, temperature=0)
    a = answer.choices[0]
    need(not a.message.tool_calls and isinstance(a.message.content, str), f"answer {a.message.model_dump()}")
    need(a.finish_reason in FINISHED, f"the answer's finish_reason {a.finish_reason!r}")
    return {"call": calls[0].function.model_dump(), "answer": a.message.content}


def lemonade_chat_create(node: Node) -> object:
    # The OpenAI SDK with Lemonade's base URL, as Lemonade's own docs set it up.
    client = node.openai("/api/v1")
    ids = [m.id for m in client.models.list()]
    need(node.model in ids, f"{node.model!r} is not in the list: {ids}")
    r = client.chat.completions.create(model=node.model, messages=CHAT, max_tokens=4, temperature=0)
    need(r.choices[0].finish_reason in FINISHED, f"finish_reason {r.choices[0].finish_reason!r}")
    need(r.usage is not None and 0 < r.usage.completion_tokens <= 4, f"usage {r.usage!r}")
    return {"finish_reason": r.choices[0].finish_reason, "usage": r.usage.model_dump()}


# ---- anthropic ---------------------------------------------------------------------------------

MESSAGES = [{"role": "user", "content": "hello there"}]
# Greedy: random weights sampled at temperature 1 now and then end the turn at once. This SDK has
# dropped temperature and top_k from its signatures; users who want them send them as extra_body.
GREEDY = {"extra_body": {"temperature": 0, "top_k": 1}}


def text_of(message: Any) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def anthropic_messages_create(node: Node) -> object:
    m = node.anthropic().messages.create(model=node.model, system="Be brief.", messages=MESSAGES, max_tokens=4, **GREEDY)
    need(m.type == "message" and m.role == "assistant", f"type {m.type!r} role {m.role!r}")
    need(all(b.type == "text" for b in m.content), f"content {[b.type for b in m.content]}")
    need(m.stop_reason in ("end_turn", "max_tokens"), f"stop_reason {m.stop_reason!r}")
    need(m.usage.input_tokens > 0 and 0 < m.usage.output_tokens <= 4, f"usage {m.usage!r}")
    if m.stop_reason == "max_tokens":
        need(m.usage.output_tokens == 4, f"stop_reason max_tokens after {m.usage.output_tokens} of 4 tokens")
    return {"stop_reason": m.stop_reason, "text": text_of(m), "usage": m.usage.model_dump(exclude_none=True)}


def anthropic_messages_stream(node: Node) -> object:
    with node.anthropic().messages.stream(model=node.model, system="Be brief.", messages=MESSAGES, max_tokens=4, **GREEDY) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    need(text_of(final) == text, f"the final message {text_of(final)!r} is not the streamed text {text!r}")
    need(final.stop_reason in ("end_turn", "max_tokens"), f"stop_reason {final.stop_reason!r}")
    need(0 < final.usage.output_tokens <= 4, f"usage {final.usage!r}")
    return {"stop_reason": final.stop_reason, "text": text, "usage": final.usage.model_dump(exclude_none=True)}


def anthropic_stop_sequences(node: Node) -> object:
    client = node.anthropic()
    free = text_of(client.messages.create(model=node.model, messages=MESSAGES, max_tokens=12, **GREEDY))
    # A stop sequence the same greedy answer is known to reach: two characters of it, past its start
    # and without whitespace (which Anthropic refuses in a stop sequence).
    spots = [i for i in range(1, len(free) - 1) if free[i : i + 2].strip() == free[i : i + 2] and len(free[i : i + 2]) == 2]
    need(spots, f"the greedy answer {free!r} has nothing to stop on")
    stop = free[spots[0] : spots[0] + 2]
    m = client.messages.create(model=node.model, messages=MESSAGES, max_tokens=12, stop_sequences=[stop], **GREEDY)
    need(m.stop_reason == "stop_sequence", f"stop_reason {m.stop_reason!r} with stop_sequences [{stop!r}] (answer {text_of(m)!r})")
    need(m.stop_sequence == stop, f"stop_sequence {m.stop_sequence!r}, expected {stop!r}")
    need(text_of(m) == free[: free.index(stop)], f"text {text_of(m)!r}, expected {free[: free.index(stop)]!r}")
    return {"stop": stop, "text": text_of(m)}


def anthropic_count_tokens(node: Node) -> object:
    client = node.anthropic()
    plain = client.messages.count_tokens(model=node.model, messages=MESSAGES).input_tokens
    system = "You are a careful assistant who answers in full sentences."
    with_system = client.messages.count_tokens(model=node.model, system=system, messages=MESSAGES).input_tokens
    need(0 < plain < with_system, f"input_tokens without a system prompt {plain}, with one {with_system}")
    # What it counts is what the same message is billed as (cached tokens included).
    u = client.messages.create(model=node.model, system=system, messages=MESSAGES, max_tokens=1, **GREEDY).usage
    billed = u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
    need(billed == with_system, f"count_tokens said {with_system}, messages.create used {billed} ({u!r})")
    return {"input_tokens": [plain, with_system]}


def anthropic_messages_tools(node: Node) -> object:
    client, model = node.anthropic(), node.tools()
    tools = [{"name": "get_weather", "description": "The weather in a city", "input_schema": WEATHER_PARAMETERS}]
    messages: list[Any] = [{"role": "user", "content": ASK_WEATHER}]
    m = client.messages.create(model=model, messages=messages, tools=tools, tool_choice={"type": "any"}, max_tokens=CALL_TOKENS, **GREEDY)
    need(m.stop_reason == "tool_use", f"stop_reason {m.stop_reason!r}")
    uses = [b for b in m.content if b.type == "tool_use"]
    need(len(uses) == 1 and uses[0].name == "get_weather" and uses[0].id, f"content {[b.model_dump() for b in m.content]}")
    need_city(uses[0].input)
    messages += [{"role": "assistant", "content": m.content}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny"}]}]
    answer = client.messages.create(model=model, messages=messages, tools=tools, tool_choice={"type": "none"}, max_tokens=4, **GREEDY)
    need(all(b.type == "text" for b in answer.content), f"the answer's content {[b.type for b in answer.content]}")
    need(answer.stop_reason in ("end_turn", "max_tokens"), f"the answer's stop_reason {answer.stop_reason!r}")
    return {"input": uses[0].input, "answer": text_of(answer)}


# ---- LangChain ---------------------------------------------------------------------------------


def langchain_chat(node: Node, **more: Any) -> Any:
    from langchain_openai import ChatOpenAI

    settings = {"model": node.model, "max_tokens": 4, **more}
    return ChatOpenAI(base_url=f"{node.base_url}/v1", api_key=KEY, temperature=0, max_retries=0, timeout=TIMEOUT_S, **settings)


def langchain_invoke(node: Node) -> object:
    msg = langchain_chat(node).invoke([("system", "Be brief."), ("human", "hello")])
    need(isinstance(msg.content, str), f"content {msg.content!r}")
    need(msg.response_metadata.get("finish_reason") in FINISHED, f"response_metadata {msg.response_metadata!r}")
    u = msg.usage_metadata
    need(u is not None and u["input_tokens"] > 0 and 0 < u["output_tokens"] <= 4, f"usage_metadata {u!r}")
    return {"content": msg.content, "usage": u}


def langchain_stream(node: Node) -> object:
    chunks = list(langchain_chat(node, stream_usage=True).stream("hello"))
    need(chunks, "no chunks")
    whole = chunks[0]
    for c in chunks[1:]:
        whole = whole + c
    need(whole.content == "".join(c.content for c in chunks), f"content {whole.content!r}")
    need(whole.response_metadata.get("finish_reason") in FINISHED, f"response_metadata {whole.response_metadata!r}")
    u = whole.usage_metadata
    need(u is not None and 0 < u["output_tokens"] <= 4, f"usage_metadata {u!r}")
    return {"chunks": len(chunks), "content": whole.content, "usage": u}


def langchain_bind_tools(node: Node) -> object:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    @tool
    def get_weather(city: Literal["paris", "london"]) -> str:
        """The weather in a city."""
        return "sunny"

    model = node.tools()
    called = langchain_chat(node, model=model, max_tokens=CALL_TOKENS).bind_tools([get_weather], tool_choice="any").invoke(ASK_WEATHER)
    calls = called.tool_calls
    need(len(calls) == 1 and calls[0]["name"] == "get_weather" and calls[0]["id"], f"tool_calls {calls!r}")
    need_city(calls[0]["args"])
    answer = langchain_chat(node, model=model).invoke([HumanMessage(ASK_WEATHER), called, ToolMessage("sunny", tool_call_id=calls[0]["id"])])
    need(not answer.tool_calls and isinstance(answer.content, str), f"answer {answer!r}")
    return {"call": calls[0], "answer": answer.content}


def langchain_structured_output(node: Node) -> object:
    from pydantic import BaseModel

    class Weather(BaseModel):
        city: Literal["paris", "london"]

    chat = langchain_chat(node, model=node.tools(), max_tokens=CALL_TOKENS)
    parsed = chat.with_structured_output(Weather, method="function_calling").invoke(ASK_WEATHER)
    need(isinstance(parsed, Weather), f"parsed {parsed!r}")
    return {"parsed": parsed.model_dump()}


# ---- the battery -------------------------------------------------------------------------------

# (name, the module its SDK is imported as, the check)
CHECKS: list[tuple[str, str, Callable[[Node], object]]] = [
    ("openai.models.list", "openai", openai_models_list),
    ("openai.chat.create", "openai", openai_chat_create),
    ("openai.chat.stream", "openai", openai_chat_stream),
    ("openai.completions.logprobs", "openai", openai_completions_logprobs),
    ("openai.embeddings", "openai", openai_embeddings),
    ("openai.responses.create", "openai", openai_responses_create),
    ("openai.responses.stream", "openai", openai_responses_stream),
    ("openai.responses.parse", "openai", openai_responses_parse),
    ("openai.lemonade.chat.create", "openai", lemonade_chat_create),
    ("openai.chat.tools", "openai", openai_chat_tools),
    ("anthropic.messages.create", "anthropic", anthropic_messages_create),
    ("anthropic.messages.stream", "anthropic", anthropic_messages_stream),
    ("anthropic.stop_sequences", "anthropic", anthropic_stop_sequences),
    ("anthropic.count_tokens", "anthropic", anthropic_count_tokens),
    ("anthropic.messages.tools", "anthropic", anthropic_messages_tools),
    ("langchain.invoke", "langchain_openai", langchain_invoke),
    ("langchain.stream", "langchain_openai", langchain_stream),
    ("langchain.bind_tools", "langchain_openai", langchain_bind_tools),
    ("langchain.structured_output", "langchain_openai", langchain_structured_output),
]


def unavailable(module: str) -> str | None:
    """Why the SDK cannot be imported here, or None."""
    try:
        importlib.import_module(module)
        return None
    except Exception as e:  # an SDK that is missing or half installed (a dependency missing)
        return f"{module} cannot be imported: {type(e).__name__}: {e}"


def describe(e: BaseException) -> str:
    """A failure in one line: the request that failed, when there was one, and what came back."""
    if isinstance(e, Failed):
        return str(e)
    request = getattr(e, "request", None)
    where = f"{request.method} {request.url}: " if request is not None and hasattr(request, "url") else ""
    return f"{where}{type(e).__name__}: {e}"


def trim(detail: object) -> object:
    text = json.dumps(detail, default=str)
    return detail if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS] + "..."


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the checks and stop")
    ap.add_argument("--base-url", help="the node, e.g. http://127.0.0.1:9337 (no /v1)")
    ap.add_argument("--model", help="a chat model the node serves")
    ap.add_argument("--embed-model", help="an embedding model the node serves")
    ap.add_argument("--tools-model", help="a model the node serves that calls a tool whenever it is offered one (for the tool checks)")
    ap.add_argument("--only", default="", help="comma-separated check names (default: all)")
    args = ap.parse_args()
    only = {n for n in args.only.split(",") if n}
    unknown = only - {name for name, _, _ in CHECKS}
    if unknown:
        ap.error(f"no such checks: {sorted(unknown)}")
    checks = [c for c in CHECKS if not only or c[0] in only]
    if args.list:
        reasons = {module: unavailable(module) for module in {m for _, m, _ in checks}}
        for name, module, _ in checks:
            print(json.dumps({"check": name, "sdk": module, "unavailable": reasons[module]}), flush=True)
        return 0
    if not (args.base_url and args.model and args.embed_model):
        ap.error("--base-url, --model and --embed-model are needed to run the checks")
    node = Node(args.base_url.rstrip("/"), args.model, args.embed_model, args.tools_model)
    failed = 0
    for name, _, check in checks:
        started = time.monotonic()
        try:
            ok, detail = True, check(node)
        except Exception as e:  # every failure is the check's result; the battery goes on
            ok, detail = False, describe(e)
        failed += not ok
        line = {"check": name, "ok": ok, "detail": trim(detail), "seconds": round(time.monotonic() - started, 2)}
        print(json.dumps(line, default=str), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
