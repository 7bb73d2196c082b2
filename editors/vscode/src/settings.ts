// Reads the extension's `seam.*` settings: the part sent to the server (section `seam`, the keys
// lsp_server/settings.py validates) and the part only the extension uses (how to start the server).
import * as vscode from "vscode";

export const SECTION = "seam";

/** The settings the server understands, exactly as it expects them on the wire. */
export interface ServerSettings {
  model: string;
  device: string;
  dtype: string;
  maxTokens: number | "auto";
  timeBudgetMs: number | "auto";
  contextTokens: number | "auto";
  scope: string;
  topK: number;
  constrained: boolean;
  languages: string[];
  trustRemoteCode: boolean;
  contextBudgetTokens: number | "auto";
  contextDefinitions: boolean;
  contextOpenFiles: boolean;
  contextRecentEdits: boolean;
}

/** Settings whose change needs a new server process rather than a notification. */
export const RESTART_KEYS = ["server.python", "server.command", "languages"];

// In the settings UI an integer is friendlier than a string-or-integer, so 0 stands for the
// server's "auto" (a policy that depends on where the cursor is).
function autoWhenZero(value: unknown): number | "auto" {
  return typeof value === "number" && value > 0 ? Math.floor(value) : "auto";
}

export function serverSettings(): ServerSettings {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  return {
    model: cfg.get<string>("model", "bundled"),
    device: cfg.get<string>("device", "auto"),
    dtype: cfg.get<string>("dtype", "auto"),
    maxTokens: autoWhenZero(cfg.get<number>("maxTokens", 0)),
    timeBudgetMs: autoWhenZero(cfg.get<number>("timeBudgetMs", 0)),
    contextTokens: autoWhenZero(cfg.get<number>("contextTokens", 0)),
    scope: cfg.get<string>("scope", "auto"),
    topK: cfg.get<number>("topK", 50),
    constrained: cfg.get<boolean>("constrained", true),
    languages: languages(),
    trustRemoteCode: cfg.get<boolean>("trustRemoteCode", false),
    contextBudgetTokens: autoWhenZero(cfg.get<number>("contextBudgetTokens", 0)),
    contextDefinitions: cfg.get<boolean>("contextDefinitions", true),
    contextOpenFiles: cfg.get<boolean>("contextOpenFiles", true),
    contextRecentEdits: cfg.get<boolean>("contextRecentEdits", true),
  };
}

export function languages(): string[] {
  const value = vscode.workspace.getConfiguration(SECTION).get<string[]>("languages", ["python"]);
  return Array.isArray(value) ? value.filter((v) => typeof v === "string" && v.trim() !== "") : ["python"];
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
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const full = cfg.get<string[]>("server.command", []);
  if (Array.isArray(full) && full.length > 0 && full[0].trim() !== "") {
    return { command: full[0], args: full.slice(1) };
  }
  const python = cfg.get<string>("server.python", "").trim();
  if (python !== "") {
    return { command: python, args: ["-m", "lsp_server.cli", "serve"] };
  }
  return { command: "seam", args: ["serve"] };
}
