// ONNX Runtime side of bench/embed.sh (npm onnxruntime-node, CPU execution
// provider, all graph optimizations, intra-op threads as given and not
// spinning, one inter-op thread, sequential execution).
//
//   node bench/embed_ort.js DIR THREADS FIXED REAL OUT
//
// DIR/model.onnx is embed_anchor.py's export (input_ids, attention_mask ->
// mean-pooled embedding). Batches as sentence-transformers feeds them: 32
// consecutive lines of the id file, padded to the longest. Prints one line
// per id set in embed_anchor.py's format and writes the REAL set's
// embeddings (float32, file order) to OUT.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(process.env.ORT_MODULE || 'onnxruntime-node');

const BATCH = 32;

function readIds(file) {
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim())
    .map((l) => l.trim().split(/\s+/).map(Number));
}

function batches(seqs) {
  const out = [];
  for (let i = 0; i < seqs.length; i += BATCH) {
    const group = seqs.slice(i, i + BATCH);
    const L = Math.max(...group.map((s) => s.length));
    const ids = new BigInt64Array(group.length * L);
    const mask = new BigInt64Array(group.length * L);
    group.forEach((s, r) => s.forEach((id, k) => {
      ids[r * L + k] = BigInt(id);
      mask[r * L + k] = 1n;
    }));
    out.push({
      input_ids: new ort.Tensor('int64', ids, [group.length, L]),
      attention_mask: new ort.Tensor('int64', mask, [group.length, L]),
    });
  }
  return out;
}

function median(v) {
  const s = [...v].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

async function main() {
  const [dir, threadsArg, fixed, real, out] = process.argv.slice(2);
  if (!out) {
    console.error('usage: node embed_ort.js DIR THREADS FIXED REAL OUT');
    process.exit(2);
  }
  const threads = Number(threadsArg);
  const kind = fs.readFileSync(path.join(dir, 'shape'), 'utf8').trim();
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    // Threads that spin between operators burn CPU time that measures
    // nothing; bench/embed.sh compares tokens per CPU-second.
    extra: { session: { intra_op: { allow_spinning: '0' } } },
  });
  const runs = Number(process.env.RUNS || 3);
  for (const [name, file] of [['32x128', fixed], ['real', real]]) {
    const seqs = readIds(file);
    const bs = batches(seqs);
    const walls = [];
    const cpus = [];
    let vecs = [];
    for (let r = 0; r <= runs; r++) {
      vecs = [];
      const w0 = process.hrtime.bigint();
      const c0 = process.cpuUsage();
      for (const feeds of (r ? bs : bs.slice(0, 1))) {
        const res = await session.run(feeds);
        vecs.push(res.embedding.data);
      }
      if (r) {
        walls.push(Number(process.hrtime.bigint() - w0) * 1e-9);
        const c = process.cpuUsage(c0);
        cpus.push((c.user + c.system) * 1e-6);
      }
    }
    const tokens = seqs.reduce((a, s) => a + s.length, 0);
    const padded = bs.reduce((a, b) => a + b.input_ids.data.length, 0);
    const rss = process.resourceUsage().maxRSS;
    console.log(`onnxruntime ${kind} f32 ${name} ${threads} ${seqs.length} ${tokens} ${padded} ` +
      `${median(walls).toFixed(4)} ${median(cpus).toFixed(4)} ${rss}`);
    if (name === 'real') {
      const buf = Buffer.concat(vecs.map((v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength)));
      fs.writeFileSync(out, buf);
    }
  }
}

main().catch((e) => {
  console.error(String(e && e.stack ? e.stack : e));
  process.exit(1);
});
