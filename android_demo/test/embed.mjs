// The page's own embeddings (tokenizers.js + onnxruntime-web WASM, one thread) of a list of texts,
// for comparisons against other runtimes (benchmarks/int8_variants.py).
//   node test/embed.mjs --root WEB --texts texts.json --out vectors.json
import { readFile, writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import { openDemo } from "./demo_page.mjs";

const arg = (name) => {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) { console.error(`missing ${name}; usage: node test/embed.mjs --root WEB --texts texts.json --out vectors.json`); process.exit(2); }
  return process.argv[i + 1];
};
const [root, textsPath, out] = [resolve(arg("--root")), arg("--texts"), arg("--out")];
const texts = JSON.parse(await readFile(textsPath, "utf8"));
const demo = await openDemo(root);
try {
  const vectors = await demo.page.evaluate((t) => window.embedTexts(t), texts);
  if (demo.errors.length) throw new Error(`console errors: ${demo.errors.join(" | ")}`);
  await writeFile(out, JSON.stringify({ vectors }));
} finally {
  await demo.close();
}
