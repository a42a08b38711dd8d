// An AG-UI agent written with the @ag-ui TypeScript packages, for evalport's AG-UI target
// tests. It validates each request with @ag-ui/core's schema and sends @ag-ui/core events
// through @ag-ui/encoder's EventEncoder, as the AG-UI docs' server quickstart does.
//
// The "model" is a script over the conversation the client sends (the same script as the
// pydantic-ai agent of tests/client/targets/agui/agui_agents.py): "order" calls lookup,
// "refund" asks approval for refund through an interrupt, "boom" fails the run, "what did
// I ask" lists the earlier user messages. The state counts the runs of the thread.
//
// Usage: node dist/agent.js [port]; prints "listening on <port>" once it accepts requests.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import { EventType, type BaseEvent, type Message, type RunAgentInput } from "@ag-ui/core";
import { RunAgentInputSchema } from "@ag-ui/core/schemas";
import { EventEncoder } from "@ag-ui/encoder";

const USAGE = { model: "scripted", inputTokens: 50, outputTokens: 10, totalTokens: 60 };

function userTexts(messages: Message[]): string[] {
  return messages
    .filter((message) => message.role === "user")
    .map((message) => (typeof message.content === "string" ? message.content : ""));
}

function* text(words: string): Generator<BaseEvent> {
  const messageId = randomUUID();
  yield { type: EventType.TEXT_MESSAGE_START, messageId, role: "assistant" } as BaseEvent;
  const parts = words.split(" ");
  for (const [index, word] of parts.entries()) {
    const delta = index === parts.length - 1 ? word : `${word} `;
    yield { type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta } as BaseEvent;
  }
  yield { type: EventType.TEXT_MESSAGE_END, messageId } as BaseEvent;
}

function* toolCall(name: string, args: object, result?: string): Generator<BaseEvent> {
  const toolCallId = `call-${randomUUID()}`;
  yield { type: EventType.TOOL_CALL_START, toolCallId, toolCallName: name } as BaseEvent;
  yield { type: EventType.TOOL_CALL_ARGS, toolCallId, delta: JSON.stringify(args) } as BaseEvent;
  yield { type: EventType.TOOL_CALL_END, toolCallId } as BaseEvent;
  if (result !== undefined) {
    const messageId = randomUUID();
    yield { type: EventType.TOOL_CALL_RESULT, messageId, toolCallId, content: result } as BaseEvent;
  }
}

// One run's events between RUN_STARTED and its end.
function* run(input: RunAgentInput): Generator<BaseEvent> {
  const { threadId, runId } = input;
  const runs = ((input.state as { runs?: number } | undefined)?.runs ?? 0) + 1;
  yield { type: EventType.STATE_SNAPSHOT, snapshot: { runs, last: "started" } } as BaseEvent;
  const finished = (extra: object = {}) =>
    ({ type: EventType.RUN_FINISHED, threadId, runId, usage: [USAGE], ...extra }) as BaseEvent;
  for (const entry of input.resume ?? []) {
    // the answer to the refund's approval: run the tool (or not) and say so
    const approved = (entry.payload as { approved?: boolean } | undefined)?.approved === true;
    const last = input.messages[input.messages.length - 1];
    const call = last?.role === "assistant" ? last.toolCalls?.[0] : undefined;
    if (call === undefined) {
      yield { type: EventType.RUN_ERROR, message: "nothing to resume" } as BaseEvent;
      return;
    }
    const result = approved ? "refunded 30" : "the refund was denied";
    yield {
      type: EventType.TOOL_CALL_RESULT,
      messageId: randomUUID(),
      toolCallId: call.id,
      content: result,
    } as BaseEvent;
    yield* text(`Refund: ${result}`);
    yield finished({ outcome: { type: "success" } });
    return;
  }
  const asked = userTexts(input.messages);
  const prompt = asked[asked.length - 1] ?? "";
  if (prompt.includes("boom")) {
    yield { type: EventType.RUN_ERROR, message: "the model provider failed" } as BaseEvent;
    return;
  }
  if (prompt.includes("refund")) {
    let toolCallId = "";
    for (const event of toolCall("refund", { amount: 30 })) {
      toolCallId ||= (event as { toolCallId?: string }).toolCallId ?? "";
      yield event;
    }
    const interrupt = {
      id: `int-${toolCallId}`,
      reason: "tool_call",
      toolCallId,
      message: "Approve refund of 30?",
      responseSchema: { type: "object", properties: { approved: { type: "boolean" } } },
    };
    yield finished({ outcome: { type: "interrupt", interrupts: [interrupt] } });
    return;
  }
  if (prompt.includes("order")) {
    yield* toolCall("lookup", { order_id: "A1" }, JSON.stringify({ status: "shipped" }));
    yield {
      type: EventType.STATE_DELTA,
      delta: [{ op: "replace", path: "/last", value: "looked up" }],
    } as BaseEvent;
    yield* text("Order A1 is shipped.");
  } else if (prompt.includes("what did I ask")) {
    yield* text(`You asked: ${asked.slice(0, -1).join(" | ")}`);
  } else {
    yield* text("Hello there, how can I help?");
  }
  yield finished({ outcome: { type: "success" } });
}

async function body(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
  if (request.method !== "POST" || request.url !== "/agent") {
    response.writeHead(404).end();
    return;
  }
  const parsed = RunAgentInputSchema.safeParse(JSON.parse(await body(request)));
  if (!parsed.success) {
    response.writeHead(422, { "content-type": "application/json" });
    response.end(JSON.stringify({ error: "invalid RunAgentInput" }));
    return;
  }
  const input = parsed.data as RunAgentInput;
  const encoder = new EventEncoder({ accept: request.headers.accept });
  response.writeHead(200, { "content-type": encoder.getContentType() });
  const send = (event: BaseEvent) => response.write(encoder.encode(event));
  send({ type: EventType.RUN_STARTED, threadId: input.threadId, runId: input.runId } as BaseEvent);
  for (const event of run(input)) {
    send(event);
    await new Promise((resolve) => setImmediate(resolve)); // a stream, not one write
  }
  response.end();
}

const server = createServer((request, response) => {
  handle(request, response).catch((error: unknown) => {
    response.destroy(error instanceof Error ? error : new Error(String(error)));
  });
});
server.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => {
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  console.log(`listening on ${port}`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
