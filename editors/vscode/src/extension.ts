// Entry point of the Seam extension: creates the status bar item and the language client, and
// registers the commands and the settings listener.
import * as vscode from "vscode";
import { SeamClient } from "./client";
import { languages, RESTART_KEYS, SECTION } from "./settings";
import { StatusItem } from "./status";

const ENABLED_KEY = "seam.completionsEnabled";

let seam: SeamClient | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel("Seam", { log: true });
  const status = new StatusItem("seam.toggleCompletions");
  // The toggle is a per-user switch that outlives the window, not a setting synced to the server:
  // the server keeps its model loaded while completions are off, so turning them on is instant.
  const isEnabled = () => context.globalState.get<boolean>(ENABLED_KEY, true);
  status.setEnabled(isEnabled());
  seam = new SeamClient(output, status, isEnabled);

  // Loading a model costs seconds and gigabytes: start the server with the first document it
  // would complete, not with every window that happens to load the extension.
  let started = false;
  const start = () => {
    started = true;
    return seam?.restart();
  };
  const wanted = (doc: vscode.TextDocument) => languages().includes(doc.languageId);

  context.subscriptions.push(
    output,
    status,
    seam,
    vscode.commands.registerCommand("seam.restartServer", start),
    vscode.commands.registerCommand("seam.toggleCompletions", async () => {
      const enabled = !isEnabled();
      await context.globalState.update(ENABLED_KEY, enabled);
      status.setEnabled(enabled);
      void vscode.window.setStatusBarMessage(`Seam completions ${enabled ? "on" : "off"}`, 3000);
    }),
    vscode.commands.registerCommand("seam.showLog", () => output.show(true)),
    vscode.workspace.onDidOpenTextDocument((doc) => {
      if (!started && wanted(doc)) {
        void start();
      }
    }),
    vscode.window.onDidChangeTextEditorSelection((event) => seam?.cursorMoved(event.textEditor)),
    vscode.window.onDidChangeActiveTextEditor((editor) => {
      if (editor !== undefined) {
        seam?.cursorMoved(editor);
      }
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (!started || !event.affectsConfiguration(SECTION)) {
        return;
      }
      if (RESTART_KEYS.some((key) => event.affectsConfiguration(`${SECTION}.${key}`))) {
        void seam?.restart();
      } else {
        void seam?.sendSettings();
      }
    }),
  );
  if (vscode.workspace.textDocuments.some(wanted)) {
    void start(); // not awaited: activation must not wait for the server
  } else {
    status.set("idle", `Starts with the first ${languages().join(" / ")} file.`);
  }
}

export async function deactivate(): Promise<void> {
  await seam?.stop();
  seam = undefined;
}
