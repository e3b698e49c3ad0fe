// VS Code (code-server, in headless Chromium) as the LSP client, driven like a user: open main.py from the
// Explorer ($NESTLING_FILE), put the cursor at the end of line 2, type and delete a character (VS Code asks
// for inline completions as you type), wait for nestling's ghost text, accept it with Tab, save with Ctrl+S.
// Writes what it saw as JSON to $NESTLING_VSCODE_OUT (and a screenshot beside it).
const fs = require("fs");
const { chromium } = require("playwright-core");

const env = process.env;
// Chromium on a machine without network access (background fetches would fail, many at a time).
const CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

function ghostText(page) {
  return page.evaluate(() => Array.from(
    document.querySelectorAll(".editor-instance .ghost-text-decoration, .editor-instance .ghost-text"),
    (part) => part.textContent).join(""));
}

async function fileChanged(before, timeoutMs) {
  for (const end = Date.now() + timeoutMs; Date.now() < end; await new Promise((r) => setTimeout(r, 250))) {
    if (fs.readFileSync(env.NESTLING_FILE, "utf8") !== before) return true;
  }
  return false;
}

async function run(page, out) {
  await page.goto(env.NESTLING_VSCODE_URL);
  await page.waitForSelector(".monaco-workbench", { timeout: 120000 });
  await page.click(".explorer-folders-view .monaco-list-row >> text=main.py", { timeout: 60000 });
  const line = ".editor-instance .monaco-editor .view-lines >> text=names";
  await page.waitForSelector(line, { timeout: 60000 });
  await page.click(line);
  await page.keyboard.press("End");
  out.steps.push("editor");
  const deadline = Date.now() + 240000;
  const before = fs.readFileSync(env.NESTLING_FILE, "utf8");
  // Accept with Tab and save; if the file did not change (under load a Tab can arrive just as the ghost text
  // is being replaced), ask again. `attempts` records how many rounds it took.
  for (out.attempts = 1; out.attempts <= 4; out.attempts++) {
    out.ghost = "";
    while (!out.ghost && Date.now() < deadline) {
      await page.keyboard.type("x");
      await page.keyboard.press("Backspace");
      await page.waitForTimeout(3000);
      out.ghost = await ghostText(page);
    }
    if (!out.ghost) throw new Error(`no ghost text within 240 s (round ${out.attempts})`);
    await page.screenshot({ path: env.NESTLING_VSCODE_OUT + ".png" });
    await page.keyboard.press("Tab");
    await page.waitForTimeout(500);
    await page.keyboard.press("Control+S");
    await page.waitForSelector(".tabs-container .tab.active:not(.dirty)", { timeout: 30000 });
    if (await fileChanged(before, 5000)) break;
    await page.click(line);  // back to the end of line 2, wherever the focus went
    await page.keyboard.press("End");
  }
  out.steps.push("saved");
}

async function main() {
  const browser = await chromium.launch({ executablePath: env.NESTLING_CHROMIUM, args: CHROMIUM_FLAGS });
  const page = await browser.newPage();
  const out = { steps: [], ghost: "" };
  try {
    await run(page, out);
  } catch (err) {
    out.error = String(err);
    await page.screenshot({ path: env.NESTLING_VSCODE_OUT + ".png" }).catch(() => {});
  } finally {
    fs.writeFileSync(env.NESTLING_VSCODE_OUT, JSON.stringify(out));
    await browser.close();
  }
}

main();
