// A client of `harness-sandbox serve` (docs/serve.md): one child process, one session,
// JSON lines both ways, every request a promise. No runtime dependency.
//
//   const hs = await Serve.start({ project: "/path/to/project" });
//   await hs.open();
//   const r = await hs.run({ argv: ["make", "test"] }, { onOutput: (e) => ... });
//   await hs.close();
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

// The client's own codes, beside the protocol's (ErrorReply's code).
export const SERVER_EXITED = "server_exited";
export const SPAWN_FAILED = "spawn_failed";

export class ServeError extends Error {
  constructor(code, message, { data, method } = {}) {
    super(message);
    this.name = "ServeError";
    this.code = code;
    this.data = data;
    this.method = method;
  }
}

// The command, then `serve` and the session's options (the defaults of `open`).
function commandLine(options) {
  const given = options.command ?? "harness-sandbox";
  const argv = [...(Array.isArray(given) ? given : [given]), "serve"];
  if (options.project !== undefined) argv.push("--project", options.project);
  if (options.config !== undefined) argv.push("--config", options.config);
  if (options.noHooks) argv.push("--no-hooks");
  if (options.noSandbox) argv.push("--no-sandbox");
  return [argv[0], argv.slice(1)];
}

export class RunStream {
  #queue = [];
  #wake = null;
  #done = false;
  #failure = null;

  constructor(id, result) {
    this.id = id;
    this.result = result;
    result.then(() => this.#end(null), (err) => this.#end(err));
  }

  push(event) {
    this.#queue.push(event);
    this.#wake?.();
  }

  #end(err) {
    this.#done = true;
    this.#failure = err;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.#queue.length) { yield this.#queue.shift(); continue; }
      if (this.#done) {
        if (this.#failure) throw this.#failure;
        return;
      }
      await new Promise((resolve) => { this.#wake = resolve; });
      this.#wake = null;
    }
  }
}

export class Serve {
  #child;
  #pending = new Map(); // id -> { resolve, reject, onEvent, method }
  #nextId = 0;
  #dead = null;

  // Starts `harness-sandbox serve` (options.command: its path, or an argv such as
  // ["python3", "-m", "launchers"]; default `harness-sandbox` on PATH) and waits for
  // its ready line.
  static async start(options = {}) {
    const serve = new Serve(options);
    await serve.ready;
    return serve;
  }

  constructor(options = {}) {
    const [program, args] = commandLine(options);
    this.#child = spawn(program, args, {
      stdio: ["pipe", "pipe", options.stderr ?? "inherit"],
      env: options.env ?? process.env, cwd: options.cwd,
    });
    let ready, failed;
    this.ready = new Promise((resolve, reject) => { ready = resolve; failed = reject; });
    this.ready.catch(() => {});
    this.#onReady = ready;
    this.#onFail = failed;
    this.exited = new Promise((resolve) => {
      this.#child.on("exit", (code, signal) => {
        this.#die(new ServeError(SERVER_EXITED, `harness-sandbox serve exited (${
          signal ? `signal ${signal}` : `status ${code}`}) with requests in flight`));
        resolve(code);
      });
    });
    this.#child.on("error", (err) => {
      this.#die(new ServeError(SPAWN_FAILED, `cannot start ${program}: ${err.message}`));
    });
    this.#child.stdin.on("error", () => {}); // a dead server: said by "exit"
    const lines = createInterface({ input: this.#child.stdout, crlfDelay: Infinity });
    const onLine = options.onLine;
    lines.on("line", (line) => { onLine?.(line); this.#receive(line); });
    lines.on("close", () => this.#die(new ServeError(SERVER_EXITED,
      "harness-sandbox serve closed its output with requests in flight")));
  }

  #onReady;
  #onFail;

  get pid() { return this.#child.pid; }

  #receive(line) {
    let message;
    try { message = JSON.parse(line); } catch { return; }
    if (message.event === "ready" && !("id" in message)) {
      this.limits = message.limits;
      this.#onReady(message);
      return;
    }
    const waiting = this.#pending.get(message.id);
    if (!waiting) return;
    if ("event" in message) { waiting.onEvent?.(message); return; }
    this.#pending.delete(message.id);
    if ("error" in message) {
      const { code, message: text, data } = message.error;
      waiting.reject(new ServeError(code, `${waiting.method}: ${text}`,
        { data, method: waiting.method }));
    } else {
      waiting.resolve(message.result);
    }
  }

  #die(err) {
    if (this.#dead) return;
    this.#dead = err;
    this.#onFail(err);
    for (const waiting of this.#pending.values()) waiting.reject(err);
    this.#pending.clear();
  }

  // One request: its promise settles with the result or rejects with a ServeError.
  // options.signal cancels it (the server's cancel: a run then resolves as cancelled,
  // exit 130); options.onId receives its id at once; onEvent its events.
  request(method, params = {}, { signal, onId, onEvent } = {}) {
    const id = ++this.#nextId;
    if (this.#dead) return Promise.reject(this.#dead);
    const reply = new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, onEvent, method });
    });
    this.#child.stdin.write(JSON.stringify({ id, method, params }) + "\n");
    onId?.(id);
    if (signal) {
      const abort = () => { this.cancel(id).catch(() => {}); };
      if (signal.aborted) abort();
      else {
        signal.addEventListener("abort", abort, { once: true });
        const off = () => signal.removeEventListener("abort", abort);
        reply.then(off, off);
      }
    }
    return reply;
  }

  open(params = {}, options) { return this.request("open", params, options); }

  // options.onOutput: each output event as it comes (the run is then streamed, and
  // its result's stdout and stderr are empty).
  run(params, options = {}) {
    const { onOutput, ...rest } = options;
    if (!onOutput) return this.request("run", params, rest);
    return this.request("run", { ...params, stream: true }, { ...rest, onEvent: onOutput });
  }

  // The run's output events as an async iterator; `.result` is its result, `.id` its id.
  stream(params, options = {}) {
    let stream = null;
    const result = this.request("run", { ...params, stream: true },
      { ...options, onEvent: (event) => stream?.push(event) });
    // Events come from the server's lines, never before request() has returned.
    stream = new RunStream(this.#nextId, result);
    return stream;
  }

  hook(params, options) { return this.request("hook", params, options); }
  hookOpenHarness(params, options) { return this.request("hook_openharness", params, options); }
  cancel(id) { return this.request("cancel", { id }); }

  // Ends the session (every run cancelled, everything it made removed) and the server.
  async close() {
    const result = await this.request("close");
    this.#child.stdin.end();
    await this.exited;
    return result;
  }

  kill(signal = "SIGTERM") { this.#child.kill(signal); }
}
