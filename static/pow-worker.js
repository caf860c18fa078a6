// Proof-of-work solver for the waiting room's optional join challenge (API.md "Proof of work"),
// run in a Web Worker so the page stays responsive. Finds a decimal `solution` such that
// SHA-256(challenge + ":" + solution) starts with `difficulty` zero bits.
self.onmessage = async function (e) {
  "use strict";
  const { challenge, difficulty } = e.data;
  const enc = new TextEncoder();
  const fullBytes = Math.floor(difficulty / 8);
  const restBits = difficulty % 8;
  const mask = restBits ? (0xff << (8 - restBits)) & 0xff : 0;
  for (let n = 0; ; n++) {
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", enc.encode(challenge + ":" + n)));
    let ok = true;
    for (let i = 0; i < fullBytes; i++) if (digest[i] !== 0) { ok = false; break; }
    if (ok && restBits && (digest[fullBytes] & mask) !== 0) ok = false;
    if (ok) { self.postMessage({ solution: String(n), tries: n + 1 }); return; }
  }
};
