// Offline after the first visit: cache-first for the app shell, the model and the runtime.
const CACHE = "edge-xsent-v4";
self.addEventListener("install", (e) => e.waitUntil(caches.open(CACHE).then((c) => c.addAll([
  "./", "index.html", "app.js", "embedder.js", "compact.js", "vendor/tokenizers.min.mjs", "manifest.webmanifest", "icon.svg",
]))));
self.addEventListener("fetch", (e) => {
  if (e.request.method !== "GET") return;
  e.respondWith(caches.match(e.request).then((hit) => hit || fetch(e.request).then((res) => {
    const copy = res.clone();
    caches.open(CACHE).then((c) => c.put(e.request, copy));
    return res;
  })));
});
