// VS Code (code-server, in headless Chromium) as the LSP client, driven like a user: open main.py from the
// Explorer, put the cursor at the end of line 2, type and delete a character (VS Code asks for inline
// completions as you type), wait for nestling's ghost text, accept it with Tab, save with Ctrl+S.
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

async function run(page, out) {
  await page.goto(env.NESTLING_VSCODE_URL);
  await page.waitForSelector(".monaco-workbench", { timeout: 120000 });
  await page.click(".explorer-folders-view .monaco-list-row >> text=main.py", { timeout: 60000 });
  const line = ".editor-instance .monaco-editor .view-lines >> text=names";
  await page.waitForSelector(line, { timeout: 60000 });
  await page.click(line);
  await page.keyboard.press("End");
  out.steps.push("editor");
  const deadline = Date.now() + 180000;
  while (!out.ghost && Date.now() < deadline) {
    await page.keyboard.type("x");
    await page.keyboard.press("Backspace");
    await page.waitForTimeout(3000);
    out.ghost = await ghostText(page);
  }
  out.steps.push("ghost");
  await page.screenshot({ path: env.NESTLING_VSCODE_OUT + ".png" });
  await page.keyboard.press("Tab");
  await page.waitForTimeout(500);
  await page.keyboard.press("Control+S");
  await page.waitForSelector(".tabs-container .tab.active:not(.dirty)", { timeout: 30000 });
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
