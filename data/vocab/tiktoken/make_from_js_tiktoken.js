// Re-creates the four bundled tiktoken rank files from npm js-tiktoken.
//
// js-tiktoken ships each encoding as dist/ranks/NAME.cjs: an object whose
// "bpe_ranks" string holds lines "<anything> <first rank> <base64 token>
// <base64 token> ...", the tokens taking consecutive ranks from the first
// (a gap, such as p50k_base's 50256 which <|endoftext|> takes, starts a new
// line). This writes them back in OpenAI's published format, one
// "<base64 token> <rank>\n" per token in rank order, and refuses to write a
// file whose SHA-256 differs from the one OpenAI publishes: the
// expected_hash of tiktoken_ext/openai_public.py (openai/tiktoken), the same
// values tokenizer/read_tiktoken.c checks on load.
//
// Run from the repository root:
//
//     (mkdir -p /tmp/npmwork && cd /tmp/npmwork && npm install js-tiktoken@1.0.21)
//     NODE_PATH=/tmp/npmwork/node_modules node data/vocab/tiktoken/make_from_js_tiktoken.js
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");

const PUBLISHED_SHA256 = {
  r50k_base: "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
  p50k_base: "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
  cl100k_base: "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
  o200k_base: "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
};
const OUT = "data/vocab/tiktoken";

// The package's "exports" hide package.json and the rank files from
// require(), so find the package folder and read them by path.
const pkg = path.dirname(path.dirname(require.resolve("js-tiktoken")));
const version = JSON.parse(fs.readFileSync(path.join(pkg, "package.json"), "utf8")).version;

let failed = false;
for (const [name, want] of Object.entries(PUBLISHED_SHA256)) {
  const ranks = require(path.join(pkg, "dist", "ranks", `${name}.cjs`));
  const byRank = [];
  for (const line of ranks.bpe_ranks.split("\n").filter(Boolean)) {
    const [, first, ...tokens] = line.split(" ");
    tokens.forEach((token, i) => byRank.push([Number.parseInt(first, 10) + i, token]));
  }
  byRank.sort((a, b) => a[0] - b[0]);
  const text = byRank.map(([rank, token]) => `${token} ${rank}\n`).join("");
  const got = crypto.createHash("sha256").update(text).digest("hex");
  if (got !== want) {
    console.error(`${name}: sha256 ${got}, expected ${want} (OpenAI's published file); not written`);
    failed = true;
    continue;
  }
  fs.writeFileSync(path.join(OUT, `${name}.tiktoken`), text);
  console.log(`${name}.tiktoken: ${byRank.length} ranks from js-tiktoken ${version}, sha256 ${got}`);
}
process.exit(failed ? 1 : 0);
