// Real-browser test: Debian's Chromium (headless) with a Pixel 7 profile loads the demo from a
// local static server, checks the shared test vectors, types two sentences, reads their
// similarity, times embeddings, takes a screenshot, and fails on any console error.
//   node test/browser.test.mjs [--root web/] [--screenshot out.png] [--results out.json] [--expect-related]
import { createServer } from "node:http";
import { readFile, writeFile } from "node:fs/promises";
import { extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, devices } from "playwright-core";

const here = fileURLToPath(new URL(".", import.meta.url));
const root = resolve(process.argv.includes("--root") ? process.argv[process.argv.indexOf("--root") + 1] : join(here, "..", "web"));
const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; };
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".json": "application/json",
                ".wasm": "application/wasm", ".onnx": "application/octet-stream", ".svg": "image/svg+xml",
                ".webmanifest": "application/manifest+json" };

// Static files only, never outside web/.
const server = createServer(async (req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname)).replace(/^(\.\.[/\\])+/, "");
  const file = join(root, path.endsWith("/") ? path + "index.html" : path);
  if (!file.startsWith(root)) { res.writeHead(403).end(); return; }
  try {
    const body = await readFile(file);
    res.writeHead(200, { "content-type": TYPES[extname(file)] || "application/octet-stream" }).end(body);
  } catch { res.writeHead(404).end(); }
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const url = `http://127.0.0.1:${server.address().port}/index.html`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
         "--no-first-run", "--disable-component-update", "--disable-sync"],
});
const errors = [];
let failed = false;
const check = (ok, msg) => { console.log(`${ok ? "ok  " : "FAIL"} ${msg}`); if (!ok) failed = true; };
try {
  const context = await browser.newContext({ ...devices["Pixel 7"] });
  const page = await context.newPage();
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url);
  try {
    await page.waitForSelector("#status[data-ready='1']", { timeout: 120000 });
  } catch (e) {
    throw new Error(`the app did not get ready: status "${await page.textContent("#status")}", console: ${errors.join(" | ")}`);
  }

  const results = await page.evaluate(() => window.runTestVectors());
  for (const r of results) {
    check(r.idsEqual, `token ids equal Python's for ${JSON.stringify(r.text.slice(0, 40))}`);
    check(r.cosine >= 0.999, `cosine ${r.cosine.toFixed(5)} >= 0.999 with Python onnxruntime`);
  }

  await page.fill("#a", "Print the selected pages");
  await page.fill("#b", "Imprimer les pages sélectionnées");
  await page.click("#compare");
  await page.waitForFunction(() => document.querySelector("#timing").textContent.includes("ms"));
  const related = parseFloat(await page.textContent("#similarity"));
  await page.fill("#b", "Le chat dort sur le canapé depuis ce matin");
  await page.click("#compare");
  await page.waitForFunction((prev) => document.querySelector("#similarity").textContent !== prev, related.toFixed(3));
  const unrelated = parseFloat(await page.textContent("#similarity"));
  check(Math.abs(related) <= 1 && Math.abs(unrelated) <= 1, `similarities read from the page: ${related}, ${unrelated}`);
  if (process.argv.includes("--expect-related")) { // a quality check, for a trained model
    check(related > unrelated, `translation scores higher (${related}) than an unrelated sentence (${unrelated})`);
  }
  await page.fill("#b", "Imprimer les pages sélectionnées");
  await page.click("#compare");
  await page.fill("#query", "Drucken");
  await page.click("#search");
  await page.waitForFunction(() => document.querySelectorAll("#results li").length === 5);

  const times = await page.evaluate(() => window.timeEmbedding("Save the current document", 50));
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  console.log(`in-browser embedding of a short sentence: median ${median.toFixed(2)} ms over ${times.length}`);

  await page.screenshot({ path: arg("--screenshot", "demo-screenshot.png"), fullPage: true });
  check(errors.length === 0, `no console errors${errors.length ? ": " + errors.join(" | ") : ""}`);
  const out = arg("--results");
  if (out) await writeFile(out, JSON.stringify({ vectors: results, related, unrelated, median_ms: median, times_ms: times }));
} finally {
  await browser.close();
  server.close();
}
if (failed) { console.log("browser test failed"); process.exit(1); }
console.log("browser test passed");
