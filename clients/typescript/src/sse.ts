/** Server-Sent Events from a fetch `Response` (the WHATWG event-stream format: `event:`, `id:`, `data:` lines,
 * a blank line ends an event, `:` starts a comment). */

export interface ServerSentEvent {
  /** The event's name (`message` when the server gave none). */
  event: string;
  /** The last event id the stream set (the position to resume after). */
  id?: string;
  data: string;
}

export async function* serverSentEvents(response: Response): AsyncGenerator<ServerSentEvent> {
  if (!response.body) return;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = "", data: string[] = [], id: string | undefined;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (data.length) yield { event: event || "message", id, data: data.join("\n") };
          event = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event = text;
        else if (field === "data") data.push(text);
        else if (field === "id") id = text;
      }
    }
  } finally {
    reader.releaseLock();
    await response.body.cancel().catch(() => undefined);
  }
}
