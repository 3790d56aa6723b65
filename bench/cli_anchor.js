// Anchor side of bench/cli.sh: a whole process that does what
// `lipi encode --format ids FILE` does with npm tiktoken (single-threaded
// WebAssembly): load the encoding, read the file, encode every line
// (encode_ordinary) and write its ids, space-separated, one line per input
// line, to stdout. Timed from outside (/usr/bin/time), load included; run
// on an empty file to measure the load alone.
//
//   ANCHORS=/tmp/npmwork node cli_anchor.js cl100k_base TEXT > IDS
const fs = require('fs');
const path = require('path');
const [spec, textPath] = process.argv.slice(2);
const enc = require(path.join(process.env.ANCHORS, 'node_modules', 'tiktoken')).get_encoding(spec);
const lines = fs.readFileSync(textPath, 'utf8').split('\n');
if (lines.length && lines[lines.length - 1] === '') lines.pop();
let buf = [];
for (const l of lines) {
  buf.push(enc.encode_ordinary(l).join(' '));
  if (buf.length === 4096) { fs.writeSync(1, buf.join('\n') + '\n'); buf = []; }
}
if (buf.length) fs.writeSync(1, buf.join('\n') + '\n');
enc.free();
