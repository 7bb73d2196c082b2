// Drives VS Code (code-server) in Debian's headless Chromium with playwright-core, as a person
// would: open the file, put the cursor at the hole, ask for an inline suggestion, wait for the
// ghost text, take a screenshot, accept it with Tab, save; then restart the server and toggle
// completions off from the command palette. Used by tests/e2e/test_vscode.py.
//
// Usage: node drive.cjs CONFIG.json. CONFIG holds url, file (name in the workspace), line and
// column (1-based) of the hole, screenshot paths, chromium path, a timeout in ms and optionally
// serverLog (the Seam server's log file, to see the restart). Prints one JSON line on stdout:
// {"before", "status", "ghost", "saved", "restarts", "toggled"}; progress goes to stderr.
// With "notebook": true the file is a Jupyter notebook: the cursor goes to line/column of its
// first code cell, and the run ends once the accepted suggestion is saved; "once": true ends
// a plain file's run there too. "statusAtGhost" is the status item's text while the
// suggestion shows (it says "(unchecked)" in a file Seam has no grammar for). With "partial"
// {diskFile, lineKey} the suggestion is accepted a word at a time (VS Code's own Ctrl+Right,
// editor.action.inlineSuggest.acceptNextWord) and then a line (acceptNextLine, on lineKey from
// the user's keybindings.json), saving after each; the file's text after each step comes back
// as "afterWord" and "afterLine", the ghost text before each as "ghost" and "ghostBeforeLine".
// With "expect": "error" it only waits for the status bar to report a server error and returns
// {"status", "notification"}; with "diagnose" it also returns the status item's tooltip
// ("tooltip", where the doctor's findings go) and the text "Seam: Diagnose" opens ("diagnosis");
// given "fixSetting" {key, value} it then changes that setting in
// the Settings editor and waits for the server to come back ready ("recovered"). With
// "expect": "ready" it waits for the model to be ready and returns {"status", "notifications"}.
// playwright-core is found through NODE_PATH (the test points it at .e2e/tools/node_modules);
// playwright gives every launch a fresh, throw-away browser profile.
"use strict";

const fs = require("fs");
const { chromium } = require("playwright-core");

const config = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const timeout = config.timeoutMs || 180000;

function log(message) {
  process.stderr.write(`[drive ${new Date().toISOString()}] ${message}\n`);
}

// Chromium's own traffic (updates, sync, QUIC probes) has nowhere to go on a closed network and
// only slows start-up; none of it is needed to run a page served on loopback.
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

async function runCommand(page, title) {
  // F1 opens the command palette in the browser too (Ctrl+Shift+P can be claimed by Chromium).
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout });
  await input.fill(`>${title}`);
  const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
  await row.waitFor({ state: "visible", timeout });
  await page.keyboard.press("Enter");
  await input.waitFor({ state: "hidden", timeout });
}

// Wait for the status bar item to say ready; fail at once if it says error instead.
async function untilReady(ready, failed) {
  await Promise.race([
    ready.waitFor({ state: "visible" }),
    failed.waitFor({ state: "visible" }).then(async () => {
      const tip = await failed.getAttribute("aria-label");
      throw new Error(`the Seam server reports an error: ${tip}`);
    }),
  ]);
}

const GHOST = ".ghost-text-decoration, .ghost-text-decoration-preview";

// Ask for an inline suggestion until ghost text shows. Ask again now and then: a request can
// legitimately come back empty (the server was still settling the document, or the decoder ran
// out of budget on a slow machine).
async function askForGhost(page) {
  const ghost = page.locator(GHOST).first();
  const attempts = config.attempts || 4;
  for (let attempt = 1; ; attempt++) {
    log(`asking for an inline suggestion (attempt ${attempt} of ${attempts})`);
    await runCommand(page, "Trigger Inline Suggestion");
    try {
      await ghost.waitFor({ state: "visible", timeout: Math.ceil(timeout / attempts) });
      return;
    } catch (err) {
      if (attempt >= attempts) {
        throw err;
      }
    }
  }
}

