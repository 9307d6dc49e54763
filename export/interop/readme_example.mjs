// The README's transformers.js example, run from the repository root: node export/interop/readme_example.mjs
import { env, pipeline } from "@huggingface/transformers";
env.allowRemoteModels = false; env.localModelPath = "edge_xsent/resources/";
const embed = await pipeline("feature-extraction", "default-model", { dtype: "int8" });
const [a, b] = (await embed(["Save the current document", "Enregistrer le document actuel"],
                            { pooling: "mean", normalize: true })).tolist();
console.log(a.length, a.reduce((s, x, i) => s + x * b[i], 0).toFixed(3));
