// The demo served from a folder and opened in headless Chromium with a Pixel 7 profile, ready to
// use: shared by the browser test and by benchmarks that need the page's own embeddings.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { chromium, devices } from "playwright-core";

const TYPES = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".json": "application/json",
                ".wasm": "application/wasm", ".onnx": "application/octet-stream", ".svg": "image/svg+xml",
                ".webmanifest": "application/manifest+json" };

// Static files only, never outside `root`.
function serve(root) {
  return createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname)).replace(/^(\.\.[/\\])+/, "");
    const file = join(root, path.endsWith("/") ? path + "index.html" : path);
    if (!file.startsWith(root)) { res.writeHead(403).end(); return; }
    try {
      const body = await readFile(file);
      res.writeHead(200, { "content-type": TYPES[extname(file)] || "application/octet-stream" }).end(body);
    } catch { res.writeHead(404).end(); }
  });
}

// Headless Chromium as the tests run it; one browser can open several demos (embed.mjs --jobs).
export function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
           "--no-first-run", "--disable-component-update", "--disable-sync"],
  });
}

// -> { page, errors (console errors so far), close() }, once the app says it is ready. Given a browser, the
// demo opens in a context of its own there and close() leaves the browser open; else it launches one.
export async function openDemo(root, shared = null) {
  const server = serve(root);
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const browser = shared || await launchBrowser();
  let context = null;
  const close = async () => { await (shared ? context?.close() : browser.close()); server.close(); };
  const errors = [];
  try {
    context = await browser.newContext({ ...devices["Pixel 7"] });
    const page = await context.newPage();
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    page.on("pageerror", (e) => errors.push(String(e)));
    const started = Date.now();  // the page's load: its files fetched, the runtime and the graph ready
    await page.goto(`http://127.0.0.1:${server.address().port}/index.html`);
    try {
      await page.waitForSelector("#status[data-ready='1']", { timeout: 120000 });
    } catch (e) {
      throw new Error(`the app did not get ready: status "${await page.textContent("#status")}", console: ${errors.join(" | ")}`);
    }
    return { page, errors, close, loadMs: Date.now() - started };
  } catch (e) {
    await close();
    throw e;
  }
}
