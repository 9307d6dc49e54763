// What a transformers.js user writes, run offline on an edge-xsent model folder: the tokenizer's
// ids and the feature-extraction pipeline's mean-pooled vectors, printed as JSON for
// tests/test_interop.py to compare with edge-xsent's own.
//   node export/interop/transformers_js.mjs MODEL_FOLDER TEXTS.json [fp32|int8]
import { readFileSync } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { AutoTokenizer, env, pipeline } from "@huggingface/transformers";

const [folder, textsFile, dtype = "fp32"] = process.argv.slice(2);
if (!folder || !textsFile) {
  console.error("usage: node export/interop/transformers_js.mjs MODEL_FOLDER TEXTS.json [fp32|int8]");
  process.exit(2);
}
env.allowRemoteModels = false;
env.localModelPath = dirname(resolve(folder)) + "/";
const name = basename(resolve(folder));
const texts = JSON.parse(readFileSync(textsFile, "utf8"));

const tokenizer = await AutoTokenizer.from_pretrained(name);
const ids = texts.map((t) => tokenizer.encode(t)); // special tokens as users get them (a student's <s> ... </s>)
const extractor = await pipeline("feature-extraction", name, { dtype, device: "cpu" });
// One text at a time. A text with no tokens (empty, whitespace only) is null: alone it is a
// zero-length input the graph rejects, and in a batch transformers.js' mean pooling divides by
// zero (NaN); edge-xsent returns a zero vector. README "What differs" documents it.
const vectors = [];
for (const [i, t] of texts.entries()) {
  vectors.push(ids[i].length ? (await extractor(t, { pooling: "mean", normalize: false })).tolist()[0] : null);
}
console.log(JSON.stringify({ ids, vectors }));
