// The page's own embeddings (tokenizers.js + onnxruntime-web WASM, one thread) of a list of texts,
// for comparisons against other runtimes (benchmarks/int8_variants.py).
//   node test/embed.mjs --root WEB --texts texts.json --out vectors.json
//   node test/embed.mjs --jobs jobs.json   # [{"root", "texts", "out"}, ...]: one browser for them all
// A job whose page fails writes {"error": "..."} to its out and the command exits 1 after the others ran.
import { readFile, writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import { launchBrowser, openDemo } from "./demo_page.mjs";

const USAGE = "usage: node test/embed.mjs --root WEB --texts texts.json --out vectors.json | --jobs jobs.json";
const arg = (name) => {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) { console.error(`missing ${name}; ${USAGE}`); process.exit(2); }
  return process.argv[i + 1];
};
const jobs = process.argv.includes("--jobs") ? JSON.parse(await readFile(arg("--jobs"), "utf8"))
  : [{ root: arg("--root"), texts: arg("--texts"), out: arg("--out") }];

async function embed(browser, job) {
  const texts = JSON.parse(await readFile(job.texts, "utf8"));
  const demo = await openDemo(resolve(job.root), browser);
  try {
    const vectors = await demo.page.evaluate((t) => window.embedTexts(t), texts);
    if (demo.errors.length) throw new Error(`console errors: ${demo.errors.join(" | ")}`);
    return { vectors };
  } finally {
    await demo.close();
  }
}

const browser = await launchBrowser();
let failed = false;
try {
  for (const job of jobs) {
    let result;
    try {
      result = await embed(browser, job);
    } catch (e) {
      failed = true;
      result = { error: String(e) };
      console.error(`${job.root}: ${e}`);
    }
    await writeFile(job.out, JSON.stringify(result));
  }
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
