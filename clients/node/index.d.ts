// The client's API. The protocol's messages (protocol.d.ts) are generated from the
// JSON Schema; this file is the client around them.
import type {
  CancelResult,
  CloseResult,
  ErrorReply,
  HookOpenharnessParams,
  HookOpenharnessResult,
  HookParams,
  HookResult,
  Id,
  OpenParams,
  OpenResult,
  OutputEvent,
  Ready,
  RunParams,
  RunResult,
} from "./protocol.js";

export type * from "./protocol.js";

/** The protocol's error codes (docs/serve.md). */
export type ErrorCode = ErrorReply["error"]["code"];

export declare const SERVER_EXITED: "server_exited";
export declare const SPAWN_FAILED: "spawn_failed";

/** A request's failure: the protocol's `code`, or the client's own when the server
 * died (`server_exited`) or could not be started (`spawn_failed`). */
export declare class ServeError extends Error {
  readonly name: "ServeError";
  readonly code: ErrorCode | typeof SERVER_EXITED | typeof SPAWN_FAILED;
  /** Beside the message: a refused open's audit document is `data.audit`. */
  readonly data: Record<string, unknown> | undefined;
  /** The method of the request that failed. */
  readonly method: string | undefined;
}

export interface StartOptions {
  /** The harness-sandbox command: its path, or an argv such as
   * `["python3", "-m", "launchers"]`. Default: `harness-sandbox` on PATH. */
  command?: string | readonly string[];
  /** `serve --project`: the default of `open`'s `project`. */
  project?: string;
  /** `serve --config`: the default of `open`'s `config`. */
  config?: string;
  noHooks?: boolean;
  noSandbox?: boolean;
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Each line the server writes, as it is read (a log of the protocol). */
  onLine?: (line: string) => void;
  /** Where the server's messages for people go (default: this process's stderr). */
  stderr?: "inherit" | "pipe" | "ignore";
}

export interface RequestOptions {
  /** Cancels the request (the protocol's `cancel`): a run then resolves with
   * `outcome: "cancelled"`, `exit: 130`; a hook with `outcome: "interrupted"`. */
  signal?: AbortSignal;
  /** Receives the request's id as it is sent (for `cancel`). */
  onId?: (id: number) => void;
}

export interface RunOptions extends RequestOptions {
  /** Each output event as it comes; the run is then streamed, whole, and its result's
   * `stdout` and `stderr` are empty. */
  onOutput?: (event: OutputEvent) => void;
}

/** A streamed run: its output events as an async iterator, and its result. */
export declare class RunStream implements AsyncIterable<OutputEvent> {
  readonly id: number;
  readonly result: Promise<RunResult>;
  [Symbol.asyncIterator](): AsyncIterator<OutputEvent>;
}

export declare class Serve {
  /** Starts `harness-sandbox serve` and waits for its ready line. */
  static start(options?: StartOptions): Promise<Serve>;
  constructor(options?: StartOptions);
  /** The server's first line. */
  readonly ready: Promise<Ready>;
  /** `ready.limits`, once ready. */
  limits: Ready["limits"] | undefined;
  /** The server's exit status (null when a signal ended it). */
  readonly exited: Promise<number | null>;
  readonly pid: number | undefined;
  open(params?: OpenParams, options?: RequestOptions): Promise<OpenResult>;
  run(params: RunParams, options?: RunOptions): Promise<RunResult>;
  stream(params: Omit<RunParams, "stream">, options?: RequestOptions): RunStream;
  hook(params: HookParams, options?: RequestOptions): Promise<HookResult>;
  hookOpenHarness(params: HookOpenharnessParams,
                  options?: RequestOptions): Promise<HookOpenharnessResult>;
  cancel(id: Id): Promise<CancelResult>;
  /** Ends the session (runs cancelled, what it made removed), then waits for the
   * server to exit. */
  close(): Promise<CloseResult>;
  /** Any method by name, for what this client does not wrap. */
  request(method: string, params?: object,
          options?: RequestOptions & { onEvent?: (event: OutputEvent) => void }
  ): Promise<unknown>;
  kill(signal?: string): void;
}
