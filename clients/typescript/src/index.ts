/**
 * engram's TypeScript client: the REST API, typed from engram's own OpenAPI document (`src/openapi.ts`, generated
 * at build time by openapi-typescript), over `fetch`; streams the OpenAI-compatible proxy and `/v1/events`.
 *
 *     const mem = new Engram({ baseUrl: "http://127.0.0.1:8765", apiKey: process.env.ENGRAM_API_KEY });
 *     await mem.remember("ada", "trip-2024", "Book Lisbon for May");
 *     const { hits } = await mem.recall("ada", "where do I go in May?");
 *
 * Every refusal throws an `EngramError` with engram's stable code (`invalid_id`, `unknown_agent`, …), its HTTP
 * status and message. The API key is held in a private field: it is sent in the Authorization header and
 * appears in nothing else (not in errors, `JSON.stringify` or `console.log` of the client).
 */

import type { components, paths } from "./openapi.js";
import { serverSentEvents, type ServerSentEvent } from "./sse.js";

export type Schemas = components["schemas"];
export type { ServerSentEvent } from "./sse.js";

type Method = "get" | "post" | "put" | "delete";
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
type JsonOf<R> = R extends { content: { "application/json": infer J } } ? J : never;
/** The JSON an operation answers when it succeeds (200, 201 or 202). */
export type Answer<O> = O extends { responses: infer R }
  ? R extends { 200: infer A } ? JsonOf<A> : R extends { 202: infer A } ? JsonOf<A> : R extends { 201: infer A } ? JsonOf<A> : never
  : never;
type BodyOf<O> = O extends { requestBody: { content: { "application/json": infer B } } } ? B : undefined;
type PathOf<O> = O extends { parameters: { path: infer A } } ? A : undefined;
type QueryOf<O> = O extends { parameters: { query?: infer Q } } ? Q : undefined;

/** What an operation takes: its path parameters, query parameters and JSON body, as the document declares them. */
export interface Request<O> {
  path?: PathOf<O>;
  query?: QueryOf<O>;
  body?: BodyOf<O>;
  signal?: AbortSignal;
}

type Untyped = { path?: Record<string, unknown>; query?: Record<string, unknown>; body?: unknown; signal?: AbortSignal };

export interface EngramOptions {
  /** The server, e.g. `http://127.0.0.1:8765` (what `engram serve` prints). */
  baseUrl: string;
  /** An engram API key (`engram keys add`); needed once the home has keys. Never logged. */
  apiKey?: string;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
}

/** A refusal: engram's stable code (as in the OpenAPI document's error list), HTTP status and what to fix. */
export class EngramError extends Error {
  readonly status: number;
  readonly code: string;
  readonly retryAfter?: number;