// Ghost text is rendered as inline decorations on the cursor line plus view zones for further
// lines; collect both so the test can compare them with what lands in the file.
async function readGhost(page) {
  return page.evaluate(() => {
    const parts = [];
    for (const el of document.querySelectorAll(".ghost-text-decoration, .ghost-text-decoration-preview, .ghost-text .view-line")) {
      parts.push(el.textContent || "");
    }
    return parts.join("\n");
  });
}

// Wait for the edit to make the file dirty, save it and return its text on disk.
async function saveAndRead(page, diskFile) {
  await page.locator(".tab.dirty").first().waitFor({ state: "visible" });
  await page.keyboard.press("Control+S");
  await page.locator(".tab.dirty").waitFor({ state: "detached" });
  return fs.readFileSync(diskFile, "utf8");
}

// Load the page until the workbench shows. Once in twenty CI runs code-server's first load
// never showed it (no error in the page, the Seam server not yet involved), and the same test
// passed in the same checkout right after: the page is loaded a second time before the step
// counts as failed, and the driver's log says so.
async function openWorkbench(page, url) {
  const workbench = page.locator(".monaco-workbench");
  const first = Math.min(timeout, 90000);
  await page.goto(url, { waitUntil: "domcontentloaded" });
  try {
    await workbench.waitFor({ state: "visible", timeout: first });
  } catch (err) {
    log(`no workbench ${first} ms after loading the page: loading it again`);
    await page.reload({ waitUntil: "domcontentloaded" });
    await workbench.waitFor({ state: "visible" });
  }
}

