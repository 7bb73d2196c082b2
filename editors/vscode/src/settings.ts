// Reads the extension's `seam.*` settings: the part sent to the server (section `seam`, the keys
// lsp_server/settings.py validates) and the part only the extension uses (how to start the server).
//
// The settings that choose code to run, files to load or where the code is sent (the model,
// trustRemoteCode, the server command and interpreter, the vLLM server, its key and how long
// it may take, and the local fallback model loaded while it is down) are read
// from the user's own settings only. package.json declares them
// `machine`-scoped and restricted in untrusted workspaces, and this module does not rely on that
// alone: it reads them with `inspect()` and ignores any workspace or folder value, so a cloned
// repository's .vscode/settings.json cannot start a program or load a model of its choosing
// even if a future scope change or VS Code version let such a value through.
import * as vscode from "vscode";

export const SECTION = "seam";

/** Settings taken from the user's settings only, never from a workspace. */
const USER_ONLY_KEYS = [
  "model", "trustRemoteCode", "server.command", "server.python", "vllmServer", "vllmApiKey",
  "vllmSlowAfterMs", "modelServer", "modelServerApiKey", "servedModel", "fimTemplate",
  "fallback",
] as const;
type UserOnlyKey = (typeof USER_ONLY_KEYS)[number];

/** The user's (or the default) value of a user-only setting; workspace values do not count. */
function userValue<T>(key: UserOnlyKey, fallback: T): T {
  const seen = vscode.workspace.getConfiguration(SECTION).inspect<T>(key);
  const value = seen?.globalValue ?? seen?.defaultValue;
  return value === undefined ? fallback : value;
}

/** The settings the server understands, exactly as it expects them on the wire. */
export interface ServerSettings {
  model: string;
  engine: string;
  vllmServer: string;
  vllmApiKey: string;
  vllmSlowAfterMs: number;
  modelServer: string;
  modelServerApiKey: string;
  servedModel: string;
  fimTemplate: string;
  fallback: string;
  device: string;
  dtype: string;
  maxTokens: number | "auto";
  timeBudgetMs: number | "auto";
  contextTokens: number | "auto";
  newPlaceMs: number | "auto";
  scope: string;
  topK: number;
  constrained: boolean;
  languages: string[];
  contextBudgetTokens: number | "auto";
  contextDefinitions: boolean;
  contextOpenFiles: boolean;
  contextRecentEdits: boolean;
  contextSimilarCode: boolean;
  suggestions: number;
  threads: number | "auto";
}

/** Settings whose change needs a new server process rather than a notification. */
export const RESTART_KEYS = ["server.python", "server.command", "languages", "trustRemoteCode"];

// In the settings UI an integer is friendlier than a string-or-integer, so 0 stands for the
// server's "auto" (a policy that depends on where the cursor is).
function autoWhenZero(value: unknown): number | "auto" {
  return typeof value === "number" && value > 0 ? Math.floor(value) : "auto";
}

export function serverSettings(): ServerSettings {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  return {
    model: userValue<string>("model", "bundled"),
    engine: cfg.get<string>("engine", "auto"),
    vllmServer: userValue<string>("vllmServer", ""),
    vllmApiKey: userValue<string>("vllmApiKey", ""),
    vllmSlowAfterMs: userValue<number>("vllmSlowAfterMs", 10000),
    modelServer: userValue<string>("modelServer", ""),
    modelServerApiKey: userValue<string>("modelServerApiKey", ""),
    servedModel: userValue<string>("servedModel", ""),
    fimTemplate: userValue<string>("fimTemplate", ""),
    fallback: userValue<string>("fallback", "none"),
    device: cfg.get<string>("device", "auto"),
    dtype: cfg.get<string>("dtype", "auto"),
    maxTokens: autoWhenZero(cfg.get<number>("maxTokens", 0)),
    timeBudgetMs: autoWhenZero(cfg.get<number>("timeBudgetMs", 0)),
    contextTokens: autoWhenZero(cfg.get<number>("contextTokens", 0)),
    newPlaceMs: autoWhenZero(cfg.get<number>("newPlaceMs", 0)),
    scope: cfg.get<string>("scope", "auto"),
    topK: cfg.get<number>("topK", 50),
    constrained: cfg.get<boolean>("constrained", true),
    languages: languages(),
    contextBudgetTokens: autoWhenZero(cfg.get<number>("contextBudgetTokens", 0)),
    contextDefinitions: cfg.get<boolean>("contextDefinitions", true),
    contextOpenFiles: cfg.get<boolean>("contextOpenFiles", true),
    contextRecentEdits: cfg.get<boolean>("contextRecentEdits", true),
    contextSimilarCode: cfg.get<boolean>("contextSimilarCode", true),
    suggestions: cfg.get<number>("suggestions", 3),
    threads: autoWhenZero(cfg.get<number>("threads", 0)),
  };
}

/** The `seam.languages` entry that serves every file type. */
export const ALL_LANGUAGES = "*";

export function languages(): string[] {
  const value = vscode.workspace.getConfiguration(SECTION).get<string[]>("languages", ["*"]);
  const listed = Array.isArray(value) ? value.filter((v) => typeof v === "string" && v.trim() !== "") : [];
  return listed.length > 0 ? listed.map((v) => v.trim()) : [ALL_LANGUAGES];
}

/** Whether `seam.languages` serves documents of this language id ("*": every one). */
export function servesLanguage(languageId: string): boolean {
  const wanted = languages();
  return wanted.includes(ALL_LANGUAGES) || wanted.includes(languageId);
}

/** Whether Seam's middle is also offered in the suggest widget (extension-side only). */
export function completionItems(): boolean {
  return vscode.workspace.getConfiguration(SECTION).get<boolean>("completionItems", false);
}

/** How to start `seam serve`: an explicit command, else an interpreter, else `seam` on PATH. */
export interface ServerCommand {
  command: string;
  args: string[];
}

export function serverCommand(): ServerCommand {
  // A model's own code runs only when the server is started with this flag, which only the
  // user's settings can add (the server refuses trustRemoteCode sent as a setting).
  const trust = userValue<boolean>("trustRemoteCode", false) === true ? ["--trust-remote-code"] : [];
  const full = userValue<string[]>("server.command", []);
  if (Array.isArray(full) && full.length > 0 && typeof full[0] === "string" && full[0].trim() !== "") {
    return { command: full[0], args: [...full.slice(1).map(String), ...trust] };
  }
  const python = String(userValue<string>("server.python", "")).trim();
  if (python !== "") {
    return { command: python, args: ["-m", "lsp_server.cli", "serve", ...trust] };
  }
  return { command: "seam", args: ["serve", ...trust] };
}