  constructor(status: number, code: string, message: string, retryAfter?: number) {
    super(message);
    this.name = "EngramError";
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

export type Message = Schemas["Message"];
export type ChatTurn = { role: "system" | "user" | "assistant" | "tool"; content: string; name?: string };

export class Engram {
  readonly baseUrl: string;
  readonly #apiKey: string | undefined;
  readonly #fetch: typeof fetch;

  constructor(options: EngramOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#apiKey = options.apiKey;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** Shown without its key (what console.log and JSON.stringify print). */
  toJSON(): { baseUrl: string; apiKey: string | undefined } {
    return { baseUrl: this.baseUrl, apiKey: this.#apiKey ? "(set)" : undefined };
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `Engram { baseUrl: '${this.baseUrl}'${this.#apiKey ? ", apiKey: (set)" : ""} }`;
  }

  // ------------------------------------------------------------------ any operation of the document

  /** Any operation of engram's OpenAPI document, typed by it: `request("post", "/v1/agents/{agent}/recall",
   * { path: { agent }, body: { query } })` answers a `RecallResponse`. */
  async request<P extends keyof paths, M extends Method & keyof paths[P]>(
    method: M, path: P, init: Request<Operation<P, M>> = {},
  ): Promise<Answer<Operation<P, M>>> {
    const response = await this.#send(method, path as string, init as Untyped, "application/json");
    return (await response.json()) as Answer<Operation<P, M>>;
  }

  async #send(method: string, path: string, init: Untyped, accept: string): Promise<Response> {
    const url = new URL(this.baseUrl + fill(path, init.path ?? {}));
    for (const [name, value] of Object.entries(init.query ?? {})) {
      for (const item of Array.isArray(value) ? value : [value]) {
        if (item !== undefined && item !== null) url.searchParams.append(name, String(item));
      }
    }
    const headers: Record<string, string> = { Accept: accept };
    if (this.#apiKey) headers.Authorization = `Bearer ${this.#apiKey}`;
    if (init.body !== undefined) headers["Content-Type"] = "application/json";
    const response = await this.#fetch(url, {
      method: method.toUpperCase(), headers, signal: init.signal,
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    if (!response.ok) throw await refusal(response);
    return response;
  }

  // ------------------------------------------------------------------ memory

  health() {
    return this.request("get", "/v1/health");
  }

  /** Append messages to a discussion of an agent (memory creation follows in the background). */
  appendMessages(agent: string, discussion: string, messages: Message[]) {
    return this.request("post", "/v1/agents/{agent}/discussions/{discussion}/messages",
      { path: { agent, discussion }, body: { messages } });
  }

  /** Remember one message (a user's by default). */
  remember(agent: string, discussion: string, content: string, role: Message["role"] = "user") {
    return this.appendMessages(agent, discussion, [{ role, content }]);
  }

  /** The agent's memory traces for a question, ranked by the six-factor composite. */
  recall(agent: string, query: string, options: Omit<Schemas["RecallRequest"], "query"> = {}) {
    return this.request("post", "/v1/agents/{agent}/recall", { path: { agent }, body: { query, ...options } });
  }

  /** Search a discussion's chunk memories by keywords (separated by ';'). */
  search(agent: string, discussion: string, keywords: string, options: Omit<Schemas["SearchRequest"], "keywords"> = {}) {
    return this.request("post", "/v1/agents/{agent}/discussions/{discussion}/search",
      { path: { agent, discussion }, body: { keywords, ...options } });
  }

  workingMemory(agent: string) {
    return this.request("get", "/v1/agents/{agent}/working-memory", { path: { agent } });
  }

  writeWorkingMemory(agent: string, markdown: string) {
    return this.request("put", "/v1/agents/{agent}/working-memory", { path: { agent }, body: { markdown } });
  }

  summary(agent: string, discussion: string) {
    return this.request("get", "/v1/agents/{agent}/discussions/{discussion}/summary", { path: { agent, discussion } });
  }

  /** Erase a discussion (or, without one, the whole agent) for good; resolves when the erasure has finished. */
  async forget(agent: string, discussion?: string, reason = ""): Promise<Schemas["Job"]> {
    const job = discussion === undefined
      ? await this.request("delete", "/v1/agents/{agent}", { path: { agent }, query: { reason } })
      : await this.request("delete", "/v1/agents/{agent}/discussions/{discussion}",
        { path: { agent, discussion }, query: { reason } });
    return this.waitJob(job.id);
  }

  job(id: string) {
    return this.request("get", "/v1/jobs/{job_id}", { path: { job_id: id } });
  }

  /** Poll a job until it has finished; a failed job throws its error. */
  async waitJob(id: string, { timeoutMs = 600_000, pollMs = 200 } = {}): Promise<Schemas["Job"]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = await this.job(id);
      if (job.state === "failed") {
        throw new EngramError(500, job.error?.code ?? "internal", job.error?.message ?? `job ${id} failed`);
      }
      if (job.state === "succeeded") return job;
      if (Date.now() > deadline) throw new EngramError(504, "timeout", `job ${id} still ${job.state}`);
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  // ------------------------------------------------------------------ streams

  /** The OpenAI-compatible proxy, streamed: the reply's text as it is produced. A `[DiscussionId]…[/DiscussionId]`
   * tag in a message switches memory on for that discussion; `agent` picks the agent (`engram/<agent>`). */
  async *chatStream(agent: string, messages: ChatTurn[], { signal }: { signal?: AbortSignal } = {}): AsyncGenerator<string> {
    const response = await this.#send("post", "/v1/chat/completions",
      { body: { model: `engram/${agent}`, messages, stream: true }, signal }, "text/event-stream");
    for await (const event of serverSentEvents(response)) {
      if (event.data === "[DONE]") return;
      const chunk = JSON.parse(event.data);
      if (chunk.error) throw new EngramError(502, chunk.error.code ?? "llm_error", chunk.error.message);
      const text = chunk.choices?.[0]?.delta?.content;
      if (text) yield text;
    }
  }

  /** `GET /v1/events`: what the log records, as it happens (each event's name is its type, its id the position to
   * resume after, its data the log's row). `follow: false` ends after a `caught-up` event. */
  async *events(query: { agent?: string[]; type?: string[]; after?: string; follow?: boolean } = {},
    { signal }: { signal?: AbortSignal } = {}): AsyncGenerator<ServerSentEvent & { json: unknown }> {
    const response = await this.#send("get", "/v1/events", { query, signal }, "text/event-stream");
    for await (const event of serverSentEvents(response)) {
      yield { ...event, json: event.data ? JSON.parse(event.data) : undefined };
    }
  }
}

function fill(path: string, params: Record<string, unknown>): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new TypeError(`missing path parameter ${name} for ${path}`);
    const text = String(value);
    // '.' and '..' would change the route; engram's ids never are (the server answers invalid_id for the others).
    if (text === "." || text === ".." || text === "") {
      throw new EngramError(400, "invalid_id", `${name} ${JSON.stringify(text)} is not a valid id`);
    }
    return encodeURIComponent(text);
  });
}

async function refusal(response: Response): Promise<EngramError> {
  const retry = response.headers.get("retry-after");
  const text = await response.text();
  try {
    const { error } = JSON.parse(text);
    return new EngramError(response.status, error.code, error.message, retry ? Number(retry) : undefined);
  } catch {
    return new EngramError(response.status, "internal", `HTTP ${response.status} from engram: ${text.slice(0, 300)}`);
  }
}