async function main() {
  const browser = await chromium.launch({
    executablePath: config.chromium,
    headless: true,
    args: CHROMIUM_ARGS,
  });
  const result = { ghost: "", status: "", saved: false };
  const consoleLog = [];
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.on("console", (msg) => consoleLog.push(`[${msg.type()}] ${msg.text()}`));
    page.setDefaultTimeout(timeout);

    log(`opening ${config.url}`);
    await openWorkbench(page, config.url);

    // With no Python file open yet, the extension (activated on start-up) must not have started
    // a server: loading a model is too costly to do for every window.
    log("waiting for the extension's status bar item");
    const item = page.locator(".statusbar-item", { hasText: "Seam:" }).first();
    await item.waitFor({ state: "visible" });
    result.before = (await item.innerText()).trim();

    // Quick Open the file by name.
    log(`opening ${config.file}`);
    await page.locator(".monaco-workbench").click({ position: { x: 640, y: 400 } }).catch(() => {});
    await page.keyboard.press("Control+P");
    const quick = page.locator(".quick-input-widget input");
    await quick.waitFor({ state: "visible" });
    await quick.fill(config.file);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: config.file }).first().waitFor();
    await page.keyboard.press("Enter");
    // A notebook's cell editors live in an overlay of their own, outside .editor-instance.
    const editor = page.locator(config.notebook
      ? ".notebookOverlay .cell-editor-container .monaco-editor"
      : ".editor-instance .monaco-editor").first();
    await editor.waitFor({ state: "visible" });

    const ready = page.locator(".statusbar-item", { hasText: "Seam: ready" });
    const failed = page.locator(".statusbar-item", { hasText: "Seam: error" });
    if (config.expect === "ready") {
      // Only wait for the server to load its model, then report the status bar item and the
      // notifications shown meanwhile.
      log("waiting for the Seam status bar item to say ready");
      await untilReady(ready, failed);
      result.status = (await ready.innerText()).trim();
      const toasts = page.locator(".notifications-toasts .notification-list-item-message");
      result.notifications = (await toasts.allInnerTexts()).map((t) => t.trim());
      if (config.screenshot) {
        await page.screenshot({ path: config.screenshot, animations: "disabled" });
      }
      return result;
    }
    if (config.expect === "error") {
      // A model that cannot load must show up as an error in the status bar and a notification
      // that says what to fix.
      log("waiting for the Seam status bar item to say error");
      await failed.waitFor({ state: "visible" });
      result.status = (await failed.innerText()).trim();
      // Both the server's load errors and the extension's start errors begin so; other toasts
      // (e.g. the language client's own) may come first.
      const toast = page
        .locator(".notifications-toasts .notification-list-item-message", { hasText: "Seam could not" })
        .first();
      await toast.waitFor({ state: "visible" });
      result.notification = (await toast.innerText()).trim();
      await page.screenshot({ path: config.screenshot, animations: "disabled" });
      if (config.diagnose) {
        // The extension asks `seam doctor` why the server failed and puts the answer in the
        // item's tooltip (it comes a moment after the error): hover until it is there.
        log("reading the doctor's findings from the status item's tooltip");
        const hover = page.locator(".workbench-hover, .monaco-hover").filter({ hasText: "seam doctor:" }).first();
        const deadline = Date.now() + timeout;
        for (;;) {
          await page.mouse.move(10, 10);
          await failed.hover();
          try {
            await hover.waitFor({ state: "visible", timeout: 5000 });
            break;
          } catch (err) {
            if (Date.now() > deadline) {
              throw err;
            }
          }
        }
        result.tooltip = (await hover.innerText()).trim();
        await page.mouse.move(10, 10);
        log("running Seam: Diagnose");
        await runCommand(page, "Seam: Diagnose");
        const report = page
          .locator(".editor-group-container.active .monaco-editor .view-lines", { hasText: "Seam: Diagnose" })
          .first();
        await report.waitFor({ state: "visible" });
        result.diagnosis = (await report.innerText()).replace(/\u00a0/g, " ");
        await page.screenshot({ path: config.screenshotDiagnosis, animations: "disabled" });
        // Read-only, so it closes without a question; back to scale.py for the fix below.
        await page.keyboard.press("Control+W");
        await report.waitFor({ state: "detached" });
      }
      if (config.fixSetting) {
        // Fix the setting the way a user would, in the Settings editor: the extension pushes
        // workspace/didChangeConfiguration, the server loads the new model, the item turns ready.
        const { key, value } = config.fixSetting;
        log(`setting ${key} to ${value} in the Settings editor`);
        await page.locator(".monaco-workbench").click({ position: { x: 640, y: 400 } }).catch(() => {});
        await page.keyboard.press("Control+Comma");
        const field = page.locator(`.settings-editor input[aria-label="${key}"]`);
        const search = page.locator(".settings-editor .settings-header .suggest-input-container");
        await search.waitFor({ state: "visible" });
        // Machine-scoped settings (seam.model, seam.server.*) of a remote window, which
        // code-server is, live in the Remote settings: edit those when the tab exists.
        const remoteTab = page.locator(".settings-tabs-widget .action-label", { hasText: /^Remote/ });
        if ((await remoteTab.count()) > 0) {
          log("switching to the Remote settings tab");
          await remoteTab.first().click();
          await search.click();
        }
        await page.keyboard.type(key);
        await field.waitFor({ state: "visible" });
        await field.fill(value);
        await field.press("Enter");
        await ready.waitFor({ state: "visible" });
        result.recovered = (await ready.innerText()).trim();
        if (config.screenshotRecovered) {
          await page.screenshot({ path: config.screenshotRecovered, animations: "disabled" });
        }
      }
      return result;
    }

    // The status bar item says when the model is ready; asking earlier gets an empty answer.
    log("waiting for the Seam status bar item to say ready");
    await untilReady(ready, failed);
    result.status = (await ready.innerText()).trim();

    log(`cursor to ${config.line}:${config.column}`);
    if (config.notebook) {
      // Go to Line works on the notebook as a whole, not in a cell: click into the first code
      // cell's editor and walk there with the keyboard, as a person would.
      await editor.click();
      await page.keyboard.press("Control+Home");
      for (let i = 1; i < config.line; i++) {
        await page.keyboard.press("ArrowDown");
      }
      await page.keyboard.press("Home");
      await page.keyboard.press("End");
    } else {
      await editor.click();
      await page.keyboard.press("Control+G");
      await quick.waitFor({ state: "visible" });
      await quick.fill(`:${config.line}:${config.column}`);
      await page.keyboard.press("Enter");
      await quick.waitFor({ state: "hidden" });
    }
    if (config.restMs) {
      // The user rests the cursor before asking: the extension reports where it is.
      log(`resting ${config.restMs} ms`);
      await page.waitForTimeout(config.restMs);
    }

    // Ask again now and then: a request can legitimately come back empty (the server was
    // still settling the document, or the decoder ran out of budget on a slow machine).
    await askForGhost(page);
    result.ghost = await readGhost(page);
    log(`ghost text: ${JSON.stringify(result.ghost)}`);
    // What the status item says while the file's suggestion shows (exact or unchecked).
    result.statusAtGhost = (await item.innerText()).trim();
    await page.screenshot({ path: config.screenshot, animations: "disabled" });

    if (config.partial) {
      // A word with VS Code's default key for acceptNextWord, then save and read the file.
      log("accepting the next word with Ctrl+Right and saving");
      await page.keyboard.press("Control+ArrowRight");
      result.afterWord = await saveAndRead(page, config.partial.diskFile);
      // The rest of the suggestion stays on screen; should saving have hidden it, ask again
      // (the server answers from the suggestion being typed through).
      if (!(await page.locator(GHOST).first().isVisible())) {
        await askForGhost(page);
      }
      result.ghostBeforeLine = await readGhost(page);
      log(`ghost text before accepting a line: ${JSON.stringify(result.ghostBeforeLine)}`);
      log(`accepting the next line with ${config.partial.lineKey} and saving`);
      await page.keyboard.press(config.partial.lineKey);
      result.afterLine = await saveAndRead(page, config.partial.diskFile);
      return result;
    }

    log("accepting with Tab and saving");
    await page.keyboard.press("Tab");
    // The accepted text makes the file dirty. (The ghost text need not disappear: the next
    // suggestion, prefetched while this one was shown, may appear at once.)
    await page.locator(".tab.dirty").first().waitFor({ state: "visible" });
    await page.keyboard.press("Control+S");
    await page.locator(".tab.dirty").waitFor({ state: "detached" });
    result.saved = true;
    if (config.screenshotAccepted) {
      await page.screenshot({ path: config.screenshotAccepted, animations: "disabled" });
    }
    if (config.notebook || config.once) {
      return result;
    }

    if (config.serverLog) {
      // "Seam: Restart Server" must bring up a second server process that loads the model
      // again. The status item alone cannot show that (it may say ready before and after), so
      // count the server's start and ready lines in its log file.
      log("restarting the server");
      const count = (pattern) => {
        const text = fs.existsSync(config.serverLog) ? fs.readFileSync(config.serverLog, "utf8") : "";
        return (text.match(pattern) || []).length;
      };
      const STARTING = /seam serve starting/g;
      const READY = /model \S+ ready$/gm;
      const before = count(STARTING);
      const readyBefore = count(READY);
      await runCommand(page, "Seam: Restart Server");
      const deadline = Date.now() + timeout;
      while (count(STARTING) <= before || count(READY) <= readyBefore) {
        if (Date.now() > deadline) {
          throw new Error("the server did not start and load again after Seam: Restart Server");
        }
        await page.waitForTimeout(250);
      }
      await ready.waitFor({ state: "visible" });
      result.restarts = count(STARTING) - before;
    }

    // The toggle flips the status bar item to "off" (and the middleware stops asking).
    log("toggling completions off");
    await runCommand(page, "Seam: Toggle Completions");
    const off = page.locator(".statusbar-item", { hasText: "Seam: off" });
    await off.waitFor({ state: "visible" });
    result.toggled = (await off.innerText()).trim();
    return result;
  } catch (err) {
    // Keep evidence of what the page looked like when a step failed.
    const pages = browser.contexts().flatMap((c) => c.pages());
    if (pages.length > 0 && config.screenshotFailure) {
      await pages[0].screenshot({ path: config.screenshotFailure }).catch(() => {});
    }
    throw err;
  } finally {
    if (config.consoleLog) {
      fs.writeFileSync(config.consoleLog, consoleLog.join("\n") + "\n");
    }
    await browser.close();
  }
}

main().then((result) => {
  process.stdout.write(JSON.stringify(result) + "\n");
}).catch((err) => {
  log(`failed: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
