// A client of `harness-sandbox serve`, as a TypeScript or JavaScript harness would
// write it: no dependencies, one child process, JSON lines both ways.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";

export class ServeError extends Error {
  constructor(error) {
    super(`${error.code}: ${error.message}`);
    this.code = error.code;
    this.data = error.data;
  }
}

export class ServeClient {
  // command: the harness-sandbox command as an argv, e.g. ["harness-sandbox"].
  constructor(command, options = [], env = process.env) {
    this.child = spawn(command[0], [...command.slice(1), "serve", ...options], {
      stdio: ["pipe", "pipe", "inherit"], env,
    });
    this.nextId = 0;
    this.pending = new Map();  // id -> { resolve, reject }
    this.exited = new Promise((resolve) => this.child.on("exit", (code) => resolve(code)));
    this.ready = new Promise((resolve, reject) => {
      this.onReady = resolve;
      this.child.on("error", reject);
    });
    const lines = createInterface({ input: this.child.stdout });
    // HS_SERVE_TAP=FILE keeps every line the server wrote, for a look afterwards.
    const tap = env.HS_SERVE_TAP;
    lines.on("line", (line) => {
      if (tap) appendFileSync(tap, line + "\n");
      this.receive(JSON.parse(line));
    });
    lines.on("close", () => {
      for (const { reject } of this.pending.values()) reject(new Error("serve ended"));
      this.pending.clear();
    });
  }

  receive(message) {
    if (message.event === "ready") return this.onReady(message);
    const waiting = this.pending.get(message.id);
    if (!waiting) return;
    // An event about a request in flight (a streamed run's output) comes before its reply.
    if ("event" in message) return waiting.onEvent?.(message);
    this.pending.delete(message.id);
    if ("error" in message) waiting.reject(new ServeError(message.error));
    else waiting.resolve(message.result);
  }

  // Send one request; the promise settles with its result, or rejects with ServeError.
  // `sent` receives the id at once (for a later cancel).
  // `onEvent` receives its events (with `stream: true`, a run's output as it comes).
  request(method, params = {}, sent = () => {}, onEvent = undefined) {
    const id = ++this.nextId;
    const reply = new Promise((resolve, reject) =>
      this.pending.set(id, { resolve, reject, onEvent }));
    this.child.stdin.write(JSON.stringify({ id, method, params }) + "\n");
    sent(id);
    return reply;
  }

  open(params) { return this.request("open", params); }
  run(argv, params = {}, sent) { return this.request("run", { argv, ...params }, sent); }
  hook(params) { return this.request("hook", params); }
  cancel(id) { return this.request("cancel", { id }); }
  async close() {
    const result = await this.request("close");
    this.child.stdin.end();
    return { ...result, exit: await this.exited };
  }
}
