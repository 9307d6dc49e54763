import { Int8Index, quantize } from "./compact.js";
import { Embedder, cosine } from "./embedder.js";

const $ = (id) => document.getElementById(id);
const PHRASES = [
  "Open the file in a new window", "Save the current document", "Print the selected pages",
  "Ouvrir le fichier dans une nouvelle fenêtre", "Enregistrer le document actuel", "Imprimer les pages sélectionnées",
  "Datei in einem neuen Fenster öffnen", "Das aktuelle Dokument speichern", "Die ausgewählten Seiten drucken",
  "Abrir el archivo en una ventana nueva", "Guardar el documento actual", "Imprimir las páginas seleccionadas",
  "Apri il file in una nuova finestra", "Salva il documento corrente", "Stampa le pagine selezionate",
  "Delete the selected rows from the table", "Insert a new slide after this one", "Check the spelling of the text",
];
let embedder;
let phrases; // Int8Index: the phrase list's vectors as int8 codes

async function timed(fn) {
  const t = performance.now();
  const value = await fn();
  return [value, performance.now() - t];
}

async function compare() {
  const [a, ta] = await timed(() => embedder.embed($("a").value));
  const [b, tb] = await timed(() => embedder.embed($("b").value));
  $("similarity").textContent = cosine(a, b).toFixed(3);
  $("timing").textContent = `${ta.toFixed(1)} ms + ${tb.toFixed(1)} ms`;
}

async function search() {
  const [q, t] = await timed(() => embedder.embed($("query").value));
  const scores = phrases.scores(q);
  const ranked = PHRASES.map((p, i) => [scores[i], p]).sort((x, y) => y[0] - x[0]).slice(0, 5);
  $("results").replaceChildren(...ranked.map(([s, p]) => {
    const li = document.createElement("li");
    li.textContent = `${s.toFixed(3)}  ${p}`;
    return li;
  }));
  $("search-timing").textContent = `${t.toFixed(1)} ms`;
}

// Used by the browser test: the shared Python test vectors, checked on this device.
window.runTestVectors = async () => {
  const vectors = await fetch("model/testvectors.json").then((r) => r.json());
  const results = [];
  for (const v of vectors.cases) {
    const ids = embedder.tokenize(v.text);
    const vec = await embedder.embed(v.text);
    const codes = quantize(v.embedding, phrases.lo, phrases.step); // Python's vector, this page's quantiser
    const codeDiff = Math.max(0, ...codes.map((c, d) => Math.abs(c - v.int8[d])));
    results.push({ text: v.text, idsEqual: JSON.stringify(ids) === JSON.stringify(v.ids), ids,
                   cosine: v.ids.length ? cosine(vec, v.embedding) : 1, int8CodeDiff: codeDiff });
  }
  return results;
};

// Used by benchmarks: this device's embeddings of any texts, for comparison with other runtimes.
window.embedTexts = async (texts) => {
  const out = [];
  for (const t of texts) out.push(Array.from(await embedder.embed(t)));
  return out;
};

window.timeEmbedding = async (text, n) => {
  await embedder.embed(text);
  const times = [];
  for (let i = 0; i < n; i++) times.push((await timed(() => embedder.embed(text)))[1]);
  return times;
};

async function main() {
  $("status").textContent = "loading model…";
  const [, t] = await timed(async () => { embedder = await Embedder.load(); });
  const calibration = await fetch("model/calibration.json").then((r) => r.json());
  phrases = new Int8Index(calibration, embedder.dim);
  for (const p of PHRASES) phrases.add(await embedder.embed(p));
  $("status").textContent = `ready (model loaded in ${t.toFixed(0)} ms, on this device; ${phrases.size} phrases `
    + `indexed in ${phrases.bytes} bytes as int8, ${4 * phrases.bytes} as float32)`;
  $("status").dataset.ready = "1";
  $("compare").addEventListener("click", compare);
  $("search").addEventListener("click", search);
  await compare();
}

if ("serviceWorker" in navigator && location.protocol !== "file:") {
  navigator.serviceWorker.register("sw.js").catch(() => {});
}
main().catch((e) => { $("status").textContent = "error: " + e.message; console.error(e); });
