// The status bar item that tells the user what the server is doing: idle (no file to complete
// yet), starting, loading the model (with the server's $/progress percentage), ready, or failed
// (with the server's message).
import * as vscode from "vscode";

export type ServerState = "idle" | "starting" | "loading" | "ready" | "error" | "stopped";

export class StatusItem implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private state: ServerState = "stopped";
  private detail = "";
  private enabled = true;

  constructor(toggleCommand: string) {
    this.item = vscode.window.createStatusBarItem("seam.status", vscode.StatusBarAlignment.Right, 100);
    this.item.name = "Seam";
    this.item.command = toggleCommand;
    this.render();
    this.item.show();
  }

  get current(): ServerState {
    return this.state;
  }

  set(state: ServerState, detail = ""): void {
    this.state = state;
    this.detail = detail;
    this.render();
  }

  setEnabled(enabled: boolean): void {
    this.enabled = enabled;
    this.render();
  }

  private render(): void {
    const icon = {
      idle: "$(circle-outline)",
      starting: "$(loading~spin)",
      loading: "$(loading~spin)",
      ready: "$(check)",
      error: "$(error)",
      stopped: "$(debug-stop)",
    }[this.state];
    const words = {
      idle: "idle",
      starting: "starting",
      loading: "loading",
      ready: "ready",
      error: "error",
      stopped: "stopped",
    }[this.state];
    // The state word is part of the visible text so that it can be read at a glance (and by the
    // end-to-end test), not only from the tooltip.
    this.item.text = this.enabled ? `${icon} Seam: ${words}` : `$(circle-slash) Seam: off (${words})`;
    const lines = [`Seam server: ${words}`];
    if (this.detail) {
      lines.push(this.detail);
    }
    lines.push(this.enabled ? "Click to turn completions off." : "Click to turn completions on.");
    this.item.tooltip = lines.join("\n");
    this.item.backgroundColor =
      this.state === "error" ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}
