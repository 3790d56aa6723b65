// Anchor side of bench/encode.sh: encodes every line of a file with npm
// tiktoken or npm tokenizers (Hugging Face) and times only the encoding loop
// inside this process (loading the tokenizer and reading the file are not
// timed). Writes the ids, one line per input line, for the id check.
//
//   node encode_anchor.js tiktoken cl100k_base|o200k_base TEXT IDS_OUT
//   node encode_anchor.js tokenizers TOKENIZER.json TEXT IDS_OUT
//
// Prints: seconds=S cpu_seconds=C bytes=B lines=L tokens=T peak_rss_MB=M
// Hugging Face runs encodeBatch over chunks of 1000 lines, so it uses the
// Rayon threads RAYON_NUM_THREADS allows; tiktoken's package is
// single-threaded WebAssembly. Bytes exclude newlines, as in bench/encode.
const fs = require('fs');
const path = require('path');
const [kind, spec, textPath, outPath] = process.argv.slice(2);
const anchors = process.env.ANCHORS;
const need = (m) => require(path.join(anchors, 'node_modules', m));

async function main() {
  let text = fs.readFileSync(textPath, 'utf8');
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const bytes = lines.reduce((a, l) => a + Buffer.byteLength(l, 'utf8'), 0);
  let encodeAll;
  if (kind === 'tiktoken') {
    const enc = need('tiktoken').get_encoding(spec);
    encodeAll = async () => lines.map((l) => enc.encode_ordinary(l));
  } else {
    const tok = need('tokenizers').Tokenizer.fromFile(spec);
    encodeAll = async () => {
      const out = [];
      for (let i = 0; i < lines.length; i += 1000) {
        const encs = await tok.encodeBatch(lines.slice(i, i + 1000), { addSpecialTokens: false });
        for (const e of encs) out.push(e.getIds());
      }
      return out;
    };
  }
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  const ids = await encodeAll();
  const c1 = process.cpuUsage(c0);
  const sec = Number(process.hrtime.bigint() - t0) / 1e9;
  let tokens = 0;
  const w = fs.openSync(outPath, 'w');
  let buf = [];
  for (const v of ids) {
    tokens += v.length;
    buf.push(Array.from(v).join(' '));
    if (buf.length === 4096) { fs.writeSync(w, buf.join('\n') + '\n'); buf = []; }
  }
  if (buf.length) fs.writeSync(w, buf.join('\n') + '\n');
  fs.closeSync(w);
  const cpu = (c1.user + c1.system) / 1e6;
  const rss = process.resourceUsage().maxRSS / 1024;
  console.log(`seconds=${sec.toFixed(3)} cpu_seconds=${cpu.toFixed(3)} bytes=${bytes} ` +
              `lines=${lines.length} tokens=${tokens} peak_rss_MB=${rss.toFixed(0)}`);
}
main().catch((e) => { console.error(e); process.exit(1); });
